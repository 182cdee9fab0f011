"""Interleaved zero bubble (Qi et al., ICLR 2024, "ZB-1P" with chunks), PyTorch's ``InterleavedZeroBubble``.

The backward is split into I (input gradient, on the critical path) and W (weight gradient,
free to move). **Placement**, **rounds** and the order of chunks are those of interleaved 1F1B
(:mod:`ppsweep.schedules.interleaved_1f1b`): ``v`` looped chunks per worker (option ``v``,
default 2).

**Phases** on worker ``w``:

- **warm-up**: ``min((v-1)·r + (p-1-w), v·m)`` forwards — one per hop to the last worker instead
  of interleaved 1F1B's two, because an I is as short as an F;
- **steady state**: one forward, one input-gradient pass I, and, once ``w`` I passes have run, the
  W of the I ``w`` places back (the W passes trail by ``w``, so every worker holds the same
  number of activations in flight, as ZB-H1 does);
- **cool-down**: the remaining I passes, each followed by its trailing W; then the last ``w`` W.

**Operating range**: as interleaved 1F1B (``m`` a multiple of ``max(1, m // p)``), ``v >= 1``;
``v = 1`` is :mod:`ppsweep.schedules.zb_h1`.

**Formulas.** Bubble: the zero-bubble paper's ZB-H1 idle ``(p-1)(F+I-W)`` per worker, for chunks
of ``1/v`` of a stage: ``(p-1)(F+I-W)/v`` against ``m(F+I+W)`` busy; with the table's unit F, I, W
slots, ``(p-1)/(3·v·m + p-1)``. Peak activations (chunk-activations, freed by W): worker 0's
warm-up, plus one, ``min((v-1)·r + p, v·m)``. The tests state where each is exact.

:func:`worker_order` says the phases one operation at a time (the reference); :func:`order_arrays`
computes every worker's at once with numpy (what :func:`build_order` returns; tested equal).
"""

from __future__ import annotations

import numpy as np

from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder, one_replica_layout
from ppsweep.schedules.interleaved_1f1b import why_unsupported as interleaved_why_unsupported
from ppsweep.schedules.phases import (
    check_int_option,
    looped_placement,
    one_f_one_b,
    one_f_one_b_positions,
    place,
    round_robin,
    round_robin_arrays,
    rounds_of,
)

DEFAULT_V = 2


def why_unsupported(p: int, m: int, v: int = DEFAULT_V) -> str | None:
    """None where the schedule runs (the rule of interleaved 1F1B)."""
    return interleaved_why_unsupported(p, m, v)


def warmup(p: int, m: int, v: int, w: int) -> int:
    """Forwards worker ``w`` runs before its first I."""
    _, r = rounds_of(p, m)
    return min((v - 1) * r + (p - 1 - w), v * m)


def worker_order(p: int, m: int, v: int, w: int) -> list[Op]:
    """Worker ``w``'s order: warm-up, F-I with W trailing by ``w``, cool-down."""
    forwards = [Op(Kind.F, j, s) for s, j in round_robin(p, m, v, w, backward=False)]
    grads = [Op(Kind.I, j, s) for s, j in round_robin(p, m, v, w, backward=True)]
    return one_f_one_b(forwards, grads, warmup(p, m, v, w), weight_lag=w)


def order_arrays(p: int, m: int, v: int) -> OrderArrays:
    """:func:`worker_order` of every worker at once: the same phases, as arrays (a W has its I's pass)."""
    f_stage, f_micro = round_robin_arrays(p, m, v, backward=False)
    i_stage, i_micro = round_robin_arrays(p, m, v, backward=True)
    lag = np.arange(p)  # worker w's W passes trail its I passes by w
    positions = one_f_one_b_positions(v * m, np.array([warmup(p, m, v, w) for w in range(p)]), weight_lag=lag)
    kind = np.array([int(Kind.F), int(Kind.I), int(Kind.W)])[None, :, None]
    micro = np.stack([f_micro, i_micro, i_micro])[None]
    stage = np.stack([f_stage, i_stage, i_stage], axis=1)
    return OrderArrays.from_grid(*place(positions, kind, micro, stage))


def build_order(p: int, m: int, v: int = DEFAULT_V, name: str = "interleaved_zb") -> ScheduleOrder:
    """Per-worker orders (:func:`order_arrays`; ``name`` lets ZB-H1, the ``v = 1`` case, keep its own name)."""
    v = check_int_option("v", v, 1)
    orders = order_arrays(p, m, v)
    layout = one_replica_layout(p, m, v * p, looped_placement(p, v))
    options = {"v": v} if name == "interleaved_zb" else {}
    return ScheduleOrder(name, p, m, v * p, orders, split_backward=True, options=options, **layout)


def bubble_formula(p: int, m: int, v: int = DEFAULT_V) -> float:
    """``(p-1)/(3·v·m + p-1)``: ZB-H1's ``(p-1)(F+I-W)`` idle over chunks, unit F = I = W."""
    return (p - 1) / (3 * check_int_option("v", v, 1) * m + p - 1)


def peak_activations_formula(p: int, m: int, v: int = DEFAULT_V) -> float:
    """``min((v-1)·r + p, v·m)`` chunk-activations (worker 0's warm-up plus one)."""
    return float(min(warmup(p, m, check_int_option("v", v, 1), 0) + 1, v * m))


SCHEDULE = Schedule(
    name="interleaved_zb",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    option_names={"v": DEFAULT_V},
    description="interleaved zero bubble (ZB-1P with v looped chunks): split backward, W trailing",
)
