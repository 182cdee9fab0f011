"""Variants (name@option=value) and user schedules (module:function, entry point, CSV file)."""

from __future__ import annotations

import math
import sys

import pytest

import ppsweep
from ppsweep.tables.build import UnsupportedPointError, resolve_options
from ppsweep.tables.interchange import write_csv
from ppsweep.schedules import get_schedule
from ppsweep.schedules.user import _entry_point_schedule

GENERATOR = '''
from ppsweep import Kind, Op


def reversed_gpipe(p, m, lifo=True):
    """GPipe whose backwards run last-in first-out."""
    backs = reversed(range(m)) if lifo else range(m)
    backs = list(backs)
    return [[Op(Kind.F, j, w) for j in range(m)] + [Op(Kind.B, j, w) for j in backs] for w in range(p)]
'''


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    """An importable package ``mysched`` with a generator, and an entry point naming it."""
    (tmp_path / "mysched.py").write_text(GENERATOR)
    dist = tmp_path / "mysched-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mysched\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ppsweep.schedules]\nlifo_gpipe = mysched:reversed_gpipe\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _entry_point_schedule.cache_clear()
    yield tmp_path
    _entry_point_schedule.cache_clear()
    sys.modules.pop("mysched", None)


def test_variant_labels_fix_typed_options():
    assert resolve_options("interleaved_1f1b@v=4", {}) == {"v": 4}
    assert resolve_options("chimera@split=1:2", {}) == {"split": "1:2", "concat": "direct"}
    table = ppsweep.build_schedule("interleaved_1f1b@v=4", 4, 8)
    assert table.n_stages == 16 and table.orders() == ppsweep.build_schedule("interleaved_1f1b", 4, 8, v=4).orders()
    assert ppsweep.bubble_formula("interleaved_1f1b@v=4", 4, 8) == pytest.approx(3 / 35)


@pytest.mark.parametrize(
    "label,message",
    [
        ("interleaved_1f1b@v=x", "option v must be int"),
        ("interleaved_1f1b@w=2", "unknown option 'w'; accepted: v"),
        ("1f1b@v", "is not name@option=value"),
        ("nope@v=2", "unknown name 'nope'"),
        ("interleaved_1f1b@v=2@v=3", "sets option 'v' twice"),
    ],
)
def test_bad_labels_are_refused_naming_the_field(label, message):
    with pytest.raises(ValueError, match=message):
        ppsweep.build_schedule(label, 4, 8)


def test_label_and_options_must_not_both_set_an_option():
    with pytest.raises(ValueError, match="set by the label and again"):
        ppsweep.build_schedule("interleaved_1f1b@v=2", 4, 8, v=3)


def test_module_function_schedule(user_package):
    table = ppsweep.build_schedule("mysched:reversed_gpipe", 3, 4)
    assert table.orders()[0][4].micro == 3  # last in, first out
    assert table.length == ppsweep.build_schedule("gpipe", 3, 4).length
    fifo = ppsweep.build_schedule("mysched:reversed_gpipe@lifo=false", 3, 4)
    assert fifo.orders() == ppsweep.build_schedule("gpipe", 3, 4).orders()
    assert math.isnan(ppsweep.bubble_formula("mysched:reversed_gpipe", 3, 4))


def test_entry_point_schedule(user_package):
    assert get_schedule("lifo_gpipe").description == "GPipe whose backwards run last-in first-out."
    assert ppsweep.build_schedule("lifo_gpipe", 2, 3).orders()[1][3].micro == 2


def test_csv_file_schedule_runs_at_its_own_point(tmp_path):
    path = tmp_path / "mine.csv"
    write_csv(ppsweep.build_schedule("zb_h1", 4, 6), path)
    table = ppsweep.build_schedule(str(path), 4, 6)
    assert table.orders() == ppsweep.build_schedule("zb_h1", 4, 6).orders()
    with pytest.raises(UnsupportedPointError, match="the CSV file defines p=4, m=6"):
        ppsweep.build_schedule(str(path), 4, 8)


def test_unloadable_user_schedules_are_refused(tmp_path):
    with pytest.raises(ValueError, match="cannot load 'no_such_module:f'"):
        get_schedule("no_such_module:f")
    with pytest.raises(ValueError, match="not found"):
        get_schedule(str(tmp_path / "missing.csv"))
    bad = tmp_path / "bad.csv"
    bad.write_text("0F0,0X0\n")
    with pytest.raises(ValueError, match="bad.csv: row 0, column 1"):
        get_schedule(str(bad))
