"""The run's evaluators compile each kernel once: compile_kernels takes every kernel in turn, each
under a lock that holds off any other holder until it is done."""

import threading

from ppsweep.engine import kernels


def test_compile_kernels_takes_every_kernel_in_turn_from_the_first(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(kernels, "KERNELS", {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")})
    kernels.compile_kernels(str(tmp_path), first=1)
    assert calls == ["b", "c", "a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.lock", "b.lock", "c.lock"]
    kernels.compile_kernels(None, first=5)  # no lock directory: no locks, the same turns
    assert calls[3:] == ["c", "a", "b"]


def test_a_kernel_lock_holds_off_the_next_holder_until_released(tmp_path):
    events = []
    inside = threading.Event()
    release = threading.Event()

    def first():
        with kernels._locked(str(tmp_path), "scan"):
            events.append("first in")
            inside.set()
            release.wait(timeout=30)
            events.append("first out")

    def second():
        inside.wait(timeout=30)
        with kernels._locked(str(tmp_path), "scan"):
            events.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    inside.wait(timeout=30)
    waiting = threading.Thread(target=lambda: (threads[1].join(timeout=0.5), release.set()))
    waiting.start()
    for t in (*threads, waiting):
        t.join(timeout=60)
    assert events == ["first in", "first out", "second in"]


def test_the_kernels_run_on_their_small_tables():
    for name, compile_one in kernels.KERNELS.items():
        compile_one()  # compiles (or loads from numba's cache) the kernel, and runs it


def test_small_inputs_run_a_kernels_python_with_the_same_results():
    import numpy as np

    from ppsweep.engine.fast_program import _first_fit
    from ppsweep.engine.port_rounds import _walk
    from ppsweep.small_inputs import SMALL_INPUT, compiled_unless_small

    assert compiled_unless_small(_first_fit, SMALL_INPUT - 1) is _first_fit.py_func
    assert compiled_unless_small(_first_fit, SMALL_INPUT) is _first_fit
    rng = np.random.default_rng(3)
    born = np.sort(rng.integers(0, 20, 40))
    dies = born + rng.integers(0, 6, 40)
    registers = [np.empty(40, dtype=np.int64) for _ in range(2)]
    for kernel, out in zip((_first_fit, _first_fit.py_func), registers):
        kernel(born, dies, out)
    assert np.array_equal(*registers) and registers[0].max() > 0
    wave = np.sort(rng.integers(0, 6, 40))
    end, egress, ingress = wave * 3 + rng.integers(0, 3, 40), rng.integers(0, 4, 40), 4 + rng.integers(0, 4, 40)
    rounds = [np.full(40, -1, dtype=np.int64) for _ in range(2)]
    answers = [tuple(int(x) for x in kernel(wave, end, egress, ingress, out)) for kernel, out in zip((_walk, _walk.py_func), rounds)]
    assert answers[0] == answers[1] and np.array_equal(*rounds)


def test_as_python_runs_every_small_kernel_as_python_in_its_thread_only():
    from ppsweep.engine.fast_program import _first_fit
    from ppsweep.small_inputs import SMALL_INPUT, as_python, compiled_unless_small

    seen = []
    with as_python():
        with as_python():
            assert compiled_unless_small(_first_fit, 10 * SMALL_INPUT) is _first_fit.py_func
        assert compiled_unless_small(_first_fit, 10 * SMALL_INPUT) is _first_fit.py_func  # the outer one holds
        other = threading.Thread(target=lambda: seen.append(compiled_unless_small(_first_fit, 10 * SMALL_INPUT)))
        other.start()
        other.join()
    assert seen == [_first_fit]  # another thread compiles as before
    assert compiled_unless_small(_first_fit, 10 * SMALL_INPUT) is _first_fit


ESTIMATE_COMPILES_NOTHING = """
from ppsweep.sweep.config import SweepSpec
from ppsweep.sweep.estimate import estimate
from ppsweep.tables.fast_realize import _input_halves, _longest_paths, _ops_valid
from ppsweep.engine.fast_program import _first_fit, _messages, _waves_and_links
from ppsweep.engine.port_rounds import _walk
from tests.conftest import SMALL_MODEL, SMALL_SYSTEM
spec = SweepSpec.from_config({"name": "s", "schedules": ["1f1b", "interleaved_1f1b", "zb_h1", "dualpipev"], "p": [4, 64], "m": [8, 512],
                              "bandwidth": [1e9], "latency": [1e-6], "model": SMALL_MODEL, "system": SMALL_SYSTEM})
print(estimate(spec).tables)
print(sum(len(k.signatures) for k in (_input_halves, _longest_paths, _ops_valid, _first_fit, _messages, _waves_and_links, _walk)))
"""


def test_the_estimate_compiles_no_kernel(tmp_path):
    # A run estimates before it starts its evaluators, which compile the kernels: its tiny tables
    # (p = 4, m = 8: 64 operations or more, at or above SMALL_INPUT) run them as Python. A fresh
    # interpreter with an empty numba cache: a kernel compiled (or loaded) would show a signature.
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PPSWEEP_TABLE_CACHE": "off"}
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", ESTIMATE_COMPILES_NOTHING], env=env, cwd=root, capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out == ["16", "0"]
