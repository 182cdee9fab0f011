"""Where a sweep's time goes: seconds per phase (build, compile, evaluate, write), per process.

:func:`phase` adds the wall time spent in its block to a process-wide total, whichever thread
runs it; :func:`take` returns the totals and starts again (worker processes send theirs back
with each unit's results). Phases of different threads and processes overlap, so their sum
exceeds the run's wall time when several evaluators or the writer thread work at once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

#: The phases a sweep reports, in order.
PHASES = ("build", "compile", "evaluate", "write")

_TOTALS: Counter = Counter()
_LOCK = threading.Lock()


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Add the seconds spent in the block to phase ``name``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        with _LOCK:
            _TOTALS[name] += time.perf_counter() - start


def take() -> dict[str, float]:
    """The seconds per phase since the last call (and reset them)."""
    with _LOCK:
        totals = dict(_TOTALS)
        _TOTALS.clear()
    return totals


def describe(totals: dict[str, float]) -> str:
    """One line: ``time split: build 1.2 s, compile 0.3 s, evaluate 4.5 s, write 0.6 s``."""
    parts = [f"{name} {totals.get(name, 0.0):.1f} s" for name in PHASES]
    return "time split (seconds summed over the evaluators and the writer thread, which overlap): " + ", ".join(parts)
