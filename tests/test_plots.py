"""``python -m ppsweep.analyze`` on a real store: report, figure files, and refusals; Gantt PNGs."""

from __future__ import annotations

import zarr
import pytest

from ppsweep import build_schedule

from ppsweep.cli import analyze

from ppsweep.viz import plots
from ppsweep.sweep.runner import run_sweep
from ppsweep.sweep.evaluate import SweepSpec
from ppsweep.viz.trace import simulate_step

MODEL = {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16}
SYSTEM = {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7}
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("plots") / "small.zarr"
    spec = SweepSpec.from_config(
        {
            "name": "small",
            "schedules": ["gpipe", "1f1b", "chimera"],
            "p": [2, 4],
            "m": [4, 8],
            "bandwidth": {"start": 1e8, "stop": 1e12, "num": 9},
            "latency": [1e-7, 1e-6, 1e-5],
            "model": MODEL,
            "system": SYSTEM,
        }
    )
    run_sweep(spec, path, "", progress=False)
    return path


def assert_png(path, min_bytes=5_000):
    assert path.is_file(), path
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > min_bytes, (path, len(data))
    from PIL import Image

    with Image.open(path) as image:
        assert image.width >= 400 and image.height >= 200
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 16) or range(99)) > 8  # not blank


def test_analyze_writes_report_and_figures(store, capsys):
    assert analyze.main([str(store)]) == 0
    out = capsys.readouterr().out
    for heading in ("Winners", "Stability", "Crossovers", "Sensitivity", "Figures"):
        assert heading in out
    assert "gpipe vs chimera" in out  # chimera wins at high bandwidth, gpipe at low
    figures = store.parent / "small_figures"
    for name in ("winner_map.png", "t_sim_vs_m.png", "bubble_by_abstraction.png", "memory.png"):
        assert_png(figures / name)


def test_analyze_report_only_and_figures_dir(store, tmp_path, capsys):
    assert analyze.main([str(store), "--no-figures"]) == 0
    assert "Figures" not in capsys.readouterr().out
    assert analyze.figures_dir(tmp_path / "results" / "bw.zarr") == tmp_path / "results" / "bw_figures"


def test_analyze_bad_input_is_one_error_line(tmp_path, capsys):
    assert analyze.main([str(tmp_path / "missing.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "no such store" in err[0]
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w")  # a zarr store, not a ppsweep one
    assert analyze.main([str(tmp_path / "other.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a ppsweep results store" in err[0]
    (tmp_path / "file.zarr").write_text("x")
    assert analyze.main([str(tmp_path / "file.zarr")]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert analyze.main([]) == 2


def test_gantt_charts(tmp_path):
    from ppsweep.cost_model import ModelConfig, SystemConfig

    table = build_schedule("chimera", 4, 8)
    assert_png(plots.plot_table_gantt(table, tmp_path / "table.png"))
    result = simulate_step(table, ModelConfig.from_mapping(MODEL), SystemConfig.from_mapping(SYSTEM), bandwidth=1e9, mode="contention")
    assert_png(plots.plot_step_gantt(result.record, tmp_path / "step.png"))
