"""Start-up: what a sweep imports before its evaluators start (README, "Performance", start-up).

Validating a sweep's config must not import JAX (seconds): the spawned evaluators start right
after the check, and import JAX while this process does, instead of after it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_validating_a_sweep_imports_no_jax():
    code = (
        "import sys\n"
        "from ppsweep.sweep.config import load_plan\n"
        "plan = load_plan(['+sweep=million', 'engine.method=scan'])\n"
        "assert plan.spec.method == 'scan'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'jax'))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "[]"


def test_a_bad_method_is_named_before_any_work():
    from ppsweep.engine.core import METHODS, check_method
    from ppsweep.sweep.config import load_plan

    assert METHODS == ("auto", "scan", "envelope") and check_method("auto") == "auto"
    try:
        load_plan(["+sweep=million", "engine.method=fast"])
    except ValueError as error:
        assert str(error) == "engine.method: unknown method 'fast'; accepted: auto, scan, envelope, reference, jax_scan, native_scan, periodic_scan, piecewise_scan"
    else:
        raise AssertionError("engine.method=fast was accepted")
