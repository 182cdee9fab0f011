"""``python -m ppsweep.show``: header, grid, CSV output and one-line errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ppsweep.viz import show
from ppsweep.tables.build import build_schedule
from ppsweep.tables.interchange import read_csv
from ppsweep.schedules import SCHEDULES, gpipe
from ppsweep.schedules.base import Schedule, no_formula
from ppsweep.tables.table import format_table


def test_show_prints_header_and_grid(capsys):
    assert show.main(["1f1b", "p=4", "m=8"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    head = lines[0]
    for piece in ("schedule=1f1b", "p=4", "m=8", "options: none", "T=33",
                  "bubble: table 0.2727, formula 0.2727", "peak activations: table 4, formula 4"):
        assert piece in head
    # 1F1B by hand (F = 1 slot, B = 2, "·" continues B): worker w runs p − w warm-up forwards,
    # then alternates B and F; w3 starts at slot 3 and the step takes 3 + 8 · 3 + 6 = 33 slots.
    grid = (
        "w0  | F0 F1 F2 F3 .  .  .  .  .  .  B0 ·  F4 B1 ·  F5 B2 ·  F6 B3 ·  F7 B4 ·  .  B5 ·  .  B6 ·  .  B7 ·\n"
        "w1  | .  F0 F1 F2 .  .  .  .  B0 ·  F3 B1 ·  F4 B2 ·  F5 B3 ·  F6 B4 ·  F7 B5 ·  .  B6 ·  .  B7 ·  .  .\n"
        "w2  | .  .  F0 F1 .  .  B0 ·  F2 B1 ·  F3 B2 ·  F4 B3 ·  F5 B4 ·  F6 B5 ·  F7 B6 ·  .  B7 ·  .  .  .  .\n"
        "w3  | .  .  .  F0 B0 ·  F1 B1 ·  F2 B2 ·  F3 B3 ·  F4 B4 ·  F5 B5 ·  F6 B6 ·  F7 B7 ·  .  .  .  .  .  ."
    )
    assert "\n".join(lines[1:5]) == grid
    assert lines[1].startswith("w0  | F0 F1 F2 F3")


def test_show_slot_lengths_and_intermixed_options(capsys):
    assert show.main(["gpipe", "--f-slots", "2", "p=2", "m=3", "--b-slots", "3"]) == 0
    out = capsys.readouterr().out
    assert "(f_slots=2, b_slots=3)" in out
    assert format_table(build_schedule("gpipe", 2, 3, f_slots=2, b_slots=3)) in out


def test_show_csv_written_and_readable(tmp_path, capsys):
    path = tmp_path / "g.csv"
    assert show.main(["gpipe", "p=3", "m=4", "--csv", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {path}" in out
    table = build_schedule("gpipe", 3, 4)
    back = read_csv(path)
    for name in ("kind", "micro", "stage", "replica", "placement"):
        np.testing.assert_array_equal(getattr(back, name), getattr(table, name))


def test_show_from_csv(tmp_path, capsys):
    path = tmp_path / "o.csv"
    assert show.main(["1f1b", "p=2", "m=2", "--csv", str(path)]) == 0
    capsys.readouterr()
    assert show.main(["--from-csv", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"schedule=csv (from {path}) p=2 m=2")
    assert "formula n/a" in out
    assert format_table(build_schedule("1f1b", 2, 2)) in out


def test_show_list(capsys):
    assert show.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SCHEDULES)
    for line, (name, schedule) in zip(lines, SCHEDULES.items()):
        assert line.startswith(name)
        assert schedule.description in line
        assert "[options:" in line


def test_parse_value():
    assert show.parse_value("4") == 4
    assert show.parse_value("-1") == -1
    assert show.parse_value("1:2") == "1:2"
    assert show.parse_assignments(["p=4", "split=1:2"]) == {"p": 4, "split": "1:2"}


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["nope", "p=4", "m=8"], "schedule: unknown name 'nope'; accepted:"),
        (["1f1b", "p=1", "m=8"], "p: must be an integer >= 2, got 1"),
        (["1f1b", "p=4", "m=0"], "m: must be an integer >= 1, got 0"),
        (["1f1b", "p=x", "m=2"], "p: must be an integer >= 2, got 'x'"),
        (["1f1b", "p=4"], "m: required"),
        (["1f1b", "p=4", "m=8", "waves=2"], "unknown option 'waves'; accepted: none"),
        (["1f1b", "p4", "m=8"], "argument 'p4': expected KEY=VALUE"),
        (["1f1b", "p=4", "p=5", "m=8"], "p: given twice"),
        ([], "SCHEDULE: required, one of"),
        (["1f1b", "p=4", "m=8", "--f-slots", "x"], "argument --f-slots: invalid int value"),
        (["1f1b", "p=4", "m=8", "--b-slots", "0"], "b_slots: must be an integer >= 1"),
        (["1f1b", "p=4", "m=8", "--nope"], "unrecognized arguments: --nope"),
        (["--from-csv", "/nonexistent/x.csv"], "--from-csv: cannot read"),
    ],
)
def test_bad_input_one_line_exit_2(argv, expected, capsys):
    assert show.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert expected in err


def test_malformed_csv_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("0F0,0B0\n1F0,X3\n")
    assert show.main(["--from-csv", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == ("error: row 1, column 1: cell 'X3' is not <stage><F|B|I|W><microbatch> (e.g. 0F3) "
                   "or (<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B\n")


def test_unsupported_point_one_line_exit_2(monkeypatch, capsys):
    def even_only(p, m):
        return f"p: must be even, got {p}" if p % 2 else None

    fake = Schedule("even_only_test", gpipe.build_order, even_only, no_formula, no_formula)
    monkeypatch.setitem(SCHEDULES, fake.name, fake)
    assert show.main(["even_only_test", "p=3", "m=4"]) == 2
    err = capsys.readouterr().err
    assert err == "error: even_only_test at p=3, m=4: p: must be even, got 3\n"
    assert show.main(["even_only_test", "p=2", "m=4"]) == 0
    assert "bubble: table 0.2000, formula n/a" in capsys.readouterr().out


@pytest.mark.skipif("chimera" not in SCHEDULES, reason="chimera not registered yet")
def test_chimera_odd_p_is_refused(capsys):
    assert show.main(["chimera", "p=3", "m=4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_real_command_line(tmp_path):
    path = tmp_path / "h.csv"
    good = subprocess.run(
        [sys.executable, "-m", "ppsweep.show", "1f1b", "p=4", "m=8", "--csv", str(path)],
        capture_output=True, text=True, timeout=60,
    )
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("schedule=1f1b p=4 m=8")
    assert "w3  |" in good.stdout
    assert read_csv(path).length == 33
    bad = subprocess.run(
        [sys.executable, "-m", "ppsweep.show", "1f1b", "p=1", "m=8"],
        capture_output=True, text=True, timeout=60,
    )
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr == "error: p: must be an integer >= 2, got 1\n"
