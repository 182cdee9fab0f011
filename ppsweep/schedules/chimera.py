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

**More microbatches than workers** (option ``concat``, the paper's section on scaling to more
micro-batches). With ``m > p`` the units are joined in one of three ways:

- ``direct`` (default): the direct concatenation above. With B twice F it leaves ``p-2`` idle
  slots per worker per unit (the paper's "intermediate bubbles").
- ``forward_doubling``: two microbatches of one direction run their forwards together, so that a
  forward takes as long as a backward and the two directions mesh again. In the table a doubled
  forward is **two forward cells back to back** on one worker (``F(j, s)`` then ``F(j', s)``; the
  engine, the reference simulator and the activation figures need nothing new: each cell stores
  its microbatch's activation and sends its own message when it ends). The price is the paper's:
  twice the activations of ``direct`` (``2p`` per worker instead of ``p``).
- ``backward_halving``: the same schedule with each microbatch's backward halved instead: the
  microbatch's forward runs once and its backward in two halves of half the samples each. In the
  table microbatch ``i`` is two *half-microbatches* ``2i`` and ``2i+1`` (``2m`` in all, the cost
  model's size ``G/(2m)`` each); their two forward cells back to back are microbatch ``i``'s
  forward, their two backwards its halved backward. Activations stay those of ``direct``
  (``2p`` half-microbatches = ``p`` microbatches). In this cost model (linear in the microbatch
  size) ``backward_halving`` at ``m`` is ``forward_doubling`` at ``2m``, up to the numbering.

Both doubling schedules follow one rule (:func:`doubled_orders`), run in *cells* of one
backward each (a doubled forward is one cell):

- **warm-up**: a worker runs the next doubled forward of either direction as soon as its input
  has arrived, the older pair first;
- **steady state**: a backward whose inputs have arrived always goes first (the oldest); a
  doubled forward only runs when no backward is ready and the worker then holds at most ``2p``
  activations (the memory of two units, the cost the paper names);
- **cool-down**: the remaining backwards.

The rule is a greedy list schedule written from the paper's description, not a closed-form
diagram. :func:`bubble_formula` gives the paper's idealization (a forward cell as long as a
backward cell: the ``F = B`` diagram's ``p-2`` idle cells of two slots per worker and no
intermediate bubble). Measured on the tables (F 1 slot, B 2; tests/test_chimera_concat.py): equal
for ``p <= 6`` (``forward_doubling`` from ``m = 4p``); ``2p`` idle slots per worker instead of
``2(p-2)`` at ``p`` = 8, 16 from ``m = 8p``; below that it differs either way (``p=4, m=8``
forward doubling: 11.1 % against the formula's 14.3 %, because two F cells back to back pipeline
finer than one doubled cell).
"""

from __future__ import annotations

import re

import numpy as np

from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder

DEFAULT_SPLIT = "1:1"
DEFAULT_CONCAT = "direct"
#: Accepted values of the option ``concat``: how units are joined when ``m > p``.
CONCAT_METHODS = ("direct", "forward_doubling", "backward_halving")
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


def check_concat(concat: str) -> str:
    """``concat`` if it is one of :data:`CONCAT_METHODS`.

    Raises:
      ValueError: naming ``concat`` and the accepted values.
    """
    if concat not in CONCAT_METHODS:
        raise ValueError(f"concat: must be one of {', '.join(CONCAT_METHODS)}, got {concat!r}")
    return concat


def why_unsupported(p: int, m: int, split: str = DEFAULT_SPLIT, concat: str = DEFAULT_CONCAT) -> str | None:
    """None where Chimera runs: ``p`` even and ``m`` a multiple of ``p``; the doubling methods join
    units, so they need ``m >= 2p``; ``forward_doubling`` also ``m`` a multiple of 4 (each
    direction pairs its ``m/2`` microbatches).

    Raises:
      ValueError: a malformed ``split`` or ``concat`` (a configuration error rather than an
        unsupported point).
    """
    parse_split(split)
    check_concat(concat)
    if p % 2:
        return f"p must be even for chimera, got {p}"
    if m % p:
        return f"m must be a multiple of p={p} for chimera (units of p microbatches), got {m}"
    if concat != "direct" and m < 2 * p:
        return f"m must be at least 2p={2 * p} for chimera@concat={concat} (it joins units; one unit is direct), got {m}"
    if concat == "forward_doubling" and m % 4:
        return f"m must be a multiple of 4 for chimera@concat=forward_doubling (pairs of microbatches per direction), got {m}"
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


def direct_orders(p: int, m: int) -> OrderArrays:
    """:func:`worker_order` of every worker at once, as arrays: each worker's operations of every
    unit, replica, microbatch and kind, sorted (stably) by their slot in the equal-slot diagram."""
    unit, replica, i, forward = np.meshgrid(np.arange(m // p), [0, 1], np.arange(p // 2), [True, False], indexing="ij")
    w = np.arange(p)[:, None]
    stage = np.where(replica.reshape(1, -1) == 0, w, p - 1 - w)  # (p, operations per worker)
    slot = 2 * p * unit.reshape(1, -1) + 2 * i.reshape(1, -1) + np.where(forward.reshape(1, -1), stage, 2 * p - 1 - stage)
    order = np.argsort(slot, axis=1, kind="stable")
    micro = np.broadcast_to((unit * p + replica * (p // 2) + i).reshape(1, -1), stage.shape)
    kind = np.broadcast_to(np.where(forward, int(Kind.F), int(Kind.B)).reshape(1, -1), stage.shape)
    take = lambda a: np.take_along_axis(a, order, axis=1)  # noqa: E731
    return OrderArrays.from_grid(take(kind), take(micro), take(stage))


def micro_replicas(p: int, m: int) -> np.ndarray:
    """Replica of each microbatch, ``(m,)``: the first half of each unit 0 (down), the rest 1 (up)."""
    return np.array([(j % p) // (p // 2) for j in range(m)], dtype=np.int64)


def direction_pairs(replicas: np.ndarray) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The doubled forwards of each direction: its microbatches in order, two at a time.

    Args:
      replicas: replica (0 down, 1 up) of every microbatch of the table.

    Returns:
      ``(down pairs, up pairs)``.
    """
    by_direction = [[int(j) for j in np.flatnonzero(replicas == r)] for r in (0, 1)]
    return tuple([tuple(d[k : k + 2]) for k in range(0, len(d), 2)] for d in by_direction)  # type: ignore[return-value]


def doubled_orders(p: int, pairs: tuple[list[tuple[int, int]], list[tuple[int, int]]]) -> tuple[tuple[Op, ...], ...]:
    """Per-worker orders of the doubling schedules (module docstring: warm-up, steady state, cool-down).

    Time runs in cells of one backward; a doubled forward (two forward cells back to back in the
    table) is one cell. In every cell each worker takes, in this order of preference:

    1. the oldest backward of either of its two stages whose inputs exist (the next stage's
       backward of the same microbatch, and its own forward); age is the place of the microbatch
       in its direction, ties go down first;
    2. the next doubled forward of a direction whose input exists (the previous stage's doubled
       forward), the older pair first (down on ties), provided the worker then holds at most
       ``2p`` activations;
    3. nothing (an idle cell).

    Args:
      p: workers (= stages per replica; down stage ``w`` and up stage ``p-1-w`` on worker ``w``).
      pairs: the doubled forwards of the down and of the up direction (:func:`direction_pairs`).

    Returns:
      ``orders[w]``, worker ``w``'s operations.
    """
    stage_of = lambda w, r: w if r == 0 else p - 1 - w  # noqa: E731
    cap = 2 * p
    age = {j: k for d in pairs for k, j in enumerate(j for pair in d for j in pair)}  # place in its direction
    finished: dict[Op, int] = {}  # operation -> the cell after it
    orders: list[list[Op]] = [[] for _ in range(p)]
    next_pair = [[0, 0] for _ in range(p)]
    held: list[list[list[int]]] = [[[], []] for _ in range(p)]  # per worker and direction, in forward order
    remaining = sum(len(pair) for d in pairs for pair in d) * 2 * p  # F and B of every microbatch at every stage
    ready = lambda op, cell: finished.get(op, cell + 1) <= cell  # noqa: E731
    cell = 0
    while remaining:
        if cell > max(finished.values(), default=0):  # nothing ran in the last cell and nothing will
            raise RuntimeError(f"chimera: the doubling rule deadlocks at p={p} (a bug)")
        for w in range(p):
            backward = min(
                (
                    (age[j], r, j)
                    for r in (0, 1)
                    for j in held[w][r]
                    if ready(Op(Kind.F, j, stage_of(w, r)), cell)
                    and (stage_of(w, r) == p - 1 or ready(Op(Kind.B, j, stage_of(w, r) + 1), cell))
                ),
                default=None,
            )
            if backward is not None:
                _, r, j = backward
                op = Op(Kind.B, j, stage_of(w, r))
                held[w][r].remove(j)
                run = [op]
            else:
                forwards = []
                for r in (0, 1):
                    k, s = next_pair[w][r], stage_of(w, r)
                    if k == len(pairs[r]) or len(held[w][0]) + len(held[w][1]) + len(pairs[r][k]) > cap:
                        continue
                    if s == 0 or all(ready(Op(Kind.F, j, s - 1), cell) for j in pairs[r][k]):
                        forwards.append((k, r))
                if not forwards:
                    continue
                _, r = min(forwards)
                run = [Op(Kind.F, j, stage_of(w, r)) for j in pairs[r][next_pair[w][r]]]
                held[w][r] += [op.micro for op in run]
                next_pair[w][r] += 1
            orders[w] += run
            for op in run:
                finished[op] = cell + 1
            remaining -= len(run)
        cell += 1
    return tuple(tuple(row) for row in orders)


def stage_fractions(p: int, split: str = DEFAULT_SPLIT) -> np.ndarray:
    """Share of the layers in each stage, ``(p,)``, the same for both replicas.

    Stages ``0 … p/2-1`` get ``a/(a+b)·2/p`` each and stages ``p/2 … p-1`` get ``b/(a+b)·2/p``.
    """
    a, b = parse_split(split)
    half = p // 2
    return np.array([a] * half + [b] * half, dtype=float) * (2.0 / (p * (a + b)))


def half_microbatch_replicas(p: int, m: int) -> np.ndarray:
    """Replica of each of the ``2m`` half-microbatches of ``backward_halving``: that of microbatch ``i // 2``."""
    return np.repeat(micro_replicas(p, m), 2)


def build_order(p: int, m: int, split: str = DEFAULT_SPLIT, concat: str = DEFAULT_CONCAT) -> ScheduleOrder:
    """Per-worker orders of Chimera (see the module docstring).

    With ``concat="backward_halving"`` the order runs ``2m`` half-microbatches (``2i`` and
    ``2i+1`` are the halves of microbatch ``i``).
    """
    check_concat(concat)
    placement = np.array([list(range(p)), list(range(p - 1, -1, -1))], dtype=np.int64)
    if concat == "direct":
        n_micro, replicas = m, micro_replicas(p, m)
        orders = direct_orders(p, m)
    else:
        n_micro = m if concat == "forward_doubling" else 2 * m
        replicas = micro_replicas(p, m) if concat == "forward_doubling" else half_microbatch_replicas(p, m)
        orders = doubled_orders(p, direction_pairs(replicas))
    return ScheduleOrder(
        name="chimera",
        p=p,
        m=n_micro,
        n_stages=p,
        orders=orders,
        placement=placement,
        micro_replica=replicas,
        stage_fractions=stage_fractions(p, split),
        options={"split": split, "concat": concat},
    )


def bubble_formula(p: int, m: int, split: str = DEFAULT_SPLIT, concat: str = DEFAULT_CONCAT) -> float:
    """Closed-form bubble: the paper's diagram, one forward cell as long as one backward cell.

    - ``direct``: ``(p-2)/(2m+p-2)``, the table's bubble exactly when F and B take equal slots;
    - ``forward_doubling``: ``m/2`` doubled forwards and ``m`` backwards per worker, ``p-2`` idle
      cells: ``(p-2)/(3m/2+p-2)`` (no intermediate bubble, the paper's aim);
    - ``backward_halving``: ``m`` forwards and ``2m`` half backwards: ``(p-2)/(3m+p-2)``.

    The doubling schedules' tables idle more than this for ``p >= 4`` (module docstring).
    """
    busy = {"direct": 2 * m, "forward_doubling": 1.5 * m, "backward_halving": 3 * m}[check_concat(concat)]
    return (p - 2) / (busy + p - 2)


def idle_per_worker(p: int, m: int, f_slots: int = 1, b_slots: int = 2) -> int:
    """Idle slots of each worker in the ``direct`` table, in closed form (derived from the ASAP table, checked in tests).

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
    """Length ``T`` of the ``direct`` table: ``m·(f+b)`` busy slots per worker plus :func:`idle_per_worker`.

    For F = B this is ``f·(2m+p-2)``, the paper's diagram; for the default (1, 2) it is
    ``4m + p - 2 - 2m/p`` (``5p-4`` for one unit, ``4p-2`` more per further unit).
    """
    return m * (f_slots + b_slots) + idle_per_worker(p, m, f_slots, b_slots)


def table_bubble(p: int, m: int, f_slots: int = 1, b_slots: int = 2) -> float:
    """Bubble of the ``direct`` table in closed form, ``idle_per_worker / table_length``.

    For F = B it equals the paper's ``(p-2)/(2m+p-2)``; for the default (1, 2) it is
    ``(p-2)(m+p) / ((p-2)(m+p) + 3mp)``, e.g. ``(2p-4)/(5p-4)`` for one unit.
    """
    return idle_per_worker(p, m, f_slots, b_slots) / table_length(p, m, f_slots, b_slots)


def peak_activations_formula(p: int, m: int, split: str = DEFAULT_SPLIT, concat: str = DEFAULT_CONCAT) -> float:
    """Peak stored activations of the busiest worker, in the table's own microbatches.

    - ``direct``: ``p``: workers ``p/2-1`` and ``p/2`` hold all ``p/2`` down and ``p/2`` up
      activations of a unit. The edge workers hold ``p/2+1`` (the paper's range ``[p/2+1, p]``); the
      figure does not grow with ``m`` because a unit's activations are freed before the next
      unit's reach the middle. It holds for F = B slots and for B = 2·F slots (checked in tests).
    - ``forward_doubling``: ``2p``, the doubling rule's cap (twice ``direct``, the paper's cost),
      reached everywhere in its range (``m >= 2p``; tested).
    - ``backward_halving``: ``2p`` half-microbatches, i.e. ``p`` microbatches' bytes, as ``direct``.
    """
    return float(p if check_concat(concat) == "direct" else 2 * p)


SCHEDULE = Schedule(
    name="chimera",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    option_names={"split": DEFAULT_SPLIT, "concat": DEFAULT_CONCAT},
    description="Chimera: two model replicas in opposite directions, units of p microbatches "
    "(concat: direct, forward_doubling, backward_halving)",
)
