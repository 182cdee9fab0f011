"""The engine's compiled kernels, compiled once per run however many evaluators it has.

numba compiles a kernel in the process that first calls it and keeps it on disk (``cache=True``);
a process that calls it before that file exists compiles it again. A run's evaluators all start
with the same work (an envelope's walk, then a scan), so after an upgrade each compiled every
kernel itself, at the same time: on the design sweep 14 of the cold run's 28 CPU seconds of
compiling were done twice. :func:`compile_kernels` has each evaluator compile one kernel first
(they take them in turn, so two evaluators compile two kernels at once), each under a lock that
every evaluator shares: an evaluator that needs a kernel another is compiling waits for it and then
loads it from numba's cache. Where numba's cache already holds them, each costs a few milliseconds.

The small kernels of building a table, its program and its ``ports`` routing run as Python (the
same function, uncompiled: :func:`ppsweep.small_inputs.compiled_unless_small`) on inputs of fewer
than :data:`~ppsweep.small_inputs.SMALL_INPUT` items, so that the scan's and the envelope's
warm-ups, on a tiny table, compile only their own kernel; the ``tables`` warm-up compiles the small
ones once, on a larger table.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, Iterator

import numpy as np


def _scan() -> None:
    """The compiled scan (and its periodic walk) on a small table: every run of it takes this kernel."""
    from ppsweep import build_schedule
    from ppsweep.engine.core import simulate

    simulate(build_schedule("1f1b", 2, 4), 1e-3, 2e-3, 1e-6, np.array([1e9, 1e10]), 1e6, "ports", backend="periodic_scan")


def _envelope() -> None:
    """The envelope's walk on a small table."""
    from ppsweep import build_schedule
    from ppsweep.engine.core import simulate

    simulate(build_schedule("1f1b", 2, 4), 1e-3, 2e-3, 1e-6, np.array([1e9, 1e10]), 1e6, "ports", backend="envelope")


def _tables() -> None:
    """The small kernels of building a table, compiling its program and routing it in ``ports``, on a
    table above :data:`~ppsweep.small_inputs.SMALL_INPUT` cells and messages."""
    from ppsweep import build_schedule
    from ppsweep.engine.comm import route
    from ppsweep.engine.fast_program import PROGRAM

    route(PROGRAM(build_schedule("1f1b", 4, 16)), "ports")


#: The kernels, each compiled by calling it on a small table (the same argument types as a sweep's).
#: The run's own thread starts with the scan, spawned evaluators with the next (:mod:`ppsweep.sweep.parallel`).
KERNELS: dict[str, Callable[[], None]] = {"scan": _scan, "tables": _tables, "envelope": _envelope}


@contextlib.contextmanager
def _locked(lock_dir: str | None, name: str) -> Iterator[None]:
    """Hold ``lock_dir/name.lock`` (every process of the run that asks for it waits its turn); no
    lock without ``lock_dir`` or where the platform has no ``fcntl``."""
    try:
        import fcntl
    except ImportError:  # not POSIX: each process compiles what it needs, as numba alone would
        fcntl = None
    if lock_dir is None or fcntl is None:
        yield
        return
    fd = os.open(Path(lock_dir) / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def compile_kernels(lock_dir: str | None, first: int = 0) -> None:
    """Compile (or load) every kernel of :data:`KERNELS`, starting with the ``first``-th and taking
    the others in turn, each under its lock in ``lock_dir`` (shared by the run's evaluators).

    Args:
      lock_dir: a directory every evaluator of the run names (None: no locks).
      first: which kernel this evaluator compiles first (evaluators given different ones compile
        at the same time).
    """
    names = list(KERNELS)
    start = first % len(names)
    for name in names[start:] + names[:start]:
        with _locked(lock_dir, name):
            KERNELS[name]()
