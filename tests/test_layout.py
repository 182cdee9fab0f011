"""The package's layout: public names of the subpackages, light imports, the short commands."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_subpackages_export_their_public_names():
    import ppsweep.engine
    import ppsweep.engine.core
    import ppsweep.store
    import ppsweep.store.open
    from ppsweep.engine import SimResult, simulate
    from ppsweep.store import open_results

    assert simulate is ppsweep.engine.core.simulate and SimResult is ppsweep.engine.core.SimResult
    assert open_results is ppsweep.store.open.open_results
    assert "simulate" in dir(ppsweep.engine)
    with pytest.raises(AttributeError, match="'ppsweep.engine' has no attribute 'simulat'"):
        ppsweep.engine.simulat  # noqa: B018


def test_rules_and_config_import_without_jax():
    # the config path checks modes (ppsweep.engine.comm) before any heavy import
    code = "import sys, ppsweep.engine.comm, ppsweep.sweep.config, ppsweep.store; print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'xarray')))"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@pytest.mark.parametrize("command", ["analyze", "show", "trace", "explore", "verify"])
def test_short_commands_run_their_module(command):
    run = subprocess.run([sys.executable, "-m", f"ppsweep.{command}", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"python -m ppsweep.{command}" in run.stdout
