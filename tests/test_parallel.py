"""Units in worker processes (ppsweep.parallel) give the stores of one process, and a run reports its time split."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ppsweep.parallel import default_workers
from ppsweep.runner import run_sweep
from ppsweep.sweep import SweepSpec
from ppsweep.timing import PHASES

MODEL = {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16}
SYSTEM = {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7}


def spec() -> SweepSpec:
    return SweepSpec.from_config(
        {
            "name": "par", "schedules": ["gpipe", "1f1b", "chimera"], "p": [2, 4], "m": [2, 4],
            "bandwidth": [1e9, 1e11], "latency": [1e-7, 1e-5], "model": MODEL, "system": SYSTEM,
            "comm": {"mode": ["overlap", "contention"]},
        }
    )


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


def test_default_workers():
    assert default_workers(1) == 1
    assert default_workers(3) == 1
    assert 1 <= default_workers(100)
