"""PyTorch pipeline CSV export/import (ppsweep.tables.interchange)."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from ppsweep.tables.build import build_schedule, why_unsupported
from ppsweep.tables.interchange import CsvTableError, cell_to_op, op_to_cell, read_csv, write_csv
from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules import SCHEDULES
from ppsweep.schedules.base import ScheduleOrder
from ppsweep.tables.table import realize

ARRAYS = ("kind", "micro", "stage", "replica", "placement", "micro_replica")


def assert_same_table(a, b):
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.p, a.m, a.n_stages, a.split_backward) == (b.p, b.m, b.n_stages, b.split_backward)
    np.testing.assert_allclose(b.stage_fractions, np.full(b.n_stages, 1.0 / b.n_stages))


def round_trip(table, **slots):
    return read_csv(io.StringIO(write_csv(table)), **slots)


# --- cell text ---------------------------------------------------------------------------


def test_cell_text_follows_pytorch_action_strings():
    assert op_to_cell(Op(Kind.F, 3, 0)) == "0F3"
    assert op_to_cell(Op(Kind.B, 0, 12)) == "12B0"
    assert op_to_cell(Op(Kind.I, 10, 1)) == "1I10"
    assert op_to_cell(Op(Kind.W, 2, 3)) == "3W2"
    assert cell_to_op(" 2W7 ") == Op(Kind.W, 7, 2)
    assert cell_to_op("") is None
    assert cell_to_op("   ") is None
    for bad in ("F3", "0F", "0X3", "0SEND_F3", "0f3", "0F3x"):
        with pytest.raises(ValueError, match="is not <stage><F|B|I|W><microbatch>"):
            cell_to_op(bad)


# --- exact CSV text ----------------------------------------------------------------------


def test_small_1f1b_csv_cell_by_cell():
    table = build_schedule("1f1b", 2, 2)
    text = write_csv(table)
    rows = list(csv.reader(io.StringIO(text)))
    # 1F1B p=2 m=2: w0 runs F0 F1 B0 B1, w1 runs F0 B0 F1 B1; B lasts 2 slots and only its
    # first slot holds the cell.
    assert rows == [
        ["0F0", "0F1", "", "", "0B0", "", "", "0B1", ""],
        ["", "1F0", "1B0", "", "1F1", "1B1", "", "", ""],
    ]
    assert text == "0F0,0F1,,,0B0,,,0B1,\r\n,1F0,1B0,,1F1,1B1,,,\r\n"
    assert table.length == 9


def test_write_to_path_and_file_object(tmp_path):
    table = build_schedule("gpipe", 3, 2)
    path = tmp_path / "gpipe.csv"
    text = write_csv(table, path)
    assert path.read_bytes() == text.encode()
    buffer = io.StringIO()
    assert write_csv(table, buffer) == buffer.getvalue() == text
    assert_same_table(table, read_csv(path))
    assert_same_table(table, read_csv(str(path)))
    with open(path, newline="") as handle:
        assert_same_table(table, read_csv(handle))


# --- round trips -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p, m", [(2, 1), (3, 5), (4, 8)])
def test_round_trip_gpipe_1f1b(name, p, m):
    table = build_schedule(name, p, m)
    back = round_trip(table)
    assert_same_table(table, back)
    assert back.name == "csv"
    assert back.orders() == table.orders()


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("p, m", [(2, 4), (4, 8)])
def test_round_trip_every_schedule(name, p, m):
    reason = why_unsupported(name, p, m)
    if reason:
        pytest.skip(f"{name} at p={p}, m={m}: {reason}")
    table = build_schedule(name, p, m)
    assert_same_table(table, round_trip(table))


@pytest.mark.parametrize("f_slots, b_slots", [(2, 3), (1, 1)])
def test_round_trip_other_slot_lengths(f_slots, b_slots):
    table = build_schedule("1f1b", 3, 4, f_slots=f_slots, b_slots=b_slots)
    back = round_trip(table, f_slots=f_slots, b_slots=b_slots)
    assert_same_table(table, back)
    assert (back.f_slots, back.b_slots) == (f_slots, b_slots)


def _order(orders, n_stages, placement, micro_replica, split=False):
    return ScheduleOrder(
        "hand",
        len(orders),
        len(micro_replica),
        n_stages,
        tuple(tuple(row) for row in orders),
        placement=np.asarray(placement),
        micro_replica=np.asarray(micro_replica),
        stage_fractions=np.full(n_stages, 1.0 / n_stages),
        split_backward=split,
    )


def test_round_trip_split_backward():
    F, I, W = Kind.F, Kind.I, Kind.W
    orders = [
        [Op(F, 0, 0), Op(F, 1, 0), Op(I, 0, 0), Op(I, 1, 0), Op(W, 0, 0), Op(W, 1, 0)],
        [Op(F, 0, 1), Op(I, 0, 1), Op(F, 1, 1), Op(I, 1, 1), Op(W, 0, 1), Op(W, 1, 1)],
    ]
    table = realize(_order(orders, 2, [[0, 1]], [0, 0], split=True))
    text = write_csv(table)
    assert "0I0" in text and "1W1" in text and "B" not in text
    back = read_csv(io.StringIO(text))
    assert back.split_backward
    assert_same_table(table, back)


def test_round_trip_two_replicas_infers_placement():
    F, B = Kind.F, Kind.B
    # Chimera-like: replica 0 runs stage 0 on w0, stage 1 on w1; replica 1 the other way.
    orders = [
        [Op(F, 0, 0), Op(F, 1, 1), Op(B, 1, 1), Op(B, 0, 0)],
        [Op(F, 1, 0), Op(F, 0, 1), Op(B, 0, 1), Op(B, 1, 0)],
    ]
    table = realize(_order(orders, 2, [[0, 1], [1, 0]], [0, 1]))
    back = round_trip(table)
    assert back.n_replicas == 2
    np.testing.assert_array_equal(back.placement, [[0, 1], [1, 0]])
    np.testing.assert_array_equal(back.micro_replica, [0, 1])
    assert_same_table(table, back)


def test_columns_give_order_not_timing():
    # PyTorch-style CSV with no idle steps: re-timed as soon as possible.
    back = read_csv(io.StringIO("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"))
    assert_same_table(build_schedule("1f1b", 2, 2), back)


def test_blank_middle_row_is_an_idle_rank_and_trailing_blank_lines_are_ignored():
    back = read_csv(io.StringIO("0F0,0B0\n\n1F0,1B0\n\n\n"))
    assert back.p == 3
    assert not back.kind[1].any()
    np.testing.assert_array_equal(back.placement, [[0, 2]])
    # A trailing row of empty cells is a rank with nothing to do, not a blank line.
    assert read_csv(io.StringIO("0F0,0B0\n,,\n")).p == 2


# --- malformed CSVs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0F0,0B0\n1F0,X3\n", "row 1, column 1: cell 'X3' is not <stage><F|B|I|W><microbatch> (e.g. 0F3)"),
        ("0F0,0SEND_F0\n", "row 0, column 1: cell '0SEND_F0'"),
        ("0F0,0B0,0F0\n", "row 0, column 2: cell '0F0' appears a second time (first at row 0, column 0)"),
        ("0F0,0B0\n1F0\n", "row 1: cell '1B0' is missing"),
        ("0F1,0B1\n", "microbatch 0 has no cell in any row"),
        ("1F0,1B0\n", "stage 0 has no cell in any row"),
        ("0F0,0F1,0B0,0B1\n1F0,1B0,1B1\n", "row 1: cell '1F1' is missing (row 1, column 2: cell '1B1' is there)"),
        ("0F0,1B0\n1F0,0B0\n", "row 1, column 0: cell '1F0' is on rank 1"),
        ("0F0,0I0,0B0,0W0\n", "row 0, column 2: cell '0B0' is a full backward (B)"),
        ("0B0,0F0\n", "row 0, column 0: cell '0B0' can never run"),
        ("0F0,0F1,0B1,0B0\n1B0,1F0,1F1,1B1\n", "can never run"),
        ("", "empty CSV"),
        ("\n\n", "empty CSV"),
        (",,\n,\n", "no operations"),
    ],
)
def test_malformed_csv_raises_one_line(text, expected):
    with pytest.raises(CsvTableError) as info:
        read_csv(io.StringIO(text))
    message = str(info.value)
    assert expected in message
    assert "\n" not in message
    assert isinstance(info.value, ValueError)


def test_missing_op_names_its_row_even_when_other_kind_is_elsewhere():
    # 0B1 is missing; 0F1 (row 0) fixes the row where it belongs.
    with pytest.raises(CsvTableError, match=r"row 0: cell '0B1' is missing \(row 0, column 1: cell '0F1'"):
        read_csv(io.StringIO("0F0,0F1,0B0\n1F0,1B0,1B1\n"))


def test_bad_slot_lengths_are_csv_errors():
    with pytest.raises(CsvTableError, match="f_slots"):
        read_csv(io.StringIO("0F0,0B0\n"), f_slots=0)
