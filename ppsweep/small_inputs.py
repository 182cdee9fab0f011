"""Small numba kernels run as Python on small inputs.

Building a table, compiling its program and routing it in ``ports`` each have small compiled loops
(:func:`ppsweep.tables.fast_realize._longest_paths` and ``_input_halves``,
:func:`ppsweep.engine.fast_program._messages`, ``_waves_and_links`` and ``_first_fit``,
:func:`ppsweep.engine.port_rounds._walk`). Compiling one takes up to a second or two, so a run's evaluators
compile them once, in the ``tables`` warm-up (:mod:`ppsweep.engine.kernels`); the scan's and the
envelope's warm-ups, on a tiny table, then run them as the Python function numba compiles: the same
code on the same integers, microseconds on a few dozen items.
"""

from __future__ import annotations

from typing import Any, Callable

#: Fewest items (a table's cells, a program's messages) for which a small kernel runs compiled.
SMALL_INPUT = 64


def compiled_unless_small(kernel: Any, items: int) -> Callable[..., Any]:
    """``kernel`` (a numba dispatcher), or the Python function it compiles where its input holds fewer
    than :data:`SMALL_INPUT` items (the same results)."""
    return kernel.py_func if items < SMALL_INPUT else kernel
