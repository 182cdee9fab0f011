"""Sweeps into real zarr stores: schema, values against the engine, ranks, resume and refusal."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from ppsweep import build_schedule
from ppsweep.cost_model import stage_costs
from ppsweep.engine.core import simulate
from ppsweep.sweep.runner import run_sweep
from ppsweep.store.errors import IncompleteStoreWarning, StoreError
from ppsweep.store.open import open_for_sweep, open_results
from ppsweep.store.schema import VARIABLES
from ppsweep.store.units import write_unit
from ppsweep.sweep.evaluate import SweepSpec, evaluate_unit

MODEL = {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16}
SYSTEM = {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7}


def config(**overrides):
    cfg = {
        "name": "test",
        "schedules": ["gpipe", "1f1b"],
        "p": [2, 4],
        "m": [4, 8],
        "bandwidth": {"start": 1e8, "stop": 1e11, "num": 6},
        "latency": [1e-7, 1e-5],
        "model": MODEL,
        "system": SYSTEM,
        "comm": {"mode": "overlap"},
    }
    cfg.update(overrides)
    return cfg


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """``config()`` swept once by an uninterrupted run: (its report, the store); the tests only read it."""
    path = tmp_path_factory.mktemp("sweep_store") / "test.zarr"
    return run_sweep(SweepSpec.from_config(config()), path, "yaml: 1", progress=False), path


def test_store_schema_and_values(swept):
    spec = SweepSpec.from_config(config())
    report, path = swept
    assert report.complete and report.units_run == 4 and report.points_run == spec.n_points == 2 * 2 * 2 * 6 * 2
    ds = xr.open_zarr(path)
    assert dict(ds.sizes) == {"schedule": 2, "p": 2, "m": 2, "bandwidth": 6, "latency": 2}
    for name, (kind, units, _) in VARIABLES.items():
        assert ds[name].attrs["units"] == units and ds[name].attrs["long_name"]
        expected = ("schedule", "p", "m", "bandwidth", "latency") if kind == "point" else ("schedule", "p", "m")
        assert ds[name].dims == expected
    assert ds.attrs["complete"] and ds.attrs["config"] == "yaml: 1" and "ppsweep_version" in ds.attrs
    assert bool(ds.valid.all())
    # Values come from the engine and the tables.
    table = build_schedule("1f1b", 4, 8)
    costs = stage_costs(spec.model, spec.system, table)
    direct = simulate(table, costs.t_f[0], costs.t_b[0], 1e-5, spec.bandwidth, costs.msg_bytes).t_sim
    np.testing.assert_allclose(ds.t_sim.sel(schedule="1f1b", p=4, m=8, latency=1e-5).values, direct, rtol=1e-12)
    np.testing.assert_allclose(ds.throughput, 16 / ds.t_sim)
    assert float(ds.bubble_table.sel(schedule="gpipe", p=4, m=8)) == pytest.approx(3 / 11)
    assert float(ds.length_table.sel(schedule="gpipe", p=4, m=8)) == 33
    # GPipe and 1F1B tie by formula and table; 1F1B never beats GPipe with communication.
    assert set(np.unique(ds.rank_formula.values)) == {1.0}
    assert set(np.unique(ds.rank_table.values)) == {1.0}
    assert float(ds.rank_sim.sel(schedule="gpipe").max()) == 1.0


def test_comm_and_compute_axes(tmp_path):
    spec = SweepSpec.from_config(config(comm={"mode": ["overlap", "contention", "blocking"]}, compute=[1e14, 1e15], p=[4], m=[8]))
    assert spec.point_dims == ("schedule", "p", "m", "comm", "compute", "bandwidth", "latency")
    run_sweep(spec, tmp_path / "axes.zarr", "", progress=False)
    ds = xr.open_zarr(tmp_path / "axes.zarr")
    assert list(ds.comm.values) == ["overlap", "contention", "blocking"]
    t = ds.t_sim
    assert bool((t.sel(comm="contention") >= t.sel(comm="overlap") * (1 - 1e-12)).all())
    assert bool((t.sel(comm="blocking") >= t.sel(comm="overlap") * (1 - 1e-12)).all())
    assert bool((t.sel(compute=1e14) > t.sel(compute=1e15)).all())


def test_resume_computes_only_missing_units_and_matches(tmp_path, swept):
    spec = SweepSpec.from_config(config())
    full = swept[1]
    partial = tmp_path / "partial.zarr"
    group, pending = open_for_sweep(partial, spec, "")
    assert pending == spec.units()
    write_unit(group, spec, 0, 1, evaluate_unit(spec, 0, 1))  # as if killed after one unit
    with pytest.warns(IncompleteStoreWarning, match="3 of 4"):
        incomplete = open_results(partial)
    assert np.isnan(incomplete.t_sim.sel(p=4, m=8)).all()
    with pytest.raises(StoreError, match="incomplete"):
        open_results(partial, allow_incomplete=False)
    report = run_sweep(spec, partial, "", progress=False)
    assert report.units_run == 3 and report.complete
    a, b = xr.open_zarr(full), xr.open_zarr(partial)
    for name in list(VARIABLES) + ["valid"]:
        np.testing.assert_array_equal(a[name].values, b[name].values)
    assert run_sweep(spec, partial, "", progress=False).units_run == 0  # finished: left alone


def test_refuses_a_store_of_another_grid(tmp_path, swept):
    import shutil

    path = tmp_path / "s.zarr"
    shutil.copytree(swept[1], path)  # the shared store stays untouched
    other = SweepSpec.from_config(config(p=[2]))
    with pytest.raises(StoreError, match="different sweep"):
        run_sweep(other, path, "", progress=False)
    assert run_sweep(other, path, "", overwrite=True, progress=False).complete


def test_memory_cap_marks_points_invalid(tmp_path):
    spec = SweepSpec.from_config(config(system={**SYSTEM, "memory_capacity": 1.0}))
    results = evaluate_unit(spec, 0, 0)
    assert not results["valid"].any()
    assert np.isnan(results["t_sim"]).all() and np.isnan(results["rank_sim"]).all()


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"p": [1]}, "p"),
        ({"m": [0]}, "m"),
        ({"bandwidth": [-1.0]}, "bandwidth"),
        ({"latency": [-1e-6]}, "latency"),
        ({"schedules": ["nope"]}, "schedule"),
        ({"comm": {"mode": "psychic"}}, "comm.mode"),
        ({"bandwidth": {"start": 1, "stop": 10}}, "bandwidth"),
        ({"p": [4, 4]}, "p"),
        ({"name": "../x"}, "name"),
    ],
)
def test_bad_config_names_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        SweepSpec.from_config(config(**overrides))
