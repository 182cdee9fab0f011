"""1F1B, also PipeDream-Flush (Narayanan et al., 2021): one forward, one backward.

Stage ``s`` lives on worker ``s``. The schedule has three phases on each worker:

- **warm-up**: ``min(p-1-w, m)`` forwards fill the pipeline below worker ``w``;
- **steady state**: alternate one forward and one backward;
- **cool-down**: the remaining backwards.

It has GPipe's bubble but holds at most ``min(p, m)`` activations.

:func:`build_order` computes every worker's phases at once with numpy (a table is built in
microseconds per thousand operations); :func:`worker_order` says the same one operation at a time
and is the reference the tests compare it with.
"""

from __future__ import annotations

import numpy as np

from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder, one_replica_layout


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
    """Per-worker orders of 1F1B: :func:`worker_order` for all workers at once, as arrays.

    Position ``k`` of worker ``w``'s ``2m`` operations, with ``warmup = min(p-1-w, m)``:

    - **warm-up** (``k < warmup``): ``F(k)``;
    - **steady state** (``warmup <= k < 2m - warmup``): ``F(warmup + i)`` then ``B(i)``,
      ``i = (k - warmup) // 2``;
    - **cool-down** (``k >= 2m - warmup``): ``B(k - m)``, the backwards left.
    """
    w = np.arange(p)[:, None]  # a row per worker (its stage)
    k = np.arange(2 * m)[None, :]  # a column per position in the worker's order
    warmup = np.minimum(p - 1 - w, m)
    steady = (k >= warmup) & (k < 2 * m - warmup)
    cooldown = k >= 2 * m - warmup
    i = (k - warmup) // 2
    backward = cooldown | (steady & ((k - warmup) % 2 == 1))
    micro = np.where(steady, np.where(backward, i, warmup + i), np.where(cooldown, k - m, k))
    orders = OrderArrays.from_grid(np.where(backward, int(Kind.B), int(Kind.F)), micro, w)
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
