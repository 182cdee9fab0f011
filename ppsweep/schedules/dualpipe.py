"""DualPipe (DeepSeek-V3 technical report, 2024; DeepSeek's reference code ``deepseek-ai/DualPipe``).

**Placement** (two directions, 2× parameters). The model is cut into ``S = p`` stages and kept
twice, as in Chimera: the *down* replica (0) places stage ``s`` on worker ``s``, the *up* replica
(1) on worker ``p-1-s``; ``p`` must be even. Microbatches ``0 … m/2-1`` run down (fed at worker 0)
and ``m/2 … m-1`` run up (fed at worker ``p-1``).

**Chunks.** A worker ``w`` is ``h = min(w, p-1-w)`` hops from the nearer end of the pipe
(its *half rank*). Its **chunk 0** is the direction in which it sits in the first half (down for
``w < p/2``), its **chunk 1** the other one. Both directions are alike seen from a worker's
half rank, so every worker runs the same phases, with ``n = p/2`` workers per half and ``c = m/2``
microbatches per direction (:func:`phase_order`, shared with DualPipeV):

1. **nF0**: ``2(n-1-h)`` forwards of chunk 0;
2. **nF0F1**: ``h+1`` times a forward of chunk 0, then one of chunk 1;
3. **nI1W1F1**: ``n-1-h`` times an input-gradient pass I of chunk 1, the oldest waiting W, a
   forward of chunk 1 (zero-bubble: the weight gradient fills the gap);
4. **nF0B1F1B0** (main step): ``c - 2n + h + 1`` times the pair F&B (forward of chunk 0 with the
   full backward of chunk 1), then the pair (forward of chunk 1, backward of chunk 0) — except
   that a middle worker (``h = n-1``) runs its first forward of chunk 0 and backward of chunk 1
   one after the other, not as a pair (DeepSeek: "to further reduce bubble size");
5. **nB1F1B0**: ``n-1-h`` times a backward of chunk 1, then the pair (forward 1, backward 0);
6. **nB1B0**: ``h+1`` times a backward of chunk 1 and one of chunk 0; from the middle of this
   phase on (``i = (h+1)//2``, before the chunk-1 backward on odd ``h``, after it on even ``h``),
   the backwards are split: I now, W later;
7. **nWB0**: ``n-1-h`` times the oldest waiting W, then a backward of chunk 0 (split from phase 6);
8. **nW**: the remaining ``h+1`` waiting W.

Backwards inside pairs are full (B); the split ones (phases 3, 6, 7) are I + W, so a table is
*mixed* (:mod:`ppsweep.tables.ops`). The k-th forward (or backward) of a chunk is its direction's k-th
microbatch.

**Operating range**: ``p`` even, ``m`` even, ``m >= 2p`` (DeepSeek's ``num_chunks >= num_ranks * 2``).

**Formulas.** DeepSeek's bubble ``(p/2-1)(F&B + B - 3W)`` per worker (B the full backward,
F&B the pair); with the table's slots (F 1, B 2, I = W 1, F&B 3) that is ``p-2`` idle slots against
``3m`` busy ones (``m/2`` microbatches × 2 chunks × 3 slots): bubble ``(p-2)/(3m + p-2)``
(:func:`bubble_formula`), equal to the table in the whole range (tested). Activations: DeepSeek's
``p+1`` microbatch-stages (of ``1/p`` of the model), on every worker (tested).

:func:`phase_order` runs the phases one operation at a time (the reference, :func:`worker_orders`);
:func:`phase_arrays` computes every worker's at once from the phases' lengths (what :func:`build_order`
returns, DualPipeV's too; tested equal).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ppsweep.tables.ops import NONE, Kind, Op, pair
from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder
from ppsweep.schedules.phases import phase_tokens, running_count


def phase_order(n: int, h: int, c: int, chunk_op: Callable[[Kind, int, int], Op]) -> tuple[list[Op], set[tuple[int, int]]]:
    """One worker's order in DualPipe's eight phases (module docstring).

    Args:
      n: workers per half of the pipe (``p/2`` for DualPipe, ``p`` for DualPipeV).
      h: the worker's half rank.
      c: microbatches per chunk (``m/2`` for DualPipe, ``m`` for DualPipeV).
      chunk_op: ``(kind, chunk, k) -> Op``: the operation of ``kind`` on the ``k``-th microbatch of ``chunk``.

    Returns:
      The order, and the ``(micro, stage)`` pairs whose backward it splits into I and W.
    """
    order: list[Op] = []
    split: set[tuple[int, int]] = set()
    forwards, backwards = [0, 0], [0, 0]
    waiting_w: list[Op] = []

    def forward(chunk: int) -> Op:
        forwards[chunk] += 1
        return chunk_op(Kind.F, chunk, forwards[chunk] - 1)

    def backward(chunk: int, zero_bubble: bool = False) -> Op:
        backwards[chunk] += 1
        op = chunk_op(Kind.B, chunk, backwards[chunk] - 1)
        if not zero_bubble:
            return op
        split.add((op.micro, op.stage))
        waiting_w.append(Op(Kind.W, op.micro, op.stage))
        return Op(Kind.I, op.micro, op.stage)

    def weight() -> None:
        if waiting_w:
            order.append(waiting_w.pop(0))

    for _ in range(2 * (n - 1 - h)):  # 1: nF0
        order.append(forward(0))
    for _ in range(h + 1):  # 2: nF0F1
        order += [forward(0), forward(1)]
    for _ in range(n - 1 - h):  # 3: nI1W1F1
        order.append(backward(1, zero_bubble=True))
        weight()
        order.append(forward(1))
    for i in range(c - 2 * n + h + 1):  # 4: nF0B1F1B0
        if i == 0 and h == n - 1:  # the middle worker does not overlap its first pair
            order += [forward(0), backward(1)]
        else:
            order.append(pair(forward(0), backward(1)))
        order.append(pair(forward(1), backward(0)))
    for _ in range(n - 1 - h):  # 5: nB1F1B0
        order.append(backward(1))
        order.append(pair(forward(1), backward(0)))
    zero_bubble = False
    for i in range(h + 1):  # 6: nB1B0, the second half split
        if i == (h + 1) // 2 and h % 2 == 1:
            zero_bubble = True
        order.append(backward(1, zero_bubble))
        if i == (h + 1) // 2 and h % 2 == 0:
            zero_bubble = True
        order.append(backward(0, zero_bubble))
    for _ in range(n - 1 - h):  # 7: nWB0
        weight()
        order.append(backward(0, zero_bubble))
    for _ in range(h + 1):  # 8: nW
        weight()
    return order, split


#: The tokens of :func:`phase_arrays`: (kind, chunk of the forward half, chunk of the backward half), -1: none.
TOKENS = [
    (Kind.F, 0, -1), (Kind.F, 1, -1), (Kind.B, -1, 0), (Kind.B, -1, 1), (Kind.I, -1, 0), (Kind.I, -1, 1),
    (Kind.W, -1, -1), (Kind.FB, 0, 1), (Kind.FB, 1, 0),
]
F0, F1, B0, B1, I0, I1, W, F0B1, F1B0 = range(len(TOKENS))


def phase_arrays(n: int, h: np.ndarray, c: int, chunk_place: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
                 ) -> tuple[OrderArrays, frozenset[tuple[int, int]]]:
    """:func:`phase_order` of every worker at once: the same eight phases, their lengths as arrays.

    Phase 4's first step is apart on the middle worker (4a), and phase 6 splits from its middle on:
    ``(h+1)//2`` steps B1 B0, then on even ``h`` one step B1 I0, then I1 I0. The ``k``-th forward
    (backward) half of a chunk is that chunk's ``k``-th; every call for a W finds one waiting, so the
    ``k``-th W of a worker is the W of its ``k``-th I.

    Args:
      n, c: as :func:`phase_order`. h: ``(p,)`` the half rank of each worker.
      chunk_place: ``(worker, chunk, k) -> (micro, stage)`` arrays: :func:`phase_order`'s ``chunk_op``.

    Returns:
      The orders, and the ``(micro, stage)`` pairs whose backward they split.
    """
    middle = (h == n - 1).astype(np.int64)
    even = (h % 2 == 0).astype(np.int64)
    phases = [  # (tokens of one repetition, repetitions on each worker)
        ([F0], 2 * (n - 1 - h)),  # 1: nF0
        ([F0, F1], h + 1),  # 2: nF0F1
        ([I1, W, F1], n - 1 - h),  # 3: nI1W1F1
        ([F0, B1, F1B0], middle * (c - 2 * n + h + 1 > 0)),  # 4a: the middle worker's first step, not overlapped
        ([F0B1, F1B0], c - 2 * n + h + 1 - middle),  # 4: nF0B1F1B0
        ([B1, F1B0], n - 1 - h),  # 5: nB1F1B0
        ([B1, B0], (h + 1) // 2),  # 6: nB1B0, before the split
        ([B1, I0], even),  # the middle step of an odd number of steps: split from chunk 0 on
        ([I1, I0], h + 1 - (h + 1) // 2 - even),  # split
        ([W, I0], n - 1 - h),  # 7: nWB0
        ([W], h + 1),  # 8: nW
    ]
    lengths, token = phase_tokens([tokens for tokens, _ in phases], np.stack([count for _, count in phases], axis=1))
    kind_of, f_chunk_of, b_chunk_of = (np.array([int(t[i]) for t in TOKENS]) for i in range(3))
    kind, f_chunk, b_chunk = kind_of[token], f_chunk_of[token], b_chunk_of[token]
    f_k, b_k = np.zeros(len(token), dtype=np.int64), np.zeros(len(token), dtype=np.int64)
    for chunk in (0, 1):
        for chunks, k in ((f_chunk, f_k), (b_chunk, b_k)):
            mine = chunks == chunk
            k[mine] = running_count(lengths, mine)[mine]
    weights, inputs = kind == Kind.W, kind == Kind.I
    b_chunk[weights], b_k[weights] = b_chunk[inputs], b_k[inputs]  # worker-major order: the k-th W is the k-th I's
    worker = np.repeat(np.arange(len(h)), lengths)
    f_micro, f_stage = chunk_place(worker, f_chunk, f_k)
    b_micro, b_stage = chunk_place(worker, b_chunk, b_k)
    has_forward = f_chunk >= 0
    pairs = kind == Kind.FB
    micro, stage = np.where(has_forward, f_micro, b_micro), np.where(has_forward, f_stage, b_stage)
    micro2, stage2 = np.where(pairs, b_micro, NONE), np.where(pairs, b_stage, NONE)
    split = frozenset(zip(micro[inputs].tolist(), stage[inputs].tolist()))
    return OrderArrays(lengths, kind, micro, stage, micro2, stage2), split


def why_unsupported(p: int, m: int) -> str | None:
    """None where DualPipe runs: ``p`` even, ``m`` even and ``m >= 2p``."""
    if p % 2:
        return f"p must be even for dualpipe (two directions over p/2 + p/2 workers), got {p}"
    if m % 2 or m < 2 * p:
        return f"m must be even and at least 2p = {2 * p} for dualpipe (DeepSeek's num_chunks >= 2 * num_ranks), got {m}"
    return None


def worker_orders(p: int, m: int) -> tuple[tuple[tuple[Op, ...], ...], frozenset[tuple[int, int]]]:
    """Every worker's :func:`phase_order`, one operation at a time (the reference of :func:`build_order`)."""
    half = m // 2
    orders, split = [], set()
    for w in range(p):
        h = min(w, p - 1 - w)
        down_first = w < p // 2  # chunk 0 is the down direction on the first half of the workers

        def chunk_op(kind: Kind, chunk: int, k: int, w: int = w, down_first: bool = down_first) -> Op:
            down = (chunk == 0) == down_first
            return Op(kind, k if down else half + k, w if down else p - 1 - w)

        order, mine = phase_order(p // 2, h, half, chunk_op)
        orders.append(tuple(order))
        split |= mine
    return tuple(orders), frozenset(split)


def build_order(p: int, m: int) -> ScheduleOrder:
    """Per-worker orders of DualPipe: :func:`worker_orders` as arrays (:func:`phase_arrays`)."""
    half = m // 2
    w = np.arange(p)

    def chunk_place(worker: np.ndarray, chunk: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        down = (chunk == 0) == (worker < p // 2)  # chunk 0 is the down direction on the first half of the workers
        return np.where(down, k, half + k), np.where(down, worker, p - 1 - worker)

    orders, split = phase_arrays(p // 2, np.minimum(w, p - 1 - w), half, chunk_place)
    return ScheduleOrder(
        name="dualpipe",
        p=p,
        m=m,
        n_stages=p,
        orders=orders,
        placement=np.asarray([list(range(p)), list(range(p - 1, -1, -1))], dtype=np.int64),
        micro_replica=np.asarray([0] * half + [1] * half, dtype=np.int64),
        stage_fractions=np.full(p, 1.0 / p),
        split_backward=split,
    )


def bubble_formula(p: int, m: int) -> float:
    """``(p-2)/(3m + p-2)``: DeepSeek's ``(p/2-1)(F&B + B - 3W)`` idle with F 1, B 2, W 1, F&B 3."""
    return (p - 2) / (3 * m + p - 2)


def peak_activations_formula(p: int, m: int) -> float:
    """``p + 1`` microbatch-stages (DeepSeek's activation figure for DualPipe)."""
    return float(p + 1)


SCHEDULE = Schedule(
    name="dualpipe",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    description="DualPipe (DeepSeek): two directions, 2x parameters, overlapped F&B pairs",
)
