"""Start-up: what a sweep imports before its evaluators start (README, "Performance", start-up).

Validating a sweep's config must not import JAX (seconds): the spawned evaluators start right
after the check, and import JAX while this process does, instead of after it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert "JAX IMPORTED" not in run.stderr


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


@pytest.mark.parametrize("method", ["auto", "scan"])
def test_a_sweep_whose_tables_take_the_cpu_loop_or_the_envelope_imports_no_jax(tmp_path, method):
    # On one CPU device every table takes the envelope (numpy) or the compiled CPU loop (numba), in
    # every mode; JAX (about 1.4 s a process) is imported only where a JAX scan runs.
    code = (
        "import sys\n"
        "class Watch:  # says so the moment anything imports JAX (main() leaves through os._exit)\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'jax':\n"
        "            print('JAX IMPORTED', file=sys.stderr, flush=True)\n"
        "sys.meta_path.insert(0, Watch())\n"
        "from ppsweep.cli.main import main\n"
        f"sys.argv = ['ppsweep', '+sweep=design', 'p=[4]', 'm=[8,64]', 'results_dir={tmp_path}/r', 'hydra.run.dir={tmp_path}/h',\n"
        f"            'engine.workers=1', 'progress=false', 'engine.compilation_cache={tmp_path}/j', 'engine.method={method}']\n"
        "main()\n"
    )
    env = {**os.environ, "PPSWEEP_TABLE_CACHE": str(tmp_path / "t"), "PPSWEEP_ENVELOPE_CACHE": str(tmp_path / "e")}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert "wrote 30,720 points" in run.stderr  # 15 schedules × 2 m × 4 modes × 32 bandwidths × 8 latencies
    assert "JAX IMPORTED" not in run.stderr


def test_costs_become_a_jax_pytree_once_registered():
    # The engine imports JAX only where a JAX scan runs; Costs is registered then (or here, asked).
    import jax

    from ppsweep.engine.cost_grid import Costs, register_pytree

    register_pytree()
    register_pytree()  # once per process, however often asked
    costs = Costs.of(2, [1.0, 2.0], [3.0, 4.0], 1e-6, 1e9, 1e6)
    doubled = jax.tree.map(lambda x: x * 2, costs)
    assert isinstance(doubled, Costs)
    assert doubled.t_f.tolist() == [2.0, 4.0] and float(doubled.beta) == 2e9
    assert len(jax.tree.leaves(costs)) == len(jax.tree.leaves(doubled)) >= 9
