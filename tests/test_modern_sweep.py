"""Variants and user schedules in one sweep store; F&B schedules through the sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from ppsweep import build_schedule
from ppsweep.cost_model import stage_costs
from ppsweep.tables.interchange import write_csv
from ppsweep.engine.reference import reference_simulate
from ppsweep.sweep.runner import run_sweep
from ppsweep.sweep.evaluate import SweepSpec

MODEL = {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16}
SYSTEM = {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7, "fb_overlap": 0.25}


def test_variants_and_user_schedules_share_one_store(tmp_path):
    csv = tmp_path / "mine.csv"
    write_csv(build_schedule("zb_h2", 4, 8), csv)
    schedules = ["1f1b", "interleaved_1f1b@v=2", "interleaved_1f1b@v=4", "chimera", "chimera@split=1:2",
                 "dualpipev", str(csv)]
    cfg = {"name": "mix", "schedules": schedules, "p": [4], "m": [8, 16], "bandwidth": [1e9, 1e11],
           "latency": [1e-6], "model": MODEL, "system": SYSTEM, "comm": {"mode": ["overlap", "blocking"]}}
    spec = SweepSpec.from_config(cfg)
    assert run_sweep(spec, tmp_path / "mix.zarr", "yaml: 1", progress=False).complete
    ds = xr.open_zarr(tmp_path / "mix.zarr")
    assert list(ds.schedule.values) == schedules
    options = json.loads(ds.attrs["schedule_options"])
    assert options["interleaved_1f1b@v=4"] == {"v": 4} and options["interleaved_1f1b@v=2"] == {"v": 2}
    assert options["chimera@split=1:2"] == {"split": "1:2", "concat": "direct"} and options[str(csv)] == {}
    # The CSV schedule runs at its own (p, m) only.
    assert bool(ds.valid.sel(schedule=str(csv), p=4, m=8)) and not bool(ds.valid.sel(schedule=str(csv), p=4, m=16))
    assert np.isnan(float(ds.bubble_formula.sel(schedule=str(csv), p=4, m=8)))
    # Variants are different tables; each point is the reference simulator's on that table.
    for label, kwargs in [("interleaved_1f1b@v=4", {"v": 4}), ("dualpipev", {})]:
        table = build_schedule(label.split("@")[0], 4, 16, **kwargs)
        costs = stage_costs(spec.model, spec.system, table)
        want = reference_simulate(table, costs.t_f[0], costs.t_b[0], 1e-6, 1e9, costs.msg_bytes, "blocking",
                                  t_i=costs.t_i[0], t_w=costs.t_w[0], grad_bytes=costs.grad_bytes, fb_overlap=0.25)
        got = float(ds.t_sim.sel(schedule=label, p=4, m=16, comm="blocking", bandwidth=1e9, latency=1e-6))
        assert got == pytest.approx(want.t_sim, rel=1e-9)
    assert float(ds.bubble_table.sel(schedule="interleaved_1f1b@v=4", p=4, m=16)) < float(
        ds.bubble_table.sel(schedule="interleaved_1f1b@v=2", p=4, m=16))


def test_fb_overlap_is_checked():
    cfg = {"name": "x", "schedules": ["dualpipev"], "p": [2], "m": [4], "model": MODEL,
           "system": {**SYSTEM, "fb_overlap": 1.5}}
    with pytest.raises(ValueError, match=r"system.fb_overlap: must be in \[0, 1\]"):
        SweepSpec.from_config(cfg)
