"""ZB-V (Qi et al., ICLR 2024, section 6), PyTorch's ``ZBVZeroBubble``.

**Placement** (V-shaped, 2 chunks per worker): the model is cut into ``S = 2p`` stages; stage ``s``
goes down the workers for ``s < p`` and comes back up for ``s >= p``, so worker ``w`` holds stages
``w`` (chunk 0) and ``2p-1-w`` (chunk 1), and the turn at worker ``p-1`` sends nothing.

**Phases** on worker ``w`` (counted on ``n = max(m, 2p-1)`` microbatches, the number that fills
the V; the passes of microbatches ``>= m`` are then left out):

- **warm-up 1**: ``2(p-w)-1`` forwards of chunk 0;
- **warm-up 2**: ``w`` times a forward of chunk 1, then one of chunk 0;
- **warm-up 3**: ``p-w`` times a forward of chunk 1, then its I and its W (the V's turn: chunk 1's
  backward starts as soon as its forward is done);
- **steady state**: while chunk 0's forwards last (and chunk 1 lags behind): a forward of chunk 0,
  an I and W of chunk 0, a forward of chunk 1, an I and W of chunk 1;
- **cool-down 1**: ``w`` times an I of chunk 0 and an I of chunk 1 (their W wait);
- **cool-down 2**: ``p-w`` times an I of chunk 0 and the oldest waiting W of chunk 0;
- **cool-down 3**: the waiting W passes, chunk 1's first, then chunk 0's.

**Operating range**: every ``p >= 2``, ``m >= 1`` (PyTorch accepts every ``m``; below ``2p-1`` the
V is not filled).

**Formulas.** The paper: zero bubble for equal F, I, W and ``m >= 2p`` (its figure counts the
start-up as overlapped with the previous step), with 1F1B's activation memory. Level 1 gives the
table's bubble derived here for unit F, I, W slots: each worker idles ``p-1`` chunk-slots,
``(p-1)/(6m + p-1)``; the tests say where it is exact. Peak activations: ``2p`` chunk-activations
of ``1/(2p)`` of the model each, i.e. ``p`` microbatches' worth of a stage, as 1F1B.

:func:`worker_order` runs the phases one operation at a time (the reference); :func:`order_arrays`
computes every worker's at once from the phases' lengths (what :func:`build_order` returns; tested equal).
"""

from __future__ import annotations

import numpy as np

from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder, one_replica_layout
from ppsweep.schedules.phases import phase_tokens, running_count, v_placement


def why_unsupported(p: int, m: int) -> str | None:
    """ZB-V runs for every ``p >= 2`` and ``m >= 1``."""
    return None


def worker_order(p: int, m: int, w: int) -> list[Op]:
    """Worker ``w``'s order, phase by phase (see the module docstring)."""
    n = max(m, 2 * p - 1)
    chunk0, chunk1 = w, 2 * p - 1 - w
    order: list[Op] = []
    count = {(kind, s): 0 for kind in (Kind.F, Kind.I, Kind.W) for s in (chunk0, chunk1)}

    def run(kind: Kind, stage: int) -> None:
        order.append(Op(kind, count[kind, stage], stage))
        count[kind, stage] += 1

    for _ in range(2 * (p - w) - 1):  # warm-up 1
        run(Kind.F, chunk0)
    for _ in range(w):  # warm-up 2
        run(Kind.F, chunk1)
        run(Kind.F, chunk0)
    for _ in range(p - w):  # warm-up 3: the turn of the V
        run(Kind.F, chunk1)
        run(Kind.I, chunk1)
        run(Kind.W, chunk1)
    while count[Kind.F, chunk1] < count[Kind.F, chunk0] or count[Kind.F, chunk0] < n:  # steady
        if count[Kind.F, chunk0] < n:
            run(Kind.F, chunk0)
        run(Kind.I, chunk0)
        run(Kind.W, chunk0)
        run(Kind.F, chunk1)
        run(Kind.I, chunk1)
        run(Kind.W, chunk1)
    for _ in range(w):  # cool-down 1
        run(Kind.I, chunk0)
        run(Kind.I, chunk1)
    for _ in range(p - w):  # cool-down 2
        run(Kind.I, chunk0)
        run(Kind.W, chunk0)
    for stage in (chunk1, chunk0):  # cool-down 3
        while count[Kind.W, stage] < count[Kind.I, stage]:
            run(Kind.W, stage)
    return [op for op in order if op.micro < m]


