"""Sharded sweeps: shards through the local launcher, SIGKILL and resume, faults, the SLURM job script.

Every sweep here runs the same tiny grid (6 units), so that the single-process reference is
computed once. Subprocesses are real ``python -m ppsweep`` runs (fresh interpreters: each imports
JAX and compiles, a few seconds each).
"""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from hydra import compose, initialize_config_dir

from hydra_plugins.ppsweep_launcher.callback import swept_shards
from hydra_plugins.ppsweep_launcher.launcher import job_failure
from ppsweep.cli.main import run
from ppsweep.sweep.config import check_shards, compose_config, find_conf_dir
from ppsweep.sweep.shards import describe_missing, shard_units
from ppsweep.store.errors import StoreError
from ppsweep.store.identity import STORE_FORMAT
from ppsweep.store.open import check_store, open_for_sweep
from ppsweep.sweep.evaluate import SweepSpec

ROOT = Path(__file__).resolve().parent.parent
GRID = [
    "schedules=[gpipe,1f1b]",
    "p=[2,4]",
    "m=[2,4,8]",
    "bandwidth=[1.0e9,1.0e10,1.0e11]",
    "latency=[1.0e-6,1.0e-5]",
    "engine.compilation_cache=null",
]
PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] p=(\d+) m=(\d+) ")


def compose_cfg(*overrides: str):
    return compose_config([*GRID, *overrides])


