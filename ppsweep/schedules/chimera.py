"""Chimera (Li and Hoefler, SC'21): two model replicas driven in opposite directions.

**Placement.** The model is cut into ``S = p`` stages and kept twice. The *down* pipeline
(replica 0) places stage ``s`` on worker ``s``; the *up* pipeline (replica 1) places it on worker
``p-1-s``. Every worker holds two stages, down stage ``w`` and up stage ``p-1-w``; ``p`` must be
even.

**Microbatches.** The basic unit is ``p`` microbatches, ``p/2`` per direction; ``m`` must be a
multiple of ``p``. Unit ``k`` holds microbatches ``k·p … k·p+p-1``: its first half runs down, its
second half up. ``i ∈ [0, p/2)`` numbers the microbatches of one direction within a unit.

**Order.** Each worker's order is read off the paper's equal-slot diagram (F and B one slot
each). In one unit each direction injects a microbatch every two slots and both start at once:

- forward of microbatch ``i`` at stage ``s``: slot ``2i + s``;
- backward of microbatch ``i`` at stage ``s``: slot ``2i + 2p-1-s`` (microbatch 0's first backward
  follows its last forward directly).

Down stage ``w`` and up stage ``p-1-w`` have opposite parity, so on worker ``w`` the two
directions never ask for the same slot, and within one direction the forwards end before the
backwards begin. Sorted by slot, worker ``w < p/2`` runs (``w >= p/2`` is the mirror image):

- **warm-up**: the down forwards of stage ``w`` (from slot ``w``), joined from slot ``p-1-w`` by
  the up forwards of stage ``p-1-w``;
- **steady state**: the up forwards alternate with the up backwards (from slot ``p+w``: the up
  microbatches reach their last stage, held near worker 0, first);
- **cool-down**: the down backwards of stage ``w`` (from slot ``2p-1-w``), interleaved with the
  last up backwards.

**Several units** (the paper's direct concatenation). Unit ``k`` is drawn ``2p·k`` slots later
(``2p`` is a worker's busy time per unit). Its first forwards then occupy the idle slots at the
end of unit ``k-1`` ("the bubbles at the end of one basic unit are occupied by the forward passes
of the next"), so a worker's order interleaves the cool-down of unit ``k-1`` with the warm-up of
unit ``k``. The diagram lasts ``2m+p-2`` slots, hence the paper's bubble ``(p-2)/(2m+p-2)``,
which the table reproduces exactly when F and B take the same number of slots. With B twice as
long as F the two directions no longer mesh and each unit leaves ``p-2`` more idle slots per
worker (:func:`table_bubble`).

**Stage sizes** (option ``split = "a:b"``, default ``"1:1"``). The two replicas are copies of one
model, so stage ``s`` holds the same layers in both, and each worker should keep ``2/p`` of the
layers (equal compute). Worker ``w`` holds down stage ``w`` and up stage ``p-1-w``: one stage of
the first half ``0 … p/2-1`` and one of the second half. ``split`` divides the worker's share
between them: first-half stages get ``a/(a+b)·2/p``, second-half stages ``b/(a+b)·2/p``. Of a
worker's two stages, the first-half one is nearer its pipeline's start and keeps more activations
in flight (worker 0: ``p/2`` of down stage 0, one of up stage ``p-1``), so ``"1:2"`` gives fewer
layers to the stage that stores more microbatches — the paper's memory-balancing split.
Measured on the table (activations weighted by stage size, B = 2 slots): ``"1:2"`` lowers the edge
workers (worker 0 from ``p/2+1`` to ``(p+4)/3`` stage-activations of ``1/p`` of the model) but not
the bottleneck: workers ``p/2-1`` and ``p/2`` hold ``p/2`` activations of a first-half and ``p/2``
of a second-half stage at once, i.e. ``p`` for any split. No split shared by both replicas lowers
that peak.
"""

from __future__ import annotations

import re

import numpy as np

from ppsweep.ops import Kind, Op
from ppsweep.schedules.base import Schedule, ScheduleOrder

DEFAULT_SPLIT = "1:1"
_SPLIT_PATTERN = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_split(split: str) -> tuple[int, int]:
    """The two positive integers of a ``split`` option.

    Args:
      split: the option value, a string ``"a:b"`` such as ``"1:2"``.

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
      ValueError: a malformed ``split`` (a configuration error rather than an unsupported point).
    """
    parse_split(split)
    if p % 2:
        return f"p must be even for chimera, got {p}"
    if m % p:
        return f"m must be a multiple of p={p} for chimera (units of p microbatches), got {m}"
    return None


def diagram_slot(kind: Kind, unit: int, i: int, stage: int, p: int) -> int:
    """Slot of an operation in the paper's equal-slot diagram.

    Args:
      kind: F or B.
      unit: the unit, ``0 … m/p-1``.
      i: microbatch within its direction and unit, ``0 … p/2-1``.
      stage: stage within the microbatch's replica, ``0 … p-1``.
      p: number of workers (= stages per replica).

    Returns:
      ``2p·unit + 2i + stage`` for F, ``2p·unit + 2i + 2p-1-stage`` for B.
    """
    return 2 * p * unit + 2 * i + (stage if kind == Kind.F else 2 * p - 1 - stage)


