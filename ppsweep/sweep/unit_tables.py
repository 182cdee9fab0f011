"""A unit's tables: each schedule's table at the unit's ``(p, m)``, and the table-level values it records.

Shared by the pipeline sweep (:mod:`ppsweep.sweep.evaluate`) and the layout sweep
(:mod:`ppsweep.sweep.layout_eval`), which record the same levels 1 and 2 of a table.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ppsweep.sweep.config import SweepSpec
from ppsweep.sweep.timing import phase
from ppsweep.tables.build import UnsupportedPointError, bubble_formula, build_schedule
from ppsweep.tables.table import ScheduleTable


def unit_tables(spec: SweepSpec, p: int, m: int) -> Iterator[tuple[int, str, ScheduleTable]]:
    """``(k, name, table)`` for each schedule ``k`` of ``spec`` that runs at ``(p, m)``, its table built
    (or read from the table cache) in the ``build`` phase; a schedule that cannot run there is skipped
    (its values stay invalid)."""
    for k, name in enumerate(spec.schedules):
        try:
            with phase("build"):
                table = build_schedule(name, p, m, spec.f_slots, spec.b_slots, **spec.options_for(name))
        except UnsupportedPointError:
            continue
        yield k, name, table


def record_table(out: dict[str, np.ndarray], here: tuple[int, ...], spec: SweepSpec, name: str, table: ScheduleTable,
                 p: int, m: int) -> None:
    """Mark ``here`` valid and record the table's closed-form bubble (level 1), its idealized bubble
    and its length (level 2) there."""
    out["valid"][here] = True
    out["bubble_formula"][here] = bubble_formula(name, p, m, **spec.options_for(name))
    out["bubble_table"][here] = table.bubble_ratio()
    out["length_table"][here] = table.length
