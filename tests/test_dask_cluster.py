"""Sweeps on a dask.distributed cluster (``engine.cluster=dask://HOST:PORT``): the store equals a local
run's to the bit, and a worker killed mid-run costs nothing but its unit's time (README, "Running on a
dask cluster")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
#: Eight units of a few hundred points each: long enough that a worker can be killed while others remain.
GRID = ["name=dask", "schedules=[gpipe,1f1b,zb_h1,interleaved_1f1b]", "p=[2,4,8,16]", "m=[8,16]",
        "bandwidth={start: 1e9, stop: 1e12, num: 16}", "latency=[1e-7,1e-6]", "comm.mode=[overlap,contention]",
        "engine.compilation_cache=null", "progress=false", "engine.workers=1"]


def _sweep(results: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ppsweep", *GRID, f"results_dir={results}", *extra],
                            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _values(path: Path) -> dict[str, np.ndarray]:
    ds = xr.open_zarr(path)
    return {name: np.asarray(ds[name].values) for name in ds.data_vars}


@pytest.fixture(scope="module")
def local_store(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("local")
    run = _sweep(results)
    _, err = run.communicate(timeout=600)
    assert run.returncode == 0, err
    return results / "dask.zarr"


def test_a_dask_cluster_writes_the_local_store_and_survives_a_killed_worker(local_store, tmp_path):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       env={"PYTHONPATH": ENV["PYTHONPATH"]})
    try:
        client = distributed.Client(cluster)
        address = cluster.scheduler_address.replace("tcp://", "dask://")
        run = _sweep(tmp_path, f"engine.cluster={address}")
        # Wait until the cluster runs units (its first finished), then kill one worker process outright.
        deadline = time.monotonic() + 300
        busy: list[str] = []
        while not busy and time.monotonic() < deadline and run.poll() is None:
            busy = [worker for worker, tasks in client.processing().items() if tasks]
            time.sleep(0.05)
        assert busy and run.poll() is None, "the run ended before any unit ran on the cluster"
        pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
        os.kill(pid, signal.SIGKILL)  # the worker process dies mid-unit; its nanny starts a new one
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
        assert "wrote" in err.splitlines()[-1]
    finally:
        cluster.close()
    theirs, ours = _values(local_store), _values(tmp_path / "dask.zarr")
    assert theirs.keys() == ours.keys()
    for name in theirs:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def test_a_bad_cluster_address_is_one_line(tmp_path):
    run = _sweep(tmp_path, "engine.cluster=localhost:8786")
    _, err = run.communicate(timeout=120)
    assert run.returncode == 2
    assert err.strip() == "error: engine.cluster: must be null or dask://HOST:PORT (tcp://, tls:// too), got 'localhost:8786'"
    assert not (tmp_path / "dask.zarr").exists()
