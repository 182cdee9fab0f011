"""ppsweep: which pipeline-parallel schedule is fastest, and how sure can we be.

Flow: schedules (per-worker orders) → tables (dense, validated) → costs (seconds, bytes) →
engine (JAX max-plus scan) → sweep (grids of points) → store (zarr) → analysis.

The names below are imported on first use, so that ``import ppsweep`` (and ``python -m
ppsweep``, which imports it first) stays instant: the command line answers bad input and
Ctrl-C before the heavy imports.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Callable

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS = {
    "SCHEDULES": "ppsweep.schedules",
    "InvalidTableError": "ppsweep.tables.validate",
    "Kind": "ppsweep.tables.ops",
    "Op": "ppsweep.tables.ops",
    "ScheduleTable": "ppsweep.tables.table",
    "UnsupportedPointError": "ppsweep.tables.build",
    "bubble_formula": "ppsweep.tables.build",
    "build_schedule": "ppsweep.tables.build",
    "format_table": "ppsweep.tables.table",
    "peak_activations_formula": "ppsweep.tables.build",
    "realize": "ppsweep.tables.table",
    "validate_table": "ppsweep.tables.validate",
}

__all__ = sorted(_EXPORTS)


def lazy_exports(module: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` that import each exported name on first use.

    Args:
      module: the package's ``__name__``.
      exports: public name -> the module that defines it.

    Returns:
      ``(__getattr__, __dir__)`` for the package's namespace (a value is cached there once read).
    """
    namespace = sys.modules[module].__dict__

    def getattr_(name: str) -> Any:
        if name in exports:
            namespace[name] = getattr(importlib.import_module(exports[name]), name)
            return namespace[name]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    def dir_() -> list[str]:
        return sorted([*namespace, *exports])

    return getattr_, dir_


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

from ppsweep import moved as _moved  # noqa: E402 - old module paths (deprecated), after the names above

_moved.install()


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS tells it), at least 1."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


#: Evaluators of the current run sharing this machine's cores (:func:`share_cores`).
_SHARERS = 1


def share_cores(evaluators: int) -> None:
    """Declare that ``evaluators`` evaluators (this process's and others) now share the cores, so that
    each engine call takes its share of them (:func:`engine_threads`); 1 when the run ends.
    :mod:`ppsweep.sweep.parallel` calls it in every evaluator."""
    global _SHARERS
    _SHARERS = max(1, int(evaluators))


def engine_threads() -> int:
    """Threads one engine call may run side by side: the usable cores divided among the evaluators
    sharing them (:func:`share_cores`), at least 1. Results do not depend on it."""
    return max(1, usable_cores() // _SHARERS)
