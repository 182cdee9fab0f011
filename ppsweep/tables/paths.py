"""The table-level operations' front doors: each one function, its reference and its array code registered.

- :data:`REALIZE`: an order to its as-soon-as-possible table: the reference
  :func:`ppsweep.tables.table.realize`, the array code :func:`ppsweep.tables.fast_realize.realize_fast`
  where :func:`~ppsweep.tables.fast_realize.order_handled` holds.
- :data:`VALIDATE`: a table's validity: the reference :func:`ppsweep.tables.validate.validate_table`,
  the array code :func:`~ppsweep.tables.fast_realize.validate_fast` where
  :func:`~ppsweep.tables.fast_realize.array_path_handles` holds.

(The engine's :data:`ppsweep.engine.fast_program.PROGRAM` is the third, with the same predicate.)
Every implementation gives the reference's result to the bit, errors included (``tests/conformance/``).
"""

from __future__ import annotations

from ppsweep.implementations import Implementations
from ppsweep.schedules.base import ScheduleOrder
from ppsweep.tables.fast_realize import array_path_handles, order_handled, realize_fast, validate_fast
from ppsweep.tables.table import ScheduleTable
from ppsweep.tables.table import realize as realize_reference
from ppsweep.tables.validate import validate_table

__all__ = ["REALIZE", "VALIDATE", "realize", "validate"]

REALIZE = Implementations("realize", realize_reference, order_handled)
REALIZE.register("array", realize_fast)

VALIDATE = Implementations("validate", validate_table, array_path_handles)
VALIDATE.register("array", validate_fast)


def realize(order: ScheduleOrder, f_slots: int = 1, b_slots: int = 2, *, implementation: str = "auto") -> ScheduleTable:
    """The as-soon-as-possible table of ``order`` (:func:`ppsweep.tables.table.realize`'s contract), by
    ``implementation`` (``auto``: the array code where it handles the order, else the reference)."""
    return REALIZE(order, f_slots, b_slots, implementation=implementation)


def validate(table: ScheduleTable, *, implementation: str = "auto") -> None:
    """Raise :class:`ppsweep.tables.validate.InvalidTableError` naming the first violation of ``table``
    (:func:`ppsweep.tables.validate.validate_table`'s contract), by ``implementation``."""
    VALIDATE(table, implementation=implementation)
