"""ppsweep: which pipeline-parallel schedule is fastest, and how sure can we be.

Flow: schedules (per-worker orders) → tables (dense, validated) → costs (seconds, bytes) →
engine (JAX max-plus scan) → sweep (grids of points) → store (zarr) → analysis.

The names below are imported on first use, so that ``import ppsweep`` (and ``python -m
ppsweep``, which imports it first) stays instant: the command line answers bad input and
Ctrl-C before the heavy imports.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS = {
    "SCHEDULES": "ppsweep.schedules",
    "InvalidTableError": "ppsweep.validate",
    "Kind": "ppsweep.ops",
    "Op": "ppsweep.ops",
    "ScheduleTable": "ppsweep.table",
    "UnsupportedPointError": "ppsweep.build",
    "bubble_formula": "ppsweep.build",
    "build_schedule": "ppsweep.build",
    "format_table": "ppsweep.table",
    "peak_activations_formula": "ppsweep.build",
    "realize": "ppsweep.table",
    "validate_table": "ppsweep.validate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ppsweep' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