def micro_of(unit: int, replica: int, i: int, p: int) -> int:
    """Microbatch number of the ``i``-th microbatch of ``replica`` (0 down, 1 up) in ``unit``."""
    return unit * p + replica * (p // 2) + i


def worker_order(p: int, m: int, w: int) -> tuple[Op, ...]:
    """Worker ``w``'s operations sorted by their slot in the equal-slot diagram."""
    stages = (w, p - 1 - w)  # the down stage and the up stage held by worker w
    timed = [
        (diagram_slot(kind, unit, i, stages[replica], p), Op(kind, micro_of(unit, replica, i, p), stages[replica]))
        for unit in range(m // p)
        for replica in (0, 1)
        for i in range(p // 2)
        for kind in (Kind.F, Kind.B)
    ]
    timed.sort(key=lambda item: item[0])
    return tuple(op for _, op in timed)


def micro_replicas(p: int, m: int) -> np.ndarray:
    """Replica of each microbatch, ``(m,)``: the first half of each unit 0 (down), the rest 1 (up)."""
    return np.array([(j % p) // (p // 2) for j in range(m)], dtype=np.int64)


def stage_fractions(p: int, split: str = DEFAULT_SPLIT) -> np.ndarray:
    """Share of the layers in each stage, ``(p,)``, the same for both replicas.

    Stages ``0 … p/2-1`` get ``a/(a+b)·2/p`` each and stages ``p/2 … p-1`` get ``b/(a+b)·2/p``.
    """
    a, b = parse_split(split)
    half = p // 2
    return np.array([a] * half + [b] * half, dtype=float) * (2.0 / (p * (a + b)))


def build_order(p: int, m: int, split: str = DEFAULT_SPLIT) -> ScheduleOrder:
    """Per-worker orders of Chimera (see the module docstring)."""
    placement = np.array([list(range(p)), list(range(p - 1, -1, -1))], dtype=np.int64)
    return ScheduleOrder(
        name="chimera",
        p=p,
        m=m,
        n_stages=p,
        orders=tuple(worker_order(p, m, w) for w in range(p)),
        placement=placement,
        micro_replica=micro_replicas(p, m),
        stage_fractions=stage_fractions(p, split),
        options={"split": split},
    )


def bubble_formula(p: int, m: int, split: str = DEFAULT_SPLIT) -> float:
    """The paper's ``(p-2)/(2m+p-2)``; the table's bubble exactly when F and B take equal slots."""
    return (p - 2) / (2 * m + p - 2)


def idle_per_worker(p: int, m: int, f_slots: int = 1, b_slots: int = 2) -> int:
    """Idle slots of each worker in the table, in closed form (derived from the ASAP table, checked in tests).

    With ``r = b_slots / f_slots`` an integer and ``k = m/p`` units: ``f·(p-2)·(1 + (r-1)·k)``.
    With F = B (``r = 1``) that is the diagram's fill and drain, ``p-2``; with B twice F every
    unit adds ``p-2`` more, because the two directions' backwards no longer fit in the other
    direction's forward gaps.

    Raises:
      ValueError: where ``b_slots`` is not a multiple of ``f_slots`` (no derived closed form).
    """
    if b_slots % f_slots:
        raise ValueError(f"chimera: no closed form for f_slots={f_slots}, b_slots={b_slots} (b not a multiple of f)")
    r, units = b_slots // f_slots, m // p
    return f_slots * (p - 2) * (1 + (r - 1) * units)


def table_length(p: int, m: int, f_slots: int = 1, b_slots: int = 2) -> int:
    """Length ``T`` of the table: ``m·(f+b)`` busy slots per worker plus :func:`idle_per_worker`.

    For F = B this is ``f·(2m+p-2)``, the paper's diagram; for the default (1, 2) it is
    ``4m + p - 2 - 2m/p`` (``5p-4`` for one unit, ``4p-2`` more per further unit).
    """
    return m * (f_slots + b_slots) + idle_per_worker(p, m, f_slots, b_slots)


def table_bubble(p: int, m: int, f_slots: int = 1, b_slots: int = 2) -> float:
    """Bubble of the table in closed form, ``idle_per_worker / table_length``.

    For F = B it equals the paper's ``(p-2)/(2m+p-2)``; for the default (1, 2) it is
    ``(p-2)(m+p) / ((p-2)(m+p) + 3mp)``, e.g. ``(2p-4)/(5p-4)`` for one unit.
    """
    return idle_per_worker(p, m, f_slots, b_slots) / table_length(p, m, f_slots, b_slots)


def peak_activations_formula(p: int, m: int, split: str = DEFAULT_SPLIT) -> float:
    """``p``: workers ``p/2-1`` and ``p/2`` hold all ``p/2`` down and ``p/2`` up activations of a unit.

    The edge workers hold ``p/2+1`` (the paper's range ``[p/2+1, p]``); the figure does not grow
    with ``m`` because a unit's activations are freed before the next unit's reach the middle.
    It holds for F = B slots and for B = 2·F slots (checked in tests).
    """
    return float(p)


SCHEDULE = Schedule(
    name="chimera",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    option_names={"split": DEFAULT_SPLIT},
    description="Chimera: two model replicas in opposite directions, units of p microbatches",
)
