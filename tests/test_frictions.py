"""Frictions a new user met on the command line, each held here (README, "Sweeps and the results dataset")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ppsweep.schedules.variants import canonical_label
from ppsweep.sweep.config import SYSTEM_FIELD_AXES, load_config

GRID = ["p=[4]", "m=[8]", "bandwidth=[1e10]", "latency=[1e-6]"]


def test_a_variant_in_a_list_needs_no_quotes():
    spec = load_config(["+sweep=bandwidth", "schedules=[1f1b,interleaved_1f1b@v:2,chimera@split:1:2]", *GRID])
    assert spec.schedules == ("1f1b", "interleaved_1f1b@v=2", "chimera@split=1:2")
    assert spec == load_config(["+sweep=bandwidth", 'schedules=[1f1b,"interleaved_1f1b@v=2","chimera@split=1:2"]', *GRID])


@pytest.mark.parametrize("label, canonical", [
    ("hanayo@waves:2", "hanayo@waves=2"), ("chimera@split=1:2", "chimera@split=1:2"), ("gpipe", "gpipe"),
    ("mine@a:1@b=x:y", "mine@a=1@b=x:y"),
])
def test_canonical_label(label, canonical):
    assert canonical_label(label) == canonical


def test_help_shows_the_variant_forms():
    run = subprocess.run([sys.executable, "-m", "ppsweep", "--help"], capture_output=True, text=True, timeout=120)
    assert "interleaved_1f1b@v:2" in run.stdout and '\'schedules=[1f1b,"interleaved_1f1b@v=2"]\'' in run.stdout


@pytest.mark.parametrize("field", sorted(SYSTEM_FIELD_AXES))
def test_a_list_given_to_a_system_field_names_the_axis(field):
    with pytest.raises(ValueError) as error:
        load_config(["+sweep=bandwidth", f"system.{field}=[8e10,1.41e11]", *GRID])
    message = str(error.value)
    assert message.startswith(f"system.{field}: ") and f"top-level {SYSTEM_FIELD_AXES[field]!r} key" in message
    assert "\n" not in message


def test_show_and_trace_take_the_sweeps_key_names():
    from ppsweep.viz.show import parse_assignments

    assert parse_assignments(["p=[4]", "m=8", "comm.mode=contention", "split=1:2"]) == {
        "p": 4, "m": 8, "mode": "contention", "split": "1:2"}
    run = subprocess.run([sys.executable, "-m", "ppsweep.show", "1f1b", "p=[4,8]", "m=8"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stderr.strip() == "error: p: one point, one value (e.g. p=4), got [4,8]"


def test_the_console_script_is_the_same_command():
    import shutil
    from pathlib import Path

    script = shutil.which("ppsweep", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("ppsweep's console script is not installed beside this interpreter (pip install -e .)")
    ours = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    module = subprocess.run([sys.executable, "-m", "ppsweep", "--help"], capture_output=True, text=True, timeout=120)
    assert ours.returncode == module.returncode == 0 and ours.stdout == module.stdout
    assert subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60).stdout.startswith("ppsweep ")


def test_step_times_past_a_day_get_a_warning_naming_the_units(tmp_path):
    # peak_flops=1e9 (meant as 1e15?) gives a step of years: legal, said in one line, store written.
    run = subprocess.run([sys.executable, "-m", "ppsweep", "name=slip", f"results_dir={tmp_path}", "schedules=[1f1b]", "p=[4]",
                          "m=[8]", "bandwidth=[2e6]", "latency=[1e-6]", "system.peak_flops=1e9", "progress=false"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    warning = [line for line in run.stderr.splitlines() if line.startswith("warning: step times up to")]
    assert len(warning) == 1 and "days: check the units" in warning[0] and "peak_flops in FLOP/s" in warning[0]
    assert (tmp_path / "slip.zarr").is_dir()
