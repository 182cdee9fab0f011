"""Per-worker orders equal PyTorch's (``torch.distributed.pipelining``), compute actions only.

The golden files under ``tests/golden/torch/`` were written by ``scripts/make_torch_goldens.py``
(PyTorch version in ``tests/golden/torch/VERSION``); torch is not needed here.
"""

from __future__ import annotations

import csv
import pathlib
import re

import pytest

import ppsweep
from ppsweep.tables.interchange import op_to_cell, read_csv
from ppsweep.schedules import SCHEDULES

GOLDEN = pathlib.Path(__file__).parent / "golden" / "torch"
FILE = re.compile(r"^(?P<name>[a-z0-9_]+)(?:@v=(?P<v>\d+))?_p(?P<p>\d+)_m(?P<m>\d+)\.csv$")
FILES = sorted(f.name for f in GOLDEN.glob("*.csv"))


def parse(name: str) -> tuple[str, dict, int, int]:
    match = FILE.match(name)
    options = {"v": int(match["v"])} if match["v"] else {}
    if match["name"] in ("interleaved_1f1b", "looped_bfs", "interleaved_zb") and not options:
        options = {"v": 2}
    return match["name"], options, int(match["p"]), int(match["m"])


def torch_rows(path: pathlib.Path, name: str, p: int, m: int) -> list[list[str]]:
    """PyTorch's rows, with its one known misprint undone.

    PyTorch's ``Schedule1F1B._get_pipeline_order`` numbers the forwards of the last rank from 1
    (``F1 … Fm``; it has no warm-up forward to start its counter at 0): the order it runs is
    ``F0 … F(m-1)`` (its ``_step_microbatches`` does), so these indices are shifted back by one.
    """
    with open(path, newline="") as f:
        rows = [row for row in csv.reader(f)]
    rows += [[] for _ in range(p - len(rows))]
    if name == "1f1b":
        last = rows[p - 1]
        assert [int(c[len(f"{p-1}F"):]) for c in last if "F" in c] == list(range(1, m + 1))
        rows[p - 1] = [re.sub(r"F(\d+)$", lambda g: f"F{int(g[1]) - 1}", c) if "F" in c else c for c in last]
    return rows


def our_rows(table) -> list[list[str]]:
    return [[op_to_cell(op) for op in row] for row in table.orders()]


def test_goldens_cover_every_pytorch_schedule():
    names = {parse(f)[0] for f in FILES}
    assert {"gpipe", "1f1b", "interleaved_1f1b", "looped_bfs", "interleaved_zb", "zbv", "dualpipev"} <= names
    assert (GOLDEN / "VERSION").read_text().startswith("torch ")


@pytest.mark.parametrize("filename", [f for f in FILES if parse(f)[0] in SCHEDULES])
def test_orders_equal_pytorch(filename):
    name, options, p, m = parse(filename)
    table = ppsweep.build_schedule(name, p, m, **options)
    assert our_rows(table) == torch_rows(GOLDEN / filename, name, p, m)


@pytest.mark.parametrize("line", (GOLDEN / "refused.txt").read_text().splitlines())
def test_points_pytorch_refuses(line):
    # Where PyTorch refuses a point, ours is out of range too, or it is a PyTorch-only limit.
    name, p, m = re.match(r"(\S+?)(?:@v=\d+)? p=(\d+) m=(\d+):", line).groups()
    name_options = parse(f"{line.split()[0]}_p{p}_m{m}.csv")
    if name_options[0] not in SCHEDULES:
        pytest.skip(f"{name} not registered")
    reason = ppsweep.tables.build.why_unsupported(name_options[0], int(p), int(m), **name_options[1])
    if name == "1f1b":  # PyTorch's 1F1B asks m >= p; ours runs any m (PyTorch's GPipe does too)
        assert reason is None
    else:
        assert reason is not None


@pytest.mark.parametrize("filename", ["dualpipev_p2_m4.csv", "dualpipev_p4_m9.csv", "zbv_p3_m5.csv", "interleaved_zb_p4_m8.csv"])
def test_pytorch_files_import_as_the_generated_tables(filename):
    # PyTorch's compute-only file, pairs and mixed B / I-W included, reads back as our table.
    name, options, p, m = parse(filename)
    imported = read_csv(GOLDEN / filename, name=name)
    built = ppsweep.build_schedule(name, p, m, **options)
    assert imported.orders() == built.orders()
    assert imported.length == built.length and imported.bubble_ratio() == built.bubble_ratio()
    assert imported.peak_activations() == built.peak_activations()


@pytest.mark.parametrize("filename", [f for f in FILES if f.startswith("1f1b_")])
def test_pytorch_1f1b_files_import_as_pytorch_writes_them(filename):
    # PyTorch's own file, its last rank's forwards numbered from 1, read (with a warning) as the order it runs.
    name, options, p, m = parse(filename)
    with pytest.warns(UserWarning, match="numbered from 1"):
        imported = read_csv(GOLDEN / filename, name=name)
    assert imported.orders() == ppsweep.build_schedule(name, p, m, **options).orders()

