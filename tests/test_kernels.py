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
