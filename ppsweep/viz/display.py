"""Helpers shared by the figures (:mod:`ppsweep.viz.plots`), the traces (:mod:`ppsweep.viz.trace`) and the
explorer (:mod:`ppsweep.viz.explore`): units chosen by magnitude, and lanes for overlapping intervals.

Values are stored in SI units (seconds, bytes); shown to people, they are scaled to the unit that
makes the number readable: ``66.74 s``, not ``6.674e+04 ms``; ``26.8 TB``, not ``26,770 GB``.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ppsweep.sweep.dimensions import DIMENSIONS

#: Time units (seconds per unit), smallest first.
TIME_UNITS = ((1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s"))
#: Byte units (bytes per unit, decimal as in the cost model's GB/s), smallest first.
BYTE_UNITS = ((1.0, "B"), (1e3, "kB"), (1e6, "MB"), (1e9, "GB"), (1e12, "TB"), (1e15, "PB"))


def pick_unit(magnitude: float | Sequence[float] | np.ndarray, units: Sequence[tuple[float, str]]) -> tuple[float, str]:
    """The largest unit in which ``magnitude`` is at least 1 (the smallest unit below that).

    Args:
      magnitude: a value, or values whose largest finite absolute value decides.
      units: ``(size, name)`` pairs, smallest first (:data:`TIME_UNITS`, :data:`BYTE_UNITS`).

    Returns:
      ``(size, name)``: divide by ``size`` to express a value in ``name``. The base unit where
      nothing is finite and non-zero.
    """
    values = np.abs(np.asarray(magnitude, dtype=float))
    values = values[np.isfinite(values) & (values > 0)]
    base = next((u for u in units if u[0] == 1.0), units[0])
    if values.size == 0:
        return base
    largest = float(values.max())
    chosen = units[0]
    for unit in units:
        if largest >= unit[0]:
            chosen = unit
    return chosen


def time_unit(seconds: float | Sequence[float] | np.ndarray) -> tuple[float, str]:
    """:func:`pick_unit` for seconds: ``(1e-3, "ms")`` for 0.0042 s, ``(1.0, "s")`` for 66.7 s."""
    return pick_unit(seconds, TIME_UNITS)


def byte_unit(nbytes: float | Sequence[float] | np.ndarray) -> tuple[float, str]:
    """:func:`pick_unit` for bytes: ``(1e9, "GB")`` for 3.2e11, ``(1e12, "TB")`` for 2.7e13."""
    return pick_unit(nbytes, BYTE_UNITS)


def format_time(seconds: float, digits: int = 4) -> str:
    """``seconds`` in the unit of its magnitude, ``digits`` significant: ``66.74 s``, ``4.2 ms``."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    size, name = time_unit(seconds)
    return f"{seconds / size:.{digits}g} {name}"


def format_bytes(nbytes: float, digits: int = 4) -> str:
    """``nbytes`` in the unit of its magnitude, ``digits`` significant: ``26.77 TB``, ``512 MB``."""
    if not math.isfinite(nbytes):
        return f"{nbytes} B"
    size, name = byte_unit(nbytes)
    return f"{nbytes / size:.{digits}g} {name}"


#: Colours of the schedules, in store order (the figures and the explorer).
SCHEDULE_COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD"]

#: Units (:data:`ppsweep.sweep.dimensions.DIMENSIONS`) whose values are shown scaled to their magnitude.
_UNIT_FORMATS = {
    "bytes/s": lambda v: f"{format_bytes(v, 3)}/s",
    "s": lambda v: format_time(v, 3),
    "bytes": lambda v: format_bytes(v, 3),
    "FLOP/s": lambda v: format_flops(v),
}


def format_flops(flops_per_second: float, digits: int = 3) -> str:
    """FLOP/s in the unit of its magnitude: ``500 TFLOP/s``."""
    size, name = pick_unit(flops_per_second, ((1.0, ""), (1e9, "G"), (1e12, "T"), (1e15, "P"), (1e18, "E")))
    return f"{flops_per_second / size:.{digits}g} {name}FLOP/s"


def format_coordinate(dim: str, value) -> str:
    """A coordinate value as people read it: ``10 GB/s`` (bandwidth), ``1 µs`` (latency), ``80 GB``
    (memory_capacity), ``500 TFLOP/s`` (compute); other numbers with 4 significant digits; text as it is."""
    units = DIMENSIONS.get(dim)
    if units in _UNIT_FORMATS and isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value):
        return _UNIT_FORMATS[units](float(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return str(value)


def assign_lanes(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """Greedy lanes for intervals so that no two on one lane overlap (earliest free lane first).

    Returns:
      The lane of each interval, in the given order.
    """
    order = sorted(range(len(intervals)), key=lambda k: (intervals[k][0], intervals[k][1]))
    lane_end: list[float] = []
    lanes = [0] * len(intervals)
    for k in order:
        start, end = intervals[k]
        for lane, free in enumerate(lane_end):
            if free <= start:
                lane_end[lane] = end
                lanes[k] = lane
                break
        else:
            lane_end.append(end)
            lanes[k] = len(lane_end) - 1
    return lanes


def message_lanes(record) -> list[int]:
    """Lane of each message of a :class:`ppsweep.engine.reference.StepRecord` on its sender's ``send``
    lanes (no overlaps within a lane)."""
    lanes = [0] * len(record.messages)
    for w in range(record.p):
        mine = [k for k, msg in enumerate(record.messages) if msg.src == w]
        for k, lane in zip(mine, assign_lanes([(record.messages[k].send, record.messages[k].arrive) for k in mine])):
            lanes[k] = lane
    return lanes


__all__ = [
    "BYTE_UNITS",
    "TIME_UNITS",
    "assign_lanes",
    "byte_unit",
    "format_bytes",
    "format_time",
    "message_lanes",
    "pick_unit",
    "time_unit",
]
