"""The layout sweep (docs/contract.md §3b): enumeration of splits, validity codes, the store, the analysis."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ppsweep.layout import INVALID_REASONS, Layout, layout_costs, replica_model, simulate_layout, why_invalid
from ppsweep.sweep.config import load_config
from ppsweep.sweep.layout_eval import unit_layouts
from ppsweep.tables.build import build_schedule

TINY = [
    "+sweep=layout", "gpus=[16]", "tp=[1,2,8]", "cp=[1,2]", "p=[2,4]", "m=[2,4]", "schedules=[1f1b,gpipe]",
    "model.layers=4", "model.hidden=64", "model.heads=4", "model.sequence=16", "model.vocab=128",
    "model.global_batch=16", "recompute=[none,full]", "bandwidth=[1.0e9,1.0e10]", "latency=[1.0e-6]",
    "memory_capacity=[1.0e3,1.0e9]",
]


def test_gpus_enumerates_every_split_and_names_why_the_others_fail():
    spec = load_config(TINY)
    assert spec.layout_dims == ("gpus", "tp", "cp")
    got = {(lay.tp, lay.cp): (lay.dp, why_invalid(lay, spec.model, 4, gpus)) for _, lay, gpus in unit_layouts(spec, 2)}
    # p = 2, m = 4, 16 GPUs, G = 16, 4 heads, s = 16: dp = 16/(tp·2·cp) where whole
    assert got[(1, 1)] == (8, "dp·m does not divide global_batch (dp·m = 32, global_batch = 16)")
    assert got[(2, 1)] == (4, None)
    assert got[(2, 2)] == (2, None)
    assert got[(1, 2)] == (4, None)
    assert got[(8, 1)][1].startswith("tp does not divide heads")
    assert got[(8, 2)] == (1, "tp·p·dp·cp is not gpus (tp·p·dp·cp = 32, gpus = 16)")
    assert INVALID_REASONS[0] == "runs"
    model = spec.model
    assert why_invalid(Layout(tp=1, p=3, dp=1), model, 1) .startswith("the stages do not divide layers")
    assert why_invalid(Layout(cp=16, p=1), model, 1).startswith("2·cp does not divide sequence")


def test_a_bad_layout_key_is_refused_with_one_line():
    with pytest.raises(ValueError, match="dp: with gpus"):
        load_config([*TINY, "dp=[2]"])
    with pytest.raises(ValueError, match="layout.zero: unknown option"):
        load_config([*TINY, "+layout.zero=true"])
    with pytest.raises(ValueError, match="layout.order: must be a permutation"):
        load_config([*TINY, "+layout.order=[tp,dp,pp]"])


def test_tiny_layout_sweep_end_to_end(tmp_path):
    from ppsweep.analysis.layouts import fastest_layouts, layout_report
    from ppsweep.store.open import open_results
    from ppsweep.sweep.runner import run_sweep

    spec = load_config(TINY)
    report = run_sweep(spec, tmp_path / "tiny.zarr", "tiny", progress=False, workers=1)
    assert report.complete
    ds = open_results(tmp_path / "tiny.zarr").load()
    assert ds["t_sim"].dims == ("schedule", "p", "m", "gpus", "tp", "cp", "recompute", "system", "bandwidth", "latency")
    # valid exactly where the layout runs (both schedules run every p, m here)
    runs = (ds["layout_invalid"] == 0).transpose("p", "m", "gpus", "tp", "cp")
    for name in ("1f1b", "gpipe"):
        assert (ds["valid"].sel(schedule=name).transpose(*runs.dims) == runs).all()
    assert int(runs.sum()) > 0 and int((~runs).sum()) > 0
    # one point against the layout model called directly
    point = {"schedule": "1f1b", "p": 2, "m": 4, "gpus": 16, "tp": 2, "cp": 1, "recompute": "full", "system": "h100",
             "bandwidth": 1.0e10, "latency": 1.0e-6}
    model = dataclasses.replace(spec.model, recompute="full")
    system = dict(zip([s.name for s in spec.systems], spec.systems))["h100"]
    table = build_schedule("1f1b", 2, 4)
    lc = layout_costs(model, system, table, Layout(tp=2, p=2, dp=4), spec.layout, alpha=1.0e-6, beta=1.0e10)
    _, t_step = simulate_layout(table, lc)
    assert float(ds["t_sim"].sel(point)) == pytest.approx(float(t_step), rel=1e-12)  # a grid and one point: last bits
    assert float(ds["tokens_per_s"].sel(point)) == pytest.approx(16 * 16 / float(t_step), rel=1e-12)
    assert float(ds["dp"].sel(p=2, m=4, gpus=16, tp=2, cp=1)) == 4
    assert replica_model(model, Layout(dp=4)).microbatch_size(4) == 1.0
    # the fastest that fits: nothing at 1 kB, the fastest valid option at 1 GB (every option fits there)
    result = fastest_layouts(ds)
    assert (result["choice"].sel(memory_capacity=1.0e3) == -1).all()
    big = result.sel(memory_capacity=1.0e9, system="a100", bandwidth=1.0e9, latency=1.0e-6, gpus=16)
    t = ds["t_sim"].sel(system="a100", bandwidth=1.0e9, latency=1.0e-6, gpus=16)
    assert float(big["t_fit"]) == float(t.min())
    assert float(big["t_runner_up"]) >= float(big["t_fit"]) and float(big["margin"]) >= 0
    assert float(big["t_other_layout"]) >= float(big["t_fit"])
    lines, _ = layout_report(ds)
    assert lines[0].startswith("Fastest layout that fits") and any("TFLOP/s per GPU" in line for line in lines)
    assert np.isfinite(float(big["model_flops_per_gpu"]))
    # the explorer: one layout at a time
    from ppsweep.cli.support import UsageError
    from ppsweep.viz import explore_cli

    with pytest.raises(UsageError, match="choose one value of gpus|choose one value of tp"):
        explore_cli.run([str(tmp_path / "tiny.zarr"), "--html", str(tmp_path / "x.html")])
    sel = ["--sel", "tp=2", "--sel", "cp=1", "--sel", "recompute=full"]
    assert explore_cli.run([str(tmp_path / "tiny.zarr"), "--html", str(tmp_path / "x.html"), *sel]).startswith("wrote")
