"""Looped BFS (Lamy-Poirier, "Breadth-First Pipeline Parallelism", 2023), PyTorch's ``LoopedBFS``.

**Placement** as interleaved 1F1B: ``v`` chunks per worker (option ``v``, default 2), chunk ``c``
of worker ``w`` is stage ``c·p + w``.

**Phases** on every worker (breadth first: a chunk runs every microbatch before the next chunk):

- **forward sweep**: for chunk ``0, 1, …, v-1``: the forwards of microbatches ``0 … m-1``;
- **backward sweep**: for chunk ``v-1, …, 0``: the backwards of microbatches ``m-1 … 0``
  (PyTorch takes them last-in first-out; the last microbatch's gradient comes back first).

It is GPipe over ``v`` loops: every activation is held until the backward sweep, ``v·m``
chunk-activations per worker.

**Operating range**: every ``p >= 2``, ``m >= 1``, ``v >= 1``.

**Formulas.** Bubble: with F and B of ``1/v`` of a stage, the fill and drain are ``p-1`` chunk-steps
each, ``(p-1)/(v·m + p-1)`` — the same closed form as interleaved 1F1B; it is exact on the table
where the looping forwards never wait (``m >= p``; see the tests). Peak activations ``v·m``.

:func:`worker_order` says the sweeps one operation at a time (the reference); :func:`order_arrays`
computes every worker's at once with numpy (what :func:`build_order` returns; tested equal).
"""

from __future__ import annotations

import numpy as np

from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder, one_replica_layout
from ppsweep.schedules.phases import check_int_option, looped_placement

DEFAULT_V = 2


def why_unsupported(p: int, m: int, v: int = DEFAULT_V) -> str | None:
    """Looped BFS runs for every ``p >= 2``, ``m >= 1``; a malformed ``v`` raises ValueError."""
    check_int_option("v", v, 1)
    return None


def worker_order(p: int, m: int, v: int, w: int) -> list[Op]:
    """Worker ``w``'s forward sweep over its chunks, then its backward sweep in reverse."""
    chunks = [c * p + w for c in range(v)]
    forward_sweep = [Op(Kind.F, j, s) for s in chunks for j in range(m)]
    backward_sweep = [Op(Kind.B, j, s) for s in reversed(chunks) for j in reversed(range(m))]
    return forward_sweep + backward_sweep


def order_arrays(p: int, m: int, v: int) -> OrderArrays:
    """:func:`worker_order` of every worker at once: the two sweeps as arrays."""
    chunk = np.repeat(np.arange(v), m)  # the forward sweep: chunk 0 for every microbatch, then chunk 1, …
    micro = np.tile(np.arange(m), v)
    kind = np.repeat([int(Kind.F), int(Kind.B)], v * m)[None, :]
    stage = np.concatenate([chunk, chunk[::-1]])[None, :] * p + np.arange(p)[:, None]  # the backward sweep reversed
    return OrderArrays.from_grid(kind, np.concatenate([micro, micro[::-1]])[None, :], stage)


def build_order(p: int, m: int, v: int = DEFAULT_V) -> ScheduleOrder:
    """Per-worker orders of looped BFS with ``v`` chunks per worker (:func:`order_arrays`)."""
    v = check_int_option("v", v, 1)
    orders = order_arrays(p, m, v)
    layout = one_replica_layout(p, m, v * p, looped_placement(p, v))
    return ScheduleOrder("looped_bfs", p, m, v * p, orders, options={"v": v}, **layout)


def bubble_formula(p: int, m: int, v: int = DEFAULT_V) -> float:
    """``(p-1)/(v·m + p-1)``: ``p-1`` chunk-steps of fill and of drain."""
    return (p - 1) / (check_int_option("v", v, 1) * m + p - 1)


def peak_activations_formula(p: int, m: int, v: int = DEFAULT_V) -> float:
    """``v·m`` chunk-activations: the whole forward sweep is held."""
    return float(check_int_option("v", v, 1) * m)


SCHEDULE = Schedule(
    name="looped_bfs",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    option_names={"v": DEFAULT_V},
    description="looped BFS: v looped chunks, each chunk runs all microbatches (GPipe over loops)",
)
