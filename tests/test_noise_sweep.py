"""Sweeps with noise: the sample dimension, zero noise, identity, and bit-identity across shards."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from ppsweep.sweep.runner import run_sweep
from ppsweep.sweep.evaluate import SweepSpec

MODEL = {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16}
SYSTEM = {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7}
JITTER = {"samples": 5, "seed": 3, "compute": {"dist": "lognormal", "cv": 0.1}, "message": {"dist": "normal", "cv": 0.1},
          "straggler": {"prob": 0.2, "slowdown": 2.0}}


def config(**overrides):
    cfg = {
        "name": "noisy",
        "schedules": ["gpipe", "1f1b", "hanayo"],
        "p": [2, 4],
        "m": [4, 8],
        "bandwidth": {"start": 1e8, "stop": 1e11, "num": 4},
        "latency": [1e-7, 1e-5],
        "model": MODEL,
        "system": SYSTEM,
    }
    cfg.update(overrides)
    return cfg


def _run(tmp_path, name, **overrides):
    spec = SweepSpec.from_config(config(name=name, **overrides))
    run_sweep(spec, tmp_path / f"{name}.zarr", "yaml: 1", progress=False)
    return xr.open_zarr(tmp_path / f"{name}.zarr").load()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The grid swept once without noise ("plain") and once with JITTER ("noisy"); the tests only read them."""
    out = tmp_path_factory.mktemp("noise_sweep")
    return out, _run(out, "plain"), _run(out, "noisy", noise=JITTER)


def test_noisy_store_has_a_sample_dimension_and_the_noise_free_time(stores):
    _, plain, ds = stores
    assert ds["t_sim"].dims == ("schedule", "p", "m", "bandwidth", "latency", "sample")
    assert ds.sizes["sample"] == 5 and ds["rank_sim"].dims == ds["t_sim"].dims
    assert ds["t_sim_nominal"].dims == ("schedule", "p", "m", "bandwidth", "latency")
    xr.testing.assert_equal(ds["t_sim_nominal"], plain["t_sim"].rename("t_sim_nominal").assign_attrs(ds["t_sim_nominal"].attrs))
    ok = ds["valid"]
    assert bool((ds["t_sim"].std("sample") > 0).where(ok, True).all())  # the noise moves every valid point


def test_zero_noise_gives_the_noise_free_store_bit_for_bit(tmp_path, stores):
    _, plain, _ = stores
    zero = _run(tmp_path, "zero", noise={"samples": 3, "compute": {"cv": 0.0}})
    for name in ("t_sim", "throughput", "idle_sim", "comm_time", "rank_sim"):
        for k in range(3):
            np.testing.assert_array_equal(zero[name].isel(sample=k).values, plain[name].values)


def test_noisy_store_is_the_same_whatever_the_shards_and_chunks(tmp_path, stores):
    _, _, whole = stores
    spec = SweepSpec.from_config(config(name="parts", noise=JITTER, engine={"chunk": 8}))
    # units run in another order, with another engine chunk: a shard-like split
    from ppsweep.store.open import open_for_sweep
    from ppsweep.store.units import write_unit
    from ppsweep.sweep.evaluate import evaluate_unit

    group, _ = open_for_sweep(tmp_path / "parts.zarr", spec, "yaml: 1")
    for i, j in reversed(spec.units()):
        write_unit(group, spec, i, j, evaluate_unit(spec, i, j))
    parts = xr.open_zarr(tmp_path / "parts.zarr").load()
    for name in ("t_sim", "t_sim_nominal", "comm_time", "rank_sim"):
        np.testing.assert_array_equal(parts[name].values, whole[name].values)


def test_noise_changes_the_store_identity(tmp_path, stores):
    import shutil

    from ppsweep.store.errors import StoreError

    shutil.copytree(stores[0] / "noisy.zarr", tmp_path / "noisy.zarr")  # the shared store stays untouched
    other = SweepSpec.from_config(config(name="noisy", noise={**JITTER, "seed": 4}))
    with pytest.raises(StoreError):
        run_sweep(other, tmp_path / "noisy.zarr", "yaml: 1", progress=False)


def test_bad_noise_config_is_refused_before_any_work():
    with pytest.raises(ValueError, match="noise.compute.dist: unknown distribution 'weibull'"):
        SweepSpec.from_config(config(noise={"samples": 2, "compute": {"dist": "weibull", "cv": 0.1}}))


def test_noisy_sweep_leaves_jax_x64_flag_alone(tmp_path):
    # A fresh interpreter (spawned, never forked): a small noisy sweep draws its factors in float64
    # inside a scoped context, and JAX's global flag is as it was afterwards.
    import subprocess
    import sys

    cfg = config(name="flag", schedules=["1f1b"], p=[2], m=[4], bandwidth=[1e10], latency=[1e-6], noise=JITTER)
    code = (
        "import jax; before = jax.config.jax_enable_x64;"
        "import xarray as xr; from ppsweep.sweep.runner import run_sweep; from ppsweep.sweep.evaluate import SweepSpec;"
        f"spec = SweepSpec.from_config({cfg!r}); run_sweep(spec, {str(tmp_path / 'flag.zarr')!r}, 'yaml: 1', progress=False);"
        "assert jax.config.jax_enable_x64 == before == False, jax.config.jax_enable_x64;"
        f"ds = xr.open_zarr({str(tmp_path / 'flag.zarr')!r}).load(); t = ds.t_sim.values;"
        "assert t.dtype == 'float64' and t.shape[-1] == 5 and len(set(t.ravel().tolist())) > 1, t"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
