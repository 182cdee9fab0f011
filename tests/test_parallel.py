"""Units in worker processes (ppsweep.sweep.parallel) give the stores of one process, and a run reports its time split."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from ppsweep.sweep.parallel import default_workers, largest_first
from ppsweep.sweep.runner import run_sweep
from ppsweep.sweep.evaluate import SweepSpec
from ppsweep.sweep.timing import PHASES

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


def test_a_spawned_worker_ends_when_its_parent_is_killed(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import multiprocessing, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from ppsweep.sweep.parallel import _init_worker\n"
        "if __name__ == '__main__':\n"
        "    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn'), initializer=_init_worker, initargs=(None,))\n"
        "    pool.submit(time.sleep, 300)\n"
        "    time.sleep(1)\n"
        "    print(*[p.pid for p in pool._processes.values()], flush=True)\n"
        "    time.sleep(300)\n"
    )
    root = str(Path(__file__).resolve().parents[1])
    parent = subprocess.Popen([sys.executable, str(script)], cwd=root, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": root})
    (child,) = [int(x) for x in parent.stdout.readline().split()]
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}") and "Z" not in _state(child):
        time.sleep(0.2)
    gone = not os.path.exists(f"/proc/{child}") or "Z" in _state(child)
    if not gone:
        os.kill(child, signal.SIGKILL)
    assert gone, "the worker outlived its parent by 30 s"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
