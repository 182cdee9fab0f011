"""Chimera (Li and Hoefler, SC'21): two model replicas driven in opposite directions.

Placement. The model is cut into ``S = p`` stages and kept twice. The **down** pipeline
(replica 0) places stage ``s`` on worker ``s``; the **up** pipeline (replica 1) places it on
worker ``p-1-s``. Every worker therefore holds two stages: down stage ``w`` and up stage
``p-1-w``. ``p`` must be even.

Microbatches. The basic unit is ``p`` microbatches, ``p/2`` per direction. Unit ``k`` holds
microbatches ``k·p … k·p+p-1``; its first half ``k·p … k·p+p/2-1`` runs down, its second half
up. Within a unit, ``i ∈ [0, p/2)`` numbers the microbatches of one direction.

Order of one unit. It is read off the paper's equal-slot diagram (F and B one slot each), in
which each direction injects one microbatch every two slots and both directions start at once:

- forward of direction-local microbatch ``i`` at stage ``s``: slot ``2i + s``;
- backward of the same: slot ``2i + 2p-1-s`` (the first backward follows the last forward of
  microbatch 0 directly).

On worker ``w`` the down stage ``w`` and the up stage ``p-1-w`` have opposite parity, so the
two directions never ask for the same slot, and forwards and backwards of one parity never
overlap; the worker's order is its operations sorted by that slot. It has three phases:

- **warm-up**: the forwards of both directions interleave (down on one parity, up on the other);
- **steady state**: the backwards of the direction that finishes first interleave with the
  remaining forwards of the other;
- **cool-down**: the remaining backwards.

In that diagram a unit lasts ``3p-2`` slots for ``2p`` operations per worker, hence the paper's
bubble ``(p-2)/(2m+p-2)``. The table realizes the same order as soon as possible with the
requested F and B slots; with B twice as long as F the two directions no longer mesh and the
table leaves more idle (see :func:`table_bubble`).

Several units (``m = k·p``) are concatenated directly: each worker runs unit ``k+1``'s order
after unit ``k``'s (the paper's "direct concatenation"). ``m`` must be a multiple of ``p``.

Stage sizes (option ``split``, ``"a:b"``, default ``"1:1"``). Each worker holds ``2/p`` of the
model's layers, split between its two stages. Stages ``0 … p/2-1`` (the first half of either
replica) get ``a/(a+b)`` of that share, stages ``p/2 … p-1`` get ``b/(a+b)``: both replicas
share one stage-size profile, as the contract requires, and each worker holds one stage of each
half (down ``w`` and up ``p-1-w``), so every worker still holds ``2/p`` of the layers. The
first stages keep the most activations in flight (down stage 0 holds all ``p/2`` down
microbatches, the last stage one), so ``"1:2"`` (small first half, large second half) is the
memory-balancing split the paper uses: it shrinks the activations of the stage that keeps many
of them and grows the one that keeps few.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ppsweep.ops import Kind, Op
from ppsweep.schedules.base import Schedule, ScheduleOrder

DEFAULT_SPLIT = "1:1"
_SPLIT_PATTERN = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_split(split: str) -> tuple[int, int]:
    """The two positive integers of a ``split`` option ``"a:b"``.

    Args:
      split: the option value, e.g. ``"1:2"``.

    Returns:
      ``(a, b)``.

    Raises:
      ValueError: naming ``split`` and what it accepts.
    """
    match = _SPLIT_PATTERN.match(split) if isinstance(split, str) else None
    if match is None or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise ValueError(
            f"split: must be a string 'a:b' of two positive integers (e.g. '1:1' or '1:2'), got {split!r}"
        )
    return int(match.group(1)), int(match.group(2))


def why_unsupported(p: int, m: int, split: str = DEFAULT_SPLIT) -> str | None:
    """None where Chimera runs: ``p`` even and ``m`` a multiple of ``p``.

    Raises:
      ValueError: a malformed ``split`` (a configuration error, not an unsupported point).
    """
    parse_split(split)
    if p % 2:
        return f"p must be even for chimera, got {p}"
    if m % p:
        return f"m must be a multiple of p={p} for chimera (units of p microbatches), got {m}"
    return None


def unit_slot(kind: Kind, i: int, stage: int, p: int) -> int:
    """Slot of an operation in the paper's equal-slot diagram of one unit.

    Args:
      kind: F or B.
      i: direction-local microbatch, ``0 … p/2-1``.
      stage: replica-local stage, ``0 … p-1``.
      p: number of workers (= stages).

    Returns:
      ``2i + stage`` for F, ``2i + 2p-1-stage`` for B.
    """
    return 2 * i + (stage if kind == Kind.F else 2 * p - 1 - stage)


def micro_of(unit: int, replica: int, i: int, p: int) -> int:
    """Global microbatch of direction-local microbatch ``i`` of ``replica`` in ``unit``."""
    return unit * p + replica * (p // 2) + i


def unit_order(p: int, w: int, unit: int) -> list[Op]:
    """Worker ``w``'s operations of one unit, in the order of the equal-slot diagram."""
    stages = (w, p - 1 - w)  # down stage, up stage held by worker w
    timed = [
        (unit_slot(kind, i, stages[replica], p), Op(kind, micro_of(unit, replica, i, p), stages[replica]))
        for replica in (0, 1)
        for i in range(p // 2)
        for kind in (Kind.F, Kind.B)
    ]
    timed.sort(key=lambda item: item[0])
    return [op for _, op in timed]


def worker_order(p: int, m: int, w: int) -> tuple[Op, ...]:
    """Worker ``w``'s order: the units' orders concatenated."""
    return tuple(op for unit in range(m // p) for op in unit_order(p, w, unit))


def stage_fractions(p: int, split: str = DEFAULT_SPLIT) -> np.ndarray:
    """Share of the layers in each stage, ``(p,)``, the same for both replicas.

    Stages ``0 … p/2-1`` get ``a/(a+b) · 2/p`` each, stages ``p/2 … p-1`` get ``b/(a+b) · 2/p``.
    """
    a, b = parse_split(split)
    half = p // 2
    return np.array([a] * half + [b] * half, dtype=float) * (2.0 / (p * (a + b)))


def build_order(p: int, m: int, split: str = DEFAULT_SPLIT) -> ScheduleOrder:
    """Per-worker orders of Chimera (see the module docstring)."""
    replica = np.array([(j % p) // (p // 2) for j in range(m)], dtype=np.int64)
    placement = np.array([list(range(p)), list(range(p - 1, -1, -1))], dtype=np.int64)
    return ScheduleOrder(
        name="chimera",
        p=p,
        m=m,
        n_stages=p,
        orders=tuple(worker_order(p, m, w) for w in range(p)),
        placement=placement,
        micro_replica=replica,
        stage_fractions=stage_fractions(p, split),
        options={"split": split},
    )


def bubble_formula(p: int, m: int, split: str = DEFAULT_SPLIT) -> float:
    """The paper's ``(p-2)/(2m+p-2)``.

    It is the table's bubble exactly when F and B take the same number of slots and ``m = p``
    (a single unit); direct concatenation leaves more idle between units, and B twice as long
    as F leaves more idle inside each unit (see :func:`table_bubble`).
    """
    return (p - 2) / (2 * m + p - 2)


def table_length(p: int, m: int, f_slots: int = 1, b_slots: int = 2) -> int:
    """Closed-form length ``T`` of the table, for ``f_slots=1`` and ``b_slots`` 1 or 2.

    Derived from the ASAP realization of the order (and checked against it in the tests):

    - ``b_slots=1``: one unit lasts ``3p-2``; a further unit adds ``2p+1`` for ``p >= 4``
      (``2p`` for ``p = 2``), because the next unit's first forwards cannot start before the
      previous unit's last backwards on worker 0 and ``p-1``.
    - ``b_slots=2``: one unit lasts ``5p-2`` for ``p >= 4`` (``6`` for ``p = 2``); each further
      unit adds ``3p+2`` for ``p >= 4`` (``3p`` for ``p = 2``).

    Raises:
      ValueError: for slot settings without a derived closed form.
    """
    units = m // p
    if f_slots != 1 or b_slots not in (1, 2):
        raise ValueError(f"no closed form for f_slots={f_slots}, b_slots={b_slots}")
    if b_slots == 1:
        first, more = 3 * p - 2, (2 * p + 1 if p >= 4 else 2 * p)
    else:
        first, more = (5 * p - 2, 3 * p + 2) if p >= 4 else (3 * p, 3 * p)
    return first + (units - 1) * more


def table_bubble(p: int, m: int, f_slots: int = 1, b_slots: int = 2) -> float:
    """Closed-form bubble of the table: ``1 - m·(f_slots+b_slots) / (p·T)`` with
    ``T = table_length(p, m, f_slots, b_slots)``.

    For one unit (``m = p``, ``p >= 4``): ``(p-2)/(3p-2)`` with F = B slots (the paper's
    formula) and ``(2p-2)/(5p-2)`` with B = 2 slots.
    """
    work = m * (f_slots + b_slots) / p  # busy slots per worker (2m/p operations each of F and B)
    return 1.0 - work / table_length(p, m, f_slots, b_slots)


def peak_activations_formula(p: int, m: int, split: str = DEFAULT_SPLIT) -> float:
    """Peak stored microbatch-stage activations on the busiest worker of the default table.

    ``p/2 + 1`` for ``p >= 4`` (``2`` for ``p = 2``), whatever the number of units: the
    activations of one unit are all freed before the next unit's forwards start on a worker.
    Worker ``p/2-1`` (and its mirror ``p/2``) holds all ``p/2`` down activations of its stage
    plus one of its up stage.
    """
    return float(p // 2 + 1) if p >= 4 else 2.0


SCHEDULE = Schedule(
    name="chimera",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    option_names={"split": DEFAULT_SPLIT},
    description="Chimera: two model replicas in opposite directions, units of p microbatches",
)

__all__ = [
    "SCHEDULE",
    "bubble_formula",
    "build_order",
    "parse_split",
    "peak_activations_formula",
    "stage_fractions",
    "table_bubble",
    "table_length",
    "why_unsupported",
]

_ = math  # math kept for readers comparing with the other formula modules
