"""Small numba kernels run as Python on small inputs.

Building a table, compiling its program and routing it in ``ports`` each have small compiled loops
(:func:`ppsweep.tables.fast_realize._longest_paths`, ``_input_halves`` and ``_ops_valid``,
:func:`ppsweep.engine.fast_program._messages`, ``_waves_and_links`` and ``_first_fit``,
:func:`ppsweep.engine.port_rounds._walk`). Compiling one takes up to a second or two, so a run's evaluators
compile them once, in the ``tables`` warm-up (:mod:`ppsweep.engine.kernels`); the scan's and the
envelope's warm-ups, on a tiny table, then run them as the Python function numba compiles: the same
code on the same integers, microseconds on a few dozen items.

The tables a run builds before its evaluators start (the estimate's one tiny table per schedule,
:mod:`ppsweep.sweep.estimate`) run them as Python whatever their size (:func:`as_python`): compiled,
they had the run's own process compile two kernels (about 1.4 s on the design sweep) while the
other cores waited for the evaluators it starts after the estimate.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

#: Fewest items (a table's cells, a program's messages) for which a small kernel runs compiled.
SMALL_INPUT = 64


#: Whether this thread is within :func:`as_python`.
_PYTHON = threading.local()


@contextlib.contextmanager
def as_python() -> Iterator[None]:
    """Within it, this thread runs every small kernel as Python, whatever its input's size (the same
    results: :func:`compiled_unless_small`); for a few tiny tables built before anything is compiled."""
    outer = getattr(_PYTHON, "on", False)
    _PYTHON.on = True
    try:
        yield
    finally:
        _PYTHON.on = outer


def compiled_unless_small(kernel: Any, items: int) -> Callable[..., Any]:
    """``kernel`` (a numba dispatcher), or the Python function it compiles where its input holds fewer
    than :data:`SMALL_INPUT` items or the thread is within :func:`as_python` (the same results)."""
    return kernel.py_func if items < SMALL_INPUT or getattr(_PYTHON, "on", False) else kernel
