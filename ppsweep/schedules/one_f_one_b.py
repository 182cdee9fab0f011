"""1F1B, also PipeDream-Flush (Narayanan et al., 2021): one forward, one backward.

Stage ``s`` lives on worker ``s``. The schedule has three phases on each worker:

- **warm-up**: ``min(p-1-w, m)`` forwards fill the pipeline below worker ``w``;
- **steady state**: alternate one forward and one backward;
- **cool-down**: the remaining backwards.

It has GPipe's bubble but holds at most ``min(p, m)`` activations.
"""

from __future__ import annotations

from ppsweep.ops import Kind, Op
from ppsweep.schedules.base import Schedule, ScheduleOrder, one_replica_layout


def why_unsupported(p: int, m: int) -> str | None:
    """1F1B runs for every ``p >= 2`` and ``m >= 1``."""
    return None


def worker_order(p: int, m: int, w: int) -> tuple[Op, ...]:
    """The order of worker ``w`` (stage ``w``), phase by phase."""
    warmup = min(p - 1 - w, m)
    order = [Op(Kind.F, j, w) for j in range(warmup)]
    for i in range(m - warmup):  # steady state
        order += [Op(Kind.F, warmup + i, w), Op(Kind.B, i, w)]
    order += [Op(Kind.B, j, w) for j in range(m - warmup, m)]  # cool-down
    return tuple(order)


def build_order(p: int, m: int) -> ScheduleOrder:
    """Per-worker orders of 1F1B."""
    orders = tuple(worker_order(p, m, w) for w in range(p))
    return ScheduleOrder("1f1b", p, m, p, orders, **one_replica_layout(p, m, p, list(range(p))))


def bubble_formula(p: int, m: int) -> float:
    """``(p-1)/(m+p-1)``, the same as GPipe."""
    return (p - 1) / (m + p - 1)


def peak_activations_formula(p: int, m: int) -> float:
    """``min(p, m)``: worker 0 holds ``p`` activations when its first backward starts."""
    return float(min(p, m))


SCHEDULE = Schedule(
    name="1f1b",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    description="1F1B (PipeDream-Flush): warm-up, one forward one backward, cool-down",
)
