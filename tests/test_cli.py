"""The real Hydra command line: ``python -m ppsweep +sweep=...`` in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr

ROOT = Path(__file__).resolve().parent.parent
#: This checkout's package, whatever directory a command runs in.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def ppsweep(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ppsweep", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=ENV
    )


def test_bandwidth_sweep_runs_resumes_and_says_when_done(tmp_path):
    args = ("+sweep=bandwidth", "p=[4]", "m=[8,16]", "schedule_options={hanayo: {waves: 2}}", f"results_dir={tmp_path}",
            "engine.compilation_cache=null")
    half = ppsweep(*args, "shards=2", "shard=1", cwd=ROOT)  # one of the two units
    assert half.returncode == 0, half.stderr
    first = ppsweep(*args, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    assert "resuming: 1 of 2 units already done" in first.stderr
    assert "points/s end to end" in first.stderr
    assert "Unable to initialize backend" not in first.stdout + first.stderr  # JAX's probing of absent accelerators
    ds = xr.open_zarr(tmp_path / "bandwidth.zarr")
    assert ds.sizes["bandwidth"] == 64 and ds.sizes["latency"] == 5 and ds.sizes["m"] == 2
    assert float(ds.bandwidth.min()) == pytest.approx(1e9) and float(ds.bandwidth.max()) == pytest.approx(1e12)
    assert "name: bandwidth" in ds.attrs["config"]
    assert "hanayo:\n    waves: 2" in ds.attrs["config"]  # the plain schedule_options={...} form, no '+'
    again = ppsweep(*args, cwd=ROOT)
    assert again.returncode == 0 and "already complete" in again.stderr and "resuming" not in again.stderr


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
def test_bad_input_one_clear_line(tmp_path, capsys, override, field):
    # In process (the command's own run on the composed config): test_config_is_checked_before_jax
    # checks such a refusal through a real `python -m ppsweep`.
    from ppsweep.cli.main import run
    from ppsweep.sweep.config import compose_config

    assert run(compose_config(["+sweep=bandwidth", override, f"results_dir={tmp_path}"])) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0]
    assert not captured.out
    assert not (tmp_path / "bandwidth.zarr").exists()  # nothing started


def test_unknown_system_is_refused_by_hydra(tmp_path):
    run = ppsweep("+sweep=bandwidth", "system=warp_drive", f"results_dir={tmp_path}", cwd=ROOT)
    assert run.returncode != 0
    assert "warp_drive" in run.stderr and "baseline" in run.stderr  # Hydra lists the available systems


def only_line(run: subprocess.CompletedProcess) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_user_sweep_without_package_line_is_refused_in_one_line(tmp_path):
    user = tmp_path / "myconf" / "sweep"
    user.mkdir(parents=True)
    (user / "tiny2.yaml").write_text("name: tiny2\np: [2]\nm: [2]\n")  # no '# @package _global_'
    run = ppsweep(f"--config-dir={tmp_path / 'myconf'}", "+sweep=tiny2", "results_dir=out", cwd=tmp_path)
    assert run.returncode == 2
    assert "@package _global_" in only_line(run) and only_line(run).startswith("error: sweep:")
    assert not (tmp_path / "out").exists()


def test_unknown_sweep_one_line_naming_the_sweeps(tmp_path):
    run = ppsweep("+sweep=bandwith", f"results_dir={tmp_path}", cwd=ROOT)
    assert run.returncode == 2
    line = only_line(run)
    assert line.startswith("error: sweep: unknown sweep 'bandwith'") and "bandwidth, comm_modes" in line


def test_plain_command_shows_what_to_run_and_help_names_sweeps():
    plain = ppsweep(cwd=ROOT)
    assert plain.returncode == 2 and "+sweep=NAME" in plain.stderr and "bandwidth, comm_modes" in plain.stderr
    assert not plain.stdout
    helped = ppsweep("--help", cwd=ROOT)
    assert helped.returncode == 0 and "+sweep=NAME" in helped.stdout
    assert "sweep: bandwidth, comm_modes" in helped.stdout and "schedule_options={hanayo" in helped.stdout


def test_config_is_checked_before_jax_is_imported():
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "ppsweep", "+sweep=bandwidth", "p=[1]"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    imported = [line.split("|")[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")]
    assert "ppsweep.sweep.config" in imported and not [m for m in imported if m.split(".")[0] in ("jax", "jaxlib")]
    assert [line for line in run.stderr.splitlines() if not line.startswith("import time:")] == [
        "error: p: must be an integer >= 2, got 1"
    ]
    analyze = subprocess.run([sys.executable, "-X", "importtime", "-m", "ppsweep.analyze"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert analyze.returncode == 2 and "error: the following arguments are required: store" in analyze.stderr
    imported = [line.split("|")[-1].strip() for line in analyze.stderr.splitlines() if line.startswith("import time:")]
    assert "argparse" in imported and "xarray" not in imported and "jax" not in imported


@pytest.mark.parametrize("delay", [0.3, 1.5])
def test_ctrl_c_early_is_one_line_and_status_130(tmp_path, delay):
    process = subprocess.Popen([sys.executable, "-m", "ppsweep", "+sweep=bandwidth", f"results_dir={tmp_path}",
                                "engine.compilation_cache=null"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: interrupted") and "Traceback" not in err, err


def test_version_is_ppsweeps(tmp_path):
    from ppsweep import __version__

    run = ppsweep("--version", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.strip() == f"ppsweep {__version__}"


def test_a_failed_job_of_a_basic_multirun_fails_the_command(tmp_path):
    # Two jobs on Hydra's basic launcher (in this process): the second names p=1 (refused).
    run = ppsweep("name=two", f"results_dir={tmp_path}", "schedules=[1f1b]", "m=[4]", "bandwidth=[1e10]",
                  "latency=[1e-6]", "p=[2],[1]", "--multirun", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "1 job(s) of the multirun failed" in run.stderr.splitlines()[-1]


def test_a_closed_pipe_ends_quietly():
    # ``| head -n 1``: the reader leaves after one line of a grid larger than the pipe's buffer;
    # the command ends without a traceback.
    command = ["ppsweep.show", "1f1b", "p=32", "m=256"]
    reader = subprocess.Popen([sys.executable, "-m", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    reader.stdout.readline()
    reader.stdout.close()
    _, err = reader.communicate(timeout=120)
    assert reader.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err
