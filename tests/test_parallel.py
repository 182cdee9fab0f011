"""Units in worker processes (ppsweep.parallel) give the stores of one process, and a run reports its time split."""

from __future__ import annotations

import os

import numpy as np
import xarray as xr

from ppsweep.parallel import default_workers, largest_first
from ppsweep.runner import run_sweep
from ppsweep.sweep import SweepSpec
from ppsweep.timing import PHASES

MODEL = {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16}
SYSTEM = {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7}


def small_config() -> dict:
    return {
        "name": "par", "schedules": ["gpipe", "1f1b", "chimera"], "p": [2, 4], "m": [2, 4],
        "bandwidth": [1e9, 1e11], "latency": [1e-7, 1e-5], "model": MODEL, "system": SYSTEM,
        "comm": {"mode": ["overlap", "contention"]},
    }


def spec() -> SweepSpec:
    return SweepSpec.from_config(small_config())


def test_two_worker_processes_write_the_same_store(tmp_path):
    lines: list[str] = []
    one = run_sweep(spec(), tmp_path / "one.zarr", "", progress=False, workers=1, say=lines.append)
    two = run_sweep(spec(), tmp_path / "two.zarr", "", progress=False, workers=2)
    assert one.complete and two.complete and one.units_run == two.units_run == 4
    a, b = xr.open_zarr(tmp_path / "one.zarr"), xr.open_zarr(tmp_path / "two.zarr")
    for name in a.data_vars:
        x, y = a[name].values, b[name].values
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name
    (split,) = [line for line in lines if line.startswith("time split")]
    assert all(f"{phase} " in split for phase in PHASES)


def test_default_workers_start_processes_only_for_work_that_pays_for_them():
    small = spec()
    assert default_workers(small, small.units()) == 1  # seconds of work: one process
    big = SweepSpec.from_config({**small_config(), "p": [32, 64], "m": [256, 512], "bandwidth": list(np.geomspace(1e9, 1e12, 128)),
                                   "latency": list(np.geomspace(1e-8, 1e-4, 64))})
    cores = len(os.sched_getaffinity(0))
    assert default_workers(big, big.units()) == min(cores, 4)
    assert default_workers(big, big.units()[:1]) == 1  # one unit: nothing to share


def test_largest_units_first():
    s = spec()  # p [2, 4] x m [2, 4]
    assert largest_first(s, s.units()) == [(1, 1), (0, 1), (1, 0), (0, 0)]
