"""Interleaved 1F1B (Narayanan et al., SC'21; Megatron-LM's virtual pipeline), PyTorch's ``Interleaved1F1B``.

**Placement.** Each worker holds ``v`` model chunks (option ``v``, default 2): the model is cut
into ``S = v·p`` equal stages and chunk ``c`` of worker ``w`` is stage ``c·p + w`` (a microbatch
loops ``v`` times over the workers).

**Rounds.** Microbatches go in rounds of ``r`` (:func:`ppsweep.schedules.phases.rounds_of`:
``max(1, m // p)`` rounds, so ``r = m/rounds >= p`` unless ``m < p``). Megatron asks ``m % p == 0``
(``r = p``); PyTorch relaxes it to ``m`` a multiple of the number of rounds, and so do we.
A worker's forwards go round by round, within a round chunk ``0`` for all ``r`` microbatches,
then chunk ``1``, …; its backwards likewise from chunk ``v-1`` down to ``0``.

**Phases** on worker ``w`` (PyTorch's, which are Megatron's):

- **warm-up**: ``min((v-1)·r + 2(p-1-w), v·m)`` forwards: every chunk but the last for a whole
  round, plus two per hop to the last worker (a forward and a backward must travel there and back);
- **steady state**: one forward, one backward;
- **cool-down**: the remaining backwards.

**Operating range**: ``p >= 2``, ``m >= 1`` with ``m % max(1, m // p) == 0``, ``v >= 1``
(``v = 1`` is 1F1B).

**Formulas.** Megatron's bubble ``(p-1)/(v·m + p-1)``: the fill and drain of ``p-1`` chunk-steps of
``1/v`` of a stage each, against ``m`` microbatches of a whole stage. Peak activations, in
chunk-activations (``1/(v·p)`` of the model each): worker 0's warm-up plus the steady state's first
forward, ``min((v-1)·r + 2(p-1) + 1, v·m)`` (:func:`peak_activations_formula`). Where each is
exact on the table is stated in ``tests/test_modern_schedules.py`` and the README.

:func:`worker_order` says the phases one operation at a time (the reference); :func:`order_arrays`
computes every worker's at once with numpy (what :func:`build_order` returns; tested equal).
"""

from __future__ import annotations

import numpy as np

from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder, one_replica_layout
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
    """None where interleaved 1F1B runs: ``m`` a multiple of its number of rounds ``max(1, m // p)``.

    Raises:
      ValueError: a malformed ``v`` (a configuration error, not an unsupported point).
    """
    check_int_option("v", v, 1)
    rounds, _ = rounds_of(p, m)
    if m % rounds:
        return f"m must be a multiple of its number of rounds max(1, m // p) = {rounds} (PyTorch's rule), got {m}"
    return None


def warmup(p: int, m: int, v: int, w: int) -> int:
    """Forwards worker ``w`` runs before its first backward."""
    _, r = rounds_of(p, m)
    return min((v - 1) * r + 2 * (p - 1 - w), v * m)


def worker_order(p: int, m: int, v: int, w: int) -> list[Op]:
    """Worker ``w``'s order: warm-up, one forward one backward, cool-down."""
    forwards = [Op(Kind.F, j, s) for s, j in round_robin(p, m, v, w, backward=False)]
    backwards = [Op(Kind.B, j, s) for s, j in round_robin(p, m, v, w, backward=True)]
    return one_f_one_b(forwards, backwards, warmup(p, m, v, w))


def order_arrays(p: int, m: int, v: int) -> OrderArrays:
    """:func:`worker_order` of every worker at once: the same phases, as arrays."""
    f_stage, f_micro = round_robin_arrays(p, m, v, backward=False)
    b_stage, b_micro = round_robin_arrays(p, m, v, backward=True)
    positions = one_f_one_b_positions(v * m, np.array([warmup(p, m, v, w) for w in range(p)]))
    kind = np.array([int(Kind.F), int(Kind.B)])[None, :, None]
    return OrderArrays.from_grid(*place(positions, kind, np.stack([f_micro, b_micro])[None], np.stack([f_stage, b_stage], axis=1)))


def build_order(p: int, m: int, v: int = DEFAULT_V) -> ScheduleOrder:
    """Per-worker orders of interleaved 1F1B with ``v`` chunks per worker (:func:`order_arrays`)."""
    v = check_int_option("v", v, 1)
    orders = order_arrays(p, m, v)
    layout = one_replica_layout(p, m, v * p, looped_placement(p, v))
    return ScheduleOrder("interleaved_1f1b", p, m, v * p, orders, options={"v": v}, **layout)


def bubble_formula(p: int, m: int, v: int = DEFAULT_V) -> float:
    """``(p-1)/(v·m + p-1)`` (Megatron-LM's virtual-pipeline bubble)."""
    return (p - 1) / (check_int_option("v", v, 1) * m + p - 1)


def peak_activations_formula(p: int, m: int, v: int = DEFAULT_V) -> float:
    """``min((v-1)·r + 2(p-1) + 1, v·m)`` chunk-activations on worker 0 (``r`` microbatches per round)."""
    return float(min(warmup(p, m, check_int_option("v", v, 1), 0) + 1, v * m))


SCHEDULE = Schedule(
    name="interleaved_1f1b",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    option_names={"v": DEFAULT_V},
    description="interleaved 1F1B (Megatron virtual pipeline): v looped chunks per worker",
)