#: The tokens of :func:`order_arrays`: (kind, chunk) of each.
TOKENS = [(Kind.F, 0), (Kind.F, 1), (Kind.I, 0), (Kind.I, 1), (Kind.W, 0), (Kind.W, 1)]
F0, F1, I0, I1, W0, W1 = range(len(TOKENS))


def order_arrays(p: int, m: int) -> OrderArrays:
    """:func:`worker_order` of every worker at once: its phases with their lengths worked out.

    After the warm-ups worker ``w`` has run ``2p-w-1`` forwards of chunk 0 and ``p`` of chunk 1, so
    the steady state's loop runs ``n-2p+w+1`` times with a forward of chunk 0 (until there are ``n``)
    and ``p-w-1`` times without (until chunk 1 catches up); each chunk then has ``w`` W passes
    waiting for cool-down 3. The ``k``-th pass of a kind and chunk is microbatch ``k``.
    """
    n = max(m, 2 * p - 1)
    w = np.arange(p)
    phases = [  # (tokens of one repetition, repetitions on each worker)
        ([F0], 2 * (p - w) - 1),  # warm-up 1
        ([F1, F0], w),  # warm-up 2
        ([F1, I1, W1], p - w),  # warm-up 3
        ([F0, I0, W0, F1, I1, W1], n - 2 * p + w + 1),  # steady state, with chunk 0's forwards
        ([I0, W0, F1, I1, W1], p - w - 1),  # steady state, chunk 1 catching up
        ([I0, I1], w),  # cool-down 1
        ([I0, W0], p - w),  # cool-down 2
        ([W1], w),  # cool-down 3
        ([W0], w),
    ]
    lengths, token = phase_tokens([tokens for tokens, _ in phases], np.stack([count for _, count in phases], axis=1))
    micro = np.zeros(len(token), dtype=np.int64)
    for t in range(len(TOKENS)):
        mine = token == t
        micro[mine] = running_count(lengths, mine)[mine]
    kind_of, chunk_of = (np.array([int(x[i]) for x in TOKENS]) for i in (0, 1))
    worker = np.repeat(w, lengths)
    stage = np.where(chunk_of[token] == 0, worker, 2 * p - 1 - worker)
    kept = micro < m  # the passes of the microbatches that fill the V are left out
    lengths = np.bincount(worker[kept], minlength=p)
    return OrderArrays(lengths, kind_of[token][kept], micro[kept], stage[kept])


def build_order(p: int, m: int) -> ScheduleOrder:
    """Per-worker orders of ZB-V (:func:`order_arrays`)."""
    orders = order_arrays(p, m)
    return ScheduleOrder("zbv", p, m, 2 * p, orders, split_backward=True, **one_replica_layout(p, m, 2 * p, v_placement(p)))


def bubble_formula(p: int, m: int) -> float:
    """``(p-1)/(6m + p-1)``: ``p-1`` idle chunk-slots per worker against ``6m`` busy ones."""
    return (p - 1) / (6 * m + p - 1)


def peak_activations_formula(p: int, m: int) -> float:
    """``min(2p, 2m)`` chunk-activations (``p`` microbatches of a whole stage, as 1F1B)."""
    return float(min(2 * p, 2 * m))


SCHEDULE = Schedule(
    name="zbv",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    description="ZB-V: V-shaped 2 chunks per worker, split backward; bubble (p-1)/(6m+p-1) for unit F, I, W",
)
