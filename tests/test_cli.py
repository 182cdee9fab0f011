"""The real Hydra command line: ``python -m ppsweep +sweep=...`` in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr

ROOT = Path(__file__).resolve().parent.parent


def ppsweep(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ppsweep", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_bandwidth_sweep_runs_resumes_and_says_when_done(tmp_path):
    args = ("+sweep=bandwidth", "p=[4]", "m=[8,16]", f"results_dir={tmp_path}", "engine.compilation_cache=null")
    first = ppsweep(*args, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    assert "points/s end to end" in first.stderr
    ds = xr.open_zarr(tmp_path / "bandwidth.zarr")
    assert ds.sizes["bandwidth"] == 64 and ds.sizes["latency"] == 5 and ds.sizes["m"] == 2
    assert float(ds.bandwidth.min()) == pytest.approx(1e9) and float(ds.bandwidth.max()) == pytest.approx(1e12)
    assert "name: bandwidth" in ds.attrs["config"]
    again = ppsweep(*args, cwd=ROOT)
    assert again.returncode == 0 and "already complete" in again.stderr


def test_runs_from_another_directory_with_a_user_config_dir(tmp_path):
    user = tmp_path / "myconf" / "sweep"
    user.mkdir(parents=True)
    (user / "tiny.yaml").write_text("# @package _global_\nname: tiny\np: [2]\nm: [2]\nbandwidth: [1.0e9, 1.0e10]\n")
    run = ppsweep(f"--config-dir={tmp_path / 'myconf'}", "+sweep=tiny", "results_dir=out", "engine.compilation_cache=null", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert xr.open_zarr(tmp_path / "out" / "tiny.zarr").sizes["bandwidth"] == 2


@pytest.mark.parametrize(
    "override, field",
    [
        ("p=[1,4]", "p: must be an integer >= 2"),
        ("m=[0]", "m: must be an integer >= 1"),
        ("bandwidth=[-1.0]", "bandwidth: must be > 0"),
        ("latency=[-1e-6]", "latency: must be >= 0"),
        ("schedules=[warp]", "schedule: unknown name 'warp'; accepted:"),
        ("comm.mode=telepathy", "comm.mode: unknown mode 'telepathy'; accepted: overlap, blocking, contention"),
    ],
)
def test_bad_input_one_clear_line(tmp_path, override, field):
    run = ppsweep("+sweep=bandwidth", override, f"results_dir={tmp_path}", cwd=ROOT)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0]
    assert not (tmp_path / "bandwidth.zarr").exists()  # nothing started


def test_unknown_system_is_refused_by_hydra(tmp_path):
    run = ppsweep("+sweep=bandwidth", "system=warp_drive", f"results_dir={tmp_path}", cwd=ROOT)
    assert run.returncode != 0
    assert "warp_drive" in run.stderr and "baseline" in run.stderr  # Hydra lists the available systems
