"""ppsweep: which pipeline-parallel schedule is fastest, and how sure can we be.

Flow: schedules (per-worker orders) → tables (dense, validated) → costs (seconds, bytes) →
engine (JAX max-plus scan) → sweep (grids of points) → store (zarr) → analysis.
"""

from ppsweep.build import UnsupportedPointError, bubble_formula, build_schedule, peak_activations_formula
from ppsweep.ops import Kind, Op
from ppsweep.schedules import SCHEDULES
from ppsweep.table import ScheduleTable, format_table, realize
from ppsweep.validate import InvalidTableError, validate_table

__version__ = "0.1.0"

__all__ = [
    "SCHEDULES",
    "InvalidTableError",
    "Kind",
    "Op",
    "ScheduleTable",
    "UnsupportedPointError",
    "bubble_formula",
    "build_schedule",
    "format_table",
    "peak_activations_formula",
    "realize",
    "validate_table",
]
