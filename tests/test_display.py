"""Units chosen by magnitude (one helper for text and figures), and no import cycle plots <-> trace."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from ppsweep.viz import trace
from ppsweep.viz.display import byte_unit, format_bytes, format_time, time_unit

ROOT = Path(__file__).resolve().parents[1]


def test_time_units_by_magnitude():
    assert format_time(66.74) == "66.74 s"  # not 6.674e+04 ms
    assert format_time(0.0042) == "4.2 ms"
    assert format_time(3.5e-6) == "3.5 µs"
    assert format_time(2e-10) == "0.2 ns"
    assert time_unit([0.004, 0.09]) == (1e-3, "ms")  # the largest value decides
    assert time_unit([np.nan, 0.0]) == (1.0, "s")


def test_byte_units_by_magnitude():
    assert format_bytes(2.677e13) == "26.77 TB"  # not 26,770 GB
    assert format_bytes(5.12e8) == "512 MB"
    assert byte_unit(np.array([1e11, 2.7e13])) == (1e12, "TB")
    assert format_bytes(12) == "12 B"


def test_trace_prints_the_step_time_in_the_unit_of_its_magnitude(capsys, tmp_path):
    assert trace.main(["gpipe", "p=2", "m=2", "--trace", str(tmp_path / "t.json")]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    value, unit = line.split("t_sim = ")[1].split(",")[0].split()
    assert unit in ("ns", "µs", "ms", "s") and 1 <= float(value) < 1000


def _imports(module: str) -> set[str]:
    tree = ast.parse((ROOT / "ppsweep" / "viz" / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_plots_does_not_import_trace():
    assert not any(name == "ppsweep.viz.trace" or name.startswith("ppsweep.viz.trace.") for name in _imports("plots"))
    assert "ppsweep.viz.display" in _imports("plots") and "ppsweep.viz.display" in _imports("trace")
