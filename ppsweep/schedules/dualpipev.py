"""DualPipeV (DeepSeek's "cut-in-half" DualPipe; PyTorch's ``DualPipeV``).

**Placement** (V-shaped, one replica, 2 chunks per worker): ``S = 2p`` stages; worker ``w``
holds stage ``w`` (**chunk 0**, on the way down) and stage ``2p-1-w`` (**chunk 1**, on the way
back up), as ZB-V. Each worker is ``h = w`` hops from the start.

**Phases**: DualPipe's eight (:func:`ppsweep.schedules.dualpipe.phase_order`) with ``n = p``
workers and ``c = m`` microbatches per chunk: nF0, nF0F1, nI1W1F1, the main step of F&B pairs
nF0B1F1B0 (the last worker, ``h = p-1``, runs its first forward of chunk 0 and backward of
chunk 1 apart), nB1F1B0, nB1B0 (split from its middle on), nWB0, nW. Pairs carry full backwards;
phases 3, 6 and 7 split theirs into I and W (a mixed table).

**Operating range**: ``m >= 2p`` (PyTorch: "at least as many microbatches as stages").

**Formulas.** DeepSeek gives DualPipeV's bubble as DualPipe's with ``p`` workers per half:
``(p-1)(F&B + B - 3W)``; with the table's slots (F&B 3, B 2, W 1) that is ``2(p-1)`` idle chunk-slots
per worker, bubble ``2(p-1)/(6m + 2(p-1))`` (:func:`bubble_formula`), equal to the table in the
whole range (tested). Activations: ``2p+1`` chunk-activations (``1/(2p)`` of the model each) on
every worker, read off the table (tested) — DeepSeek's ``p+1`` in their units.
"""

from __future__ import annotations

import numpy as np

from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import Schedule, ScheduleOrder, one_replica_layout
from ppsweep.schedules.dualpipe import phase_arrays, phase_order
from ppsweep.schedules.phases import v_placement


def why_unsupported(p: int, m: int) -> str | None:
    """None where DualPipeV runs: ``m >= 2p``."""
    if m < 2 * p:
        return f"m must be at least 2p = {2 * p} for dualpipev (as many microbatches as stages), got {m}"
    return None


def worker_orders(p: int, m: int) -> tuple[tuple[tuple[Op, ...], ...], frozenset[tuple[int, int]]]:
    """Every worker's :func:`~ppsweep.schedules.dualpipe.phase_order`, one operation at a time (the reference)."""
    orders, split = [], set()
    for w in range(p):

        def chunk_op(kind: Kind, chunk: int, k: int, w: int = w) -> Op:
            return Op(kind, k, w if chunk == 0 else 2 * p - 1 - w)

        order, mine = phase_order(p, w, m, chunk_op)
        orders.append(tuple(order))
        split |= mine
    return tuple(orders), frozenset(split)


def build_order(p: int, m: int) -> ScheduleOrder:
    """Per-worker orders of DualPipeV: :func:`worker_orders` as arrays (:func:`~ppsweep.schedules.dualpipe.phase_arrays`)."""

    def chunk_place(worker: np.ndarray, chunk: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return k, np.where(chunk == 0, worker, 2 * p - 1 - worker)

    orders, split = phase_arrays(p, np.arange(p), m, chunk_place)
    return ScheduleOrder(
        "dualpipev", p, m, 2 * p, orders, split_backward=split, **one_replica_layout(p, m, 2 * p, v_placement(p)),
    )


def bubble_formula(p: int, m: int) -> float:
    """``2(p-1)/(6m + 2(p-1))``: ``(p-1)(F&B + B - 3W)`` idle chunk-slots with F&B 3, B 2, W 1."""
    return 2 * (p - 1) / (6 * m + 2 * (p - 1))


def peak_activations_formula(p: int, m: int) -> float:
    """``2p + 1`` chunk-activations (from the table; DeepSeek's ``p+1`` counts whole stages)."""
    return float(2 * p + 1)


SCHEDULE = Schedule(
    name="dualpipev",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    description="DualPipeV (DeepSeek, PyTorch): V-shaped DualPipe, overlapped F&B pairs",
)