#: Subprocesses import this checkout's ppsweep whatever their directory (not an installed copy).
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def ppsweep(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ppsweep", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=ENV)


def store_files(path: Path) -> dict[str, bytes]:
    """Every file of a store but the root metadata (its attributes hold times and the config)."""
    return {
        str(f.relative_to(path)): f.read_bytes()
        for f in sorted(path.rglob("*"))
        if f.is_file() and f.relative_to(path) != Path("zarr.json") and not f.name.endswith(".partial")
    }


def assert_identical(path: Path, reference: Path) -> None:
    """Same chunks, to the bit, and the same fingerprint; complete."""
    ours, theirs = store_files(path), store_files(reference)
    assert sorted(ours) == sorted(theirs)
    different = [name for name in ours if ours[name] != theirs[name]]
    assert not different, different[:5]
    a, b = zarr.open_group(str(path), mode="r").attrs, zarr.open_group(str(reference), mode="r").attrs
    assert a["fingerprint"] == b["fingerprint"] and a["complete"] is True


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The grid, swept by one uninterrupted in-process run."""
    out = tmp_path_factory.mktemp("reference")
    assert run(compose_cfg("name=grid", f"results_dir={out}", "progress=false")) == 0
    return out / "grid.zarr"


# ---- shards: which units --------------------------------------------------------------------
def test_shards_partition_the_units_round_robin():
    spec = SweepSpec.from_config({**compose_cfg_container(), "p": [2, 4, 8], "m": [2, 4, 8, 16]})
    units = spec.units()
    parts = [shard_units(spec, 5, k) for k in range(5)]
    assert sorted(u for part in parts for u in part) == sorted(units)  # disjoint and complete
    assert parts[1] == units[1::5] and shard_units(spec, 5, None) == units
    assert check_shards(3, None, 12) == (3, None) and check_shards(3.0, 2.0, 12) == (3, 2)
    for shards, shard, message in [(0, None, "shards: must be an integer >= 1"), (13, None, "more than the sweep's 12 units"),
                                   (4, 4, "shard: must be an integer from 0 to 3"), (4, -1, "from 0 to 3"), (2, "a", "shard:")]:
        with pytest.raises(ValueError, match=message):
            check_shards(shards, shard, 12)
    done = np.zeros((3, 4), bool)
    done.reshape(-1)[[0, 1, 2, 3, 5]] = True
    assert describe_missing(done, 4) == "7 of 12 units missing (shards 0, 1, 2, 3 of 4)"
    assert swept_shards("shard=range(4)", 4) == [0, 1, 2, 3] and swept_shards("shard=1,3", 4) == [1, 3]
    assert swept_shards(None, 4) == [None]
    with pytest.raises(ValueError, match="from 0 to 3"):
        swept_shards("shard=2,4", 4)


def compose_cfg_container():
    from omegaconf import OmegaConf

    return OmegaConf.to_container(compose_cfg(), resolve=True)


# ---- the whole sharded sweep through the local launcher ------------------------------------------
def test_two_shards_through_the_local_launcher_match_one_process(tmp_path, reference):
    started = time.perf_counter()
    result = ppsweep(*GRID, "name=grid", "results_dir=out", "shards=2", "hydra/launcher=local", "--multirun", cwd=tmp_path)
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stderr + result.stdout
    store = tmp_path / "out" / "grid.zarr"  # relative to the directory ppsweep started in
    assert_identical(store, reference)
    assert "2 shards" in result.stderr and "is complete: 72 points in 6 units" in result.stderr
    # Each shard ran in its own interpreter and wrote only its own units.
    logs = sorted((tmp_path / "out").glob("grid.jobs/*/.submitit/*/*_log.err"))
    assert len(logs) == 2, logs
    pids = {log.parent.name for log in logs}
    assert len(pids) == 2 and str(os.getpid()) not in pids
    ran = [[tuple(map(int, m.groups()[2:])) for m in map(PROGRESS.match, log.read_text().splitlines()) if m] for log in logs]
    assert sorted(len(r) for r in ran) == [3, 3] and len(set(ran[0]) | set(ran[1])) == 6
    print(f"two shards through the local launcher: {seconds:.1f} s")
    # Re-running the finished sweep launches nothing.
    again = ppsweep(*GRID, "name=grid", "results_dir=out", "shards=2", "hydra/launcher=local", "--multirun", cwd=tmp_path)
    assert again.returncode == 0 and "nothing to do" in again.stderr and "Submitit" not in again.stdout + again.stderr


# ---- SIGKILL, then resume ------------------------------------------------------------------------
def test_sigkill_then_resume_recomputes_only_missing_units(tmp_path, reference, capsys):
    args = (*GRID, "name=grid", f"results_dir={tmp_path}")
    process = subprocess.Popen([sys.executable, "-m", "ppsweep", *args], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    progress = 0
    assert process.stderr is not None
    for line in process.stderr:
        if PROGRESS.match(line):
            progress += 1
            if progress == 2:  # unit 1 is written (unit 2's line follows its write), unit 2 may be half-written
                process.send_signal(signal.SIGKILL)
                break
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    store = tmp_path / "grid.zarr"
    done = np.asarray(zarr.open_group(str(store), mode="r")["done"][...])
    assert 1 <= done.sum() < done.size
    spec = SweepSpec.from_config(compose_cfg_container())
    done_units = {(spec.p[i], spec.m[j]) for i, j in spec.units() if done[i, j]}
    missing = {(spec.p[i], spec.m[j]) for i, j in spec.units() if not done[i, j]}
    from ppsweep.store.open import open_results

    with pytest.warns(UserWarning, match=f"{len(missing)} of 6 .* units missing"):
        incomplete = open_results(store)
    assert bool(incomplete["t_sim"].isnull().any())
    # Chunks of finished units must not be rewritten: their files keep their inodes.
    inodes = {f: f.stat().st_ino for f in store.glob("t_sim/c/0/*/*/0/0")}
    assert run(compose_cfg(*args[len(GRID):])) == 0  # the resume in process (the kill needs the real one)
    resumed = capsys.readouterr().err
    ran = [m for m in map(PROGRESS.match, resumed.splitlines()) if m]
    assert {(int(m.group(3)), int(m.group(4))) for m in ran} == missing
    assert all(int(m.group(2)) == len(missing) for m in ran)
    for i, j in spec.units():
        chunk = store / f"t_sim/c/0/{i}/{j}/0/0"
        if (spec.p[i], spec.m[j]) in done_units:
            assert chunk.stat().st_ino == inodes[chunk]
    assert_identical(store, reference)


# ---- faults and bad input: one line, no traceback, nothing corrupted --------------------------------
def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err), err
    return errors[0]


def test_full_disk_mid_unit_keeps_finished_units_and_resumes(tmp_path, reference, capsys, monkeypatch):
    from zarr.storage import LocalStore

    original = LocalStore.set
    writes = {"chunks": 0}

    async def failing_set(self, key, value, *args, **kwargs):
        if "/c/" in key:
            writes["chunks"] += 1
            if writes["chunks"] > 24:  # coordinates (5 chunks) and unit 1 (16 with its checksum) written, unit 2 half-way
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return await original(self, key, value, *args, **kwargs)

    cfg = compose_cfg("name=grid", f"results_dir={tmp_path}", "progress=false")
    monkeypatch.setattr(LocalStore, "set", failing_set)
    assert run(cfg) == 1
    line = one_error_line(capsys)
    assert "No space left on device" in line and "re-run the same command to resume" in line
    monkeypatch.setattr(LocalStore, "set", original)
    store = tmp_path / "grid.zarr"
    done = np.asarray(zarr.open_group(str(store), mode="r")["done"][...])
    assert done.sum() == 1 and done[0, 0]
    written = xr.open_zarr(store).isel(p=0, m=0).load()
    expected = xr.open_zarr(reference).isel(p=0, m=0).load()
    xr.testing.assert_identical(written.drop_attrs(), expected.drop_attrs())
    assert run(cfg) == 0
    assert_identical(store, reference)


def test_bad_shard_other_grid_other_format_one_line_each(tmp_path, capsys):
    base = ("name=bad", f"results_dir={tmp_path}", "progress=false")
    assert run(compose_cfg(*base, "shards=2", "shard=2")) == 2
    assert "shard: must be an integer from 0 to 1 (shards=2), got 2" in one_error_line(capsys)
    assert run(compose_cfg(*base, "shards=7")) == 2
    assert "shards: 7 is more than the sweep's 6 units" in one_error_line(capsys)
    assert not (tmp_path / "bad.zarr").exists()  # nothing started
    spec_cfg = compose_cfg(*base)
    from ppsweep.sweep.config import plan_from_config

    plan = plan_from_config(spec_cfg)
    open_for_sweep(plan.path, plan.spec, plan.config_yaml)  # an empty layout of this grid
    assert run(compose_cfg(*base, "p=[2,8]", "shards=2", "shard=0")) == 2
    assert "written by a different sweep" in one_error_line(capsys)
    assert run(compose_cfg(*base, "shards=2", "shard=1", "overwrite=true")) == 2
    assert "would erase the other shards' work" in one_error_line(capsys)
    zarr.open_group(str(plan.path), mode="r+").attrs["store_format"] = STORE_FORMAT + 1
    assert run(compose_cfg(*base, "shards=2", "shard=0")) == 2
    assert f"store format {STORE_FORMAT + 1}" in one_error_line(capsys)
    assert run(compose_cfg(*base, "finalize=true", "name=nothing")) == 2
    assert "no such store" in one_error_line(capsys)


def test_shards_in_turn_then_finalize(tmp_path, reference, capsys):
    base = ("name=grid", f"results_dir={tmp_path}", "progress=false", "shards=2")
    assert run(compose_cfg(*base, "shard=1")) == 0
    assert "the store still has 3 of 6 units missing (shard 0 of 2)" in capsys.readouterr().err
    assert run(compose_cfg(*base, "finalize=true")) == 1
    assert "is incomplete: 3 of 6 units missing (shard 0 of 2)" in one_error_line(capsys)
    assert zarr.open_group(str(tmp_path / "grid.zarr"), mode="r").attrs["complete"] is False
    assert run(compose_cfg(*base, "shard=0")) == 0  # the last shard to finish marks the store complete
    assert "the store is complete" in capsys.readouterr().err
    assert_identical(tmp_path / "grid.zarr", reference)
    assert run(compose_cfg(*base, "finalize=true")) == 0
    assert "is complete: 72 points in 6 units" in capsys.readouterr().err


def test_layout_created_once_when_shards_start_together(tmp_path):
    spec = SweepSpec.from_config(compose_cfg_container())
    path = tmp_path / "race.zarr"
    barrier = threading.Barrier(6)
    outcomes: list = []

    def shard(k: int) -> None:
        barrier.wait()
        try:
            group, pending = open_for_sweep(path, spec, f"config of {k}", units=shard_units(spec, 6, k))
            outcomes.append((group.attrs["config"], len(pending)))
        except Exception as error:  # noqa: BLE001
            outcomes.append(error)

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(isinstance(o, tuple) and o[1] == 1 for o in outcomes), outcomes
    assert len({o[0] for o in outcomes}) == 1  # everybody opened the one winner's layout
    assert [p.name for p in tmp_path.iterdir()] == ["race.zarr"]  # no temporary layout left behind
    check_store(path, spec)
    (tmp_path / "foreign.zarr").mkdir()
    (tmp_path / "foreign.zarr" / "data.txt").write_text("not ours")
    with pytest.raises(StoreError, match="not a (readable )?ppsweep"):
        open_for_sweep(tmp_path / "foreign.zarr", spec, "")
    assert (tmp_path / "foreign.zarr" / "data.txt").exists()  # never deleted without overwrite=true


# ---- launchers ----------------------------------------------------------------------------------
class FakeJob:
    def __init__(self, job_id, outcome=None, raises=None, state="FINISHED"):
        self.job_id, self.outcome, self.raises, self.state = job_id, outcome, raises, state

    def results(self):
        if self.raises is not None:
            raise self.raises
        from hydra.core.utils import JobReturn, JobStatus

        ret = JobReturn()
        ret.status = JobStatus.COMPLETED
        ret.return_value = self.outcome
        return [ret]


def test_launcher_reports_killed_and_failed_shards_in_one_line():
    from submitit.core.utils import UncompletedJobError

    assert job_failure("shard=0", FakeJob("7", {"status": 0, "message": "wrote"})) is None
    killed = job_failure("shard=1", FakeJob("8", raises=UncompletedJobError("no output"), state="OUT_OF_MEMORY"))
    assert killed == "shard=1 (job 8) was killed, crashed or ran out of time before finishing, state OUT_OF_MEMORY"
    full = job_failure("shard=2", FakeJob("9", {"status": 1, "message": "error: writing x failed: No space left on device"}))
    assert full == "shard=2 (job 9): writing x failed: No space left on device"


def test_slurm_launcher_builds_the_job_script_from_the_config(tmp_path, monkeypatch):
    from hydra.utils import instantiate

    bin_dir = tmp_path / "bin"  # submitit's SLURM executor insists on finding srun; nothing is submitted
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    overrides = ["hydra/launcher=slurm", "cluster.partition=gpu-h100", "cluster.time_min=90", "cluster.gpus_per_task=2",
                 "cluster.account=pp", "cluster.max_parallel=4", f"hydra.sweep.dir={tmp_path}/jobs", "name=tiny"]
    with initialize_config_dir(config_dir=str(find_conf_dir()), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
        launcher = instantiate(cfg.hydra.launcher)
    assert type(launcher).__module__ == "hydra_plugins.ppsweep_launcher.launcher"
    executor = launcher.make_executor()._executor
    executor.parameters["map_count"] = 8  # as map_array sets it for a job array of 8 shards
    script = executor._make_submission_file_text("python -u -m submitit.core._submit FOLDER", "uid")
    for line in ["#SBATCH --partition=gpu-h100", "#SBATCH --time=90", "#SBATCH --gpus-per-task=2", "#SBATCH --account=pp",
                 "#SBATCH --cpus-per-task=8", "#SBATCH --array=0-7%4", "#SBATCH --signal=USR2@120", "#SBATCH --job-name=ppsweep-tiny"]:
        assert line in script.splitlines(), (line, script)
    assert f"{tmp_path}/jobs/.submitit/%A_%a/" in script  # logs beside the multirun
    assert launcher.params["max_num_timeout"] == 3  # a timed-out or preempted shard is requeued and resumes


def test_multirun_refuses_a_bad_shard_before_launching_anything(tmp_path):
    result = ppsweep(*GRID, "name=grid", "results_dir=out", "shards=2", "shard=0,2", "hydra/launcher=local", "--multirun", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: shard: must be an integer from 0 to 1 (shards=2), got 2"]
    assert not (tmp_path / "out").exists()  # no store, no job


def test_a_killed_shard_is_reported_in_one_line_and_resumes(tmp_path, reference):
    args = [*GRID, "name=grid", "results_dir=out", "shards=2", "hydra/launcher=local", "--multirun"]
    parent = subprocess.Popen([sys.executable, "-m", "ppsweep", *args], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and parent.poll() is None:
        for log in (tmp_path / "out").glob("grid.jobs/*/.submitit/*/*_0_log.err"):
            if any(PROGRESS.match(line) for line in log.read_text().splitlines()):
                controller = int(log.parent.name)  # a local job's id is its controller's pid; the shard runs in its child
                children = Path(f"/proc/{controller}/task/{controller}/children").read_text().split()
                if children:
                    os.kill(int(children[0]), signal.SIGKILL)
                    killed = log
                    break
        time.sleep(0.05)
    _, err = parent.communicate(timeout=120)
    assert killed is not None, err
    assert parent.returncode == 1, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert f"(job {killed.parent.name}) was killed, crashed or ran out of time before finishing" in errors[0]
    assert "re-run the same command" in errors[0]
    store = tmp_path / "out" / "grid.zarr"
    assert zarr.open_group(str(store), mode="r").attrs["complete"] is False
    assert run(compose_cfg("name=grid", f"results_dir={tmp_path / 'out'}", "shards=2", "progress=false")) == 0
    assert_identical(store, reference)


def test_slurm_preset_off_a_cluster_stops_before_creating_the_store(tmp_path):
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}  # no sbatch on it
    result = subprocess.run([sys.executable, "-m", "ppsweep", *GRID, "name=grid", "results_dir=out", "shards=2",
                             "hydra/launcher=slurm", "--multirun"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "") or str(Path(__file__).resolve().parent.parent)})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: hydra/launcher=slurm submits with SLURM's sbatch")
    assert not (tmp_path / "out").exists()
