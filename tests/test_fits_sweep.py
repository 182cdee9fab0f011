"""Recomputation and memory capacity as sweep dimensions: the store, `fits`, and the analysis."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import xarray as xr

from ppsweep import build_schedule
from ppsweep.analysis.fits import fastest_that_fits
from ppsweep.cost_model import memory_figures, stage_costs
from ppsweep.engine.core import simulate
from ppsweep.sweep.runner import run_sweep
from ppsweep.sweep.evaluate import SweepSpec

from test_sweep_store import SYSTEM, config as store_config  # tests/ is on sys.path (pytest's rootdir import)


def config(**overrides):
    """The store tests' sweep with both new axes and a smaller grid."""
    return store_config(**{
        "name": "fits_test", "bandwidth": [1e9, 1e11], "latency": [1e-6],
        "recompute": ["none", "full"], "memory_capacity": [2e9, 4e9], **overrides,
    })


def test_recompute_and_capacity_dimensions(tmp_path):
    spec = SweepSpec.from_config(config())
    report = run_sweep(spec, tmp_path / "fits.zarr", "yaml: 1", progress=False)
    assert report.complete
    ds = xr.open_zarr(tmp_path / "fits.zarr")
    assert ds.t_sim.dims == ("schedule", "p", "m", "recompute", "bandwidth", "latency")
    assert ds.peak_memory_bytes.dims == ("schedule", "p", "m", "recompute")
    assert ds.valid.dims == ds.bubble_table.dims == ("schedule", "p", "m")
    assert ds.fits.dims == ("schedule", "p", "m", "recompute", "memory_capacity")
    assert ds.memory_capacity.attrs["units"] == "bytes"
    table = build_schedule("gpipe", 4, 8)
    for mode in ("none", "full"):
        model = dataclasses.replace(spec.model, recompute=mode)
        figures = memory_figures(model, table, 8)
        here = ds.sel(schedule="gpipe", p=4, m=8, recompute=mode)
        assert float(here.peak_memory_bytes) == figures.peak_memory_bytes
        assert here.fits.values.tolist() == [figures.peak_memory_bytes <= 2e9, figures.peak_memory_bytes <= 4e9]
        costs = stage_costs(model, spec.system, table)
        direct = simulate(table, costs.t_f[0], costs.t_b[0], 1e-6, spec.bandwidth, costs.msg_bytes).t_sim
        np.testing.assert_allclose(here.t_sim.sel(latency=1e-6).values, direct, rtol=1e-12)
    # Full recomputation stores 2sbh instead of sbh(34 + 5as/h) per layer and costs a forward per backward.
    none, full = ds.sel(recompute="none"), ds.sel(recompute="full")
    assert bool((full.peak_activation_bytes < none.peak_activation_bytes).all())
    assert bool((full.t_sim > none.t_sim).all())
    # Ranks stay among the valid schedules at each point, recompute mode by mode.
    assert set(np.unique(ds.rank_sim.values)) <= {1.0, 2.0}
    result = fastest_that_fits(ds)
    assert result.choice.dims == ("p", "m", "bandwidth", "latency", "memory_capacity")
    # The 4 GB cap admits at least what the 2 GB cap does.
    n_fit = result.n_fit.transpose("memory_capacity", ...).values
    assert np.all(n_fit[1] >= n_fit[0]) and n_fit.sum() > 0
    # The analyze command reports it and draws the map (and its other figures cope with the new axes).
    from ppsweep.cli.analyze import run

    text = run([str(tmp_path / "fits.zarr"), "--figures", str(tmp_path / "figures")])
    assert "Fastest option that fits" in text and "p=4, 4 GB:" in text
    assert (tmp_path / "figures" / "fits_map.png").exists() and (tmp_path / "figures" / "memory.png").exists()


def test_defaults_keep_the_store_schema(tmp_path):
    spec = SweepSpec.from_config(config(recompute=None, memory_capacity=None, p=[2], m=[4]))
    run_sweep(spec, tmp_path / "plain.zarr", "yaml: 1", progress=False)
    ds = xr.open_zarr(tmp_path / "plain.zarr")
    assert "fits" not in ds and "recompute" not in ds.dims and "memory_capacity" not in ds.dims
    assert ds.peak_memory_bytes.dims == ("schedule", "p", "m")


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"recompute": ["none", "some"]}, "recompute: must be one of none, selective, full"),
        ({"recompute": ["full", "full"]}, "recompute: values must be distinct"),
        ({"memory_capacity": [0]}, "memory_capacity: must be > 0"),
        ({"system": {**SYSTEM, "memory_capacity": 1e9}}, "system.memory_capacity: with a recompute dimension"),
    ],
)
def test_bad_axes(overrides, message):
    with pytest.raises(ValueError, match=message):
        SweepSpec.from_config(config(**overrides))
