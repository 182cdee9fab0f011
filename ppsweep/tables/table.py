"""Dense schedule tables: the as-soon-as-possible realization of a per-worker order (docs/contract.md §2).

A :class:`ScheduleTable` holds integer arrays of shape ``(p, T)`` (``kind``, ``micro``, ``stage``,
``replica``), one row per worker and one column per time slot. An operation lasting ``d`` slots
fills ``d`` consecutive cells of its worker's row. Table-level quantities (length, bubble ratio,
peak activations) are computed here from the arrays alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppsweep.tables.op_arrays import activation_profile_fast
from ppsweep.tables.ops import NONE, Kind, Op, SplitBackward, dependencies, frees_activation, halves, op_label
from ppsweep.schedules.base import ScheduleOrder


@dataclass(frozen=True)
class PlacedOp:
    """An operation at its place in the table: worker, first slot and duration in slots."""

    worker: int
    start: int
    slots: int
    op: Op

    @property
    def end(self) -> int:
        """First slot after the operation."""
        return self.start + self.slots


@dataclass(frozen=True, eq=False)
class ScheduleTable:
    """A schedule realized as a dense integer table.

    Attributes:
      name, p, m, n_stages, placement, micro_replica, stage_fractions, split_backward, options:
        as in :class:`ppsweep.schedules.base.ScheduleOrder`.
      kind, micro, stage, replica: int arrays ``(p, T)``; idle cells hold ``Kind.IDLE`` and -1.
        A pair F&B's cells hold kind ``FB`` and its forward half's microbatch, stage and replica.
      f_slots, b_slots: slots taken by F and by B (I and W take ``b_slots // 2`` each, a pair F&B
        ``f_slots + b_slots``).
      pair_micro, pair_stage: int arrays ``(p, T)``: a pair's backward half's microbatch and stage
        in its cells, -1 elsewhere; None (all -1) for tables without pairs.
    """

    name: str
    p: int
    m: int
    n_stages: int
    placement: np.ndarray
    micro_replica: np.ndarray
    stage_fractions: np.ndarray
    kind: np.ndarray
    micro: np.ndarray
    stage: np.ndarray
    replica: np.ndarray
    split_backward: SplitBackward = False
    f_slots: int = 1
    b_slots: int = 2
    options: dict[str, Any] = field(default_factory=dict)
    pair_micro: np.ndarray | None = None
    pair_stage: np.ndarray | None = None

    @property
    def length(self) -> int:
        """``T``, the number of slots."""
        return int(self.kind.shape[1])

    @property
    def n_replicas(self) -> int:
        """Number of model replicas."""
        return int(self.placement.shape[0])

    def slots_of(self, kind: Kind) -> int:
        """Slots an operation of ``kind`` takes in this table."""
        return op_slots(kind, self.f_slots, self.b_slots)

    def placed_ops(self) -> list[PlacedOp]:
        """Every operation with its worker, first slot and length, in (worker, slot) order."""
        placed = []
        for w in range(self.p):
            t = 0
            while t < self.length:
                k = int(self.kind[w, t])
                if k == Kind.IDLE:
                    t += 1
                    continue
                op = Op(Kind(k), int(self.micro[w, t]), int(self.stage[w, t]))
                if k == Kind.FB:
                    op = op._replace(micro2=int(self.pair_micro[w, t]), stage2=int(self.pair_stage[w, t]))
                end = t + 1
                while end < self.length and _same_cell(self, w, end, op):
                    end += 1
                placed.append(PlacedOp(w, t, end - t, op))
                t = end
        return placed

    def orders(self) -> list[list[Op]]:
        """Per-worker operation order read off the table."""
        rows: list[list[Op]] = [[] for _ in range(self.p)]
        for placed in self.placed_ops():
            rows[placed.worker].append(placed.op)
        return rows

    def bubble_ratio(self) -> float:
        """``bubble_table``: idle cells / (p·T)."""
        return float(np.mean(self.kind == Kind.IDLE))

    def activation_profile(self, stage_weights: np.ndarray | None = None) -> np.ndarray:
        """Stored activations of each worker after each slot.

        An F stores one microbatch-stage activation from its first slot; the B (or, where the
        backward is split, the W) of the same microbatch and stage frees it after its last slot.

        Args:
          stage_weights: optional ``(S,)`` weight of one stored activation of each stage (for
            instance its bytes); default 1 (a count).

        Returns:
          Float array ``(p, T)``: the weighted sum of activations held during each slot.
        """
        fast = activation_profile_fast(self, stage_weights)  # array version; None: not handled
        if fast is not None:
            return fast
        weights = np.ones(self.n_stages) if stage_weights is None else np.asarray(stage_weights, float)
        delta = np.zeros((self.p, self.length + 1))
        for placed in self.placed_ops():
            for op in halves(placed.op):  # a pair stores its forward's and frees its backward's
                if op.kind == Kind.F:
                    delta[placed.worker, placed.start] += weights[op.stage]
                elif frees_activation(op):
                    delta[placed.worker, placed.end] -= weights[op.stage]
        return np.cumsum(delta, axis=1)[:, : self.length]

    def peak_activations_per_worker(self, stage_weights: np.ndarray | None = None) -> np.ndarray:
        """Largest number (or weight) of activations each worker holds at once, ``(p,)``."""
        return self.activation_profile(stage_weights).max(axis=1, initial=0.0)

    def peak_activations(self) -> int:
        """``peak_activations``: the maximum over workers of stored microbatch-stage activations."""
        return int(round(self.peak_activations_per_worker().max()))

    def to_xarray(self):
        """The table as an ``xarray.Dataset`` with dimensions ``worker`` × ``slot``."""
        import xarray as xr

        cells = ("worker", "slot")
        return xr.Dataset(
            {
                "kind": (cells, self.kind, {"long_name": "operation kind", "codes": _kind_codes()}),
                "micro": (cells, self.micro, {"long_name": "microbatch (-1 where idle)"}),
                "stage": (cells, self.stage, {"long_name": "model stage (-1 where idle)"}),
                "replica": (cells, self.replica, {"long_name": "model replica (-1 where idle)"}),
                "placement": (
                    ("replica_index", "stage_index"),
                    self.placement,
                    {"long_name": "worker holding each stage of each replica"},
                ),
            },
            coords={"worker": np.arange(self.p), "slot": np.arange(self.length)},
            attrs={
                "schedule": self.name,
                "p": self.p,
                "m": self.m,
                "n_stages": self.n_stages,
                "f_slots": self.f_slots,
                "b_slots": self.b_slots,
                "split_backward": int(bool(self.split_backward)),
            },
        )


def _kind_codes() -> str:
    return ", ".join(f"{int(k)}={k.name}" for k in Kind)


def _same_cell(table: ScheduleTable, w: int, t: int, op: Op) -> bool:
    same = table.kind[w, t] == op.kind and table.micro[w, t] == op.micro and table.stage[w, t] == op.stage
    if same and op.kind == Kind.FB:
        return table.pair_micro[w, t] == op.micro2 and table.pair_stage[w, t] == op.stage2
    return bool(same)


def op_slots(kind: Kind, f_slots: int, b_slots: int) -> int:
    """Slots one operation of ``kind`` takes: F ``f_slots``, B ``b_slots``, I and W half of B, F&B both."""
    if kind == Kind.F:
        return f_slots
    if kind == Kind.B:
        return b_slots
    if kind == Kind.FB:
        return f_slots + b_slots
    return max(1, b_slots // 2)


class OrderDeadlockError(ValueError):
    """A per-worker order that can never run to the end (a cycle through its dependencies)."""


def check_slots(f_slots: int, b_slots: int) -> None:
    """Raise a ValueError naming ``f_slots`` and ``b_slots`` where either is below 1.

    Args:
      f_slots: slots a forward takes. b_slots: slots a full backward takes.
    """
    if f_slots < 1 or b_slots < 1:
        raise ValueError(f"f_slots and b_slots must be >= 1, got f_slots={f_slots}, b_slots={b_slots}")


def realize(order: ScheduleOrder, f_slots: int = 1, b_slots: int = 2) -> ScheduleTable:
    """Realize a per-worker order as an as-soon-as-possible table (docs/contract.md §2).

    Each operation starts in the first slot where its worker is free and every input exists;
    there is no communication cost.

    Args:
      order: the schedule's per-worker order.
      f_slots: slots a forward takes (default 1).
      b_slots: slots a full backward takes (default 2; I and W take half each).

    Returns:
      The dense table.

    Raises:
      ValueError: ``f_slots`` or ``b_slots`` below 1.
      OrderDeadlockError: when no worker can start its next operation.
    """
    check_slots(f_slots, b_slots)
    finished: dict[Op, int] = {}
    free = [0] * order.p
    cursor = [0] * order.p
    placed: list[PlacedOp] = []
    remaining = sum(len(row) for row in order.orders)
    while remaining:
        progressed = False
        for w, row in enumerate(order.orders):
            while cursor[w] < len(row):
                op = row[cursor[w]]
                needs = dependencies(op, order.n_stages, order.split_backward)
                if any(dep not in finished for dep in needs):
                    break
                start = max([free[w]] + [finished[dep] for dep in needs])
                slots = op_slots(op.kind, f_slots, b_slots)
                placed.append(PlacedOp(w, start, slots, op))
                free[w] = start + slots
                for half in halves(op):
                    finished[half] = free[w]
                cursor[w] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            waiting = [
                f"worker {w} waits at {row[cursor[w]]}"
                for w, row in enumerate(order.orders)
                if cursor[w] < len(row)
            ]
            raise OrderDeadlockError(f"schedule {order.name!r} deadlocks: " + "; ".join(waiting))
    return table_from_placed(order, placed, f_slots, b_slots)


def table_from_placed(
    order: ScheduleOrder, placed: list[PlacedOp], f_slots: int, b_slots: int
) -> ScheduleTable:
    """Fill the dense arrays from placed operations (cells of overlapping operations are overwritten)."""
    length = max((p.end for p in placed), default=0)
    shape = (order.p, length)
    kind = np.full(shape, int(Kind.IDLE), dtype=np.int64)
    micro = np.full(shape, NONE, dtype=np.int64)
    stage = np.full(shape, NONE, dtype=np.int64)
    replica = np.full(shape, NONE, dtype=np.int64)
    has_pairs = any(p.op.kind == Kind.FB for p in placed)
    pair_micro = np.full(shape, NONE, dtype=np.int64) if has_pairs else None
    pair_stage = np.full(shape, NONE, dtype=np.int64) if has_pairs else None
    for p in placed:
        cells = (p.worker, slice(p.start, p.end))
        kind[cells] = int(p.op.kind)
        micro[cells] = p.op.micro
        stage[cells] = p.op.stage
        replica[cells] = order.micro_replica[p.op.micro] if 0 <= p.op.micro < order.m else NONE
        if p.op.kind == Kind.FB:
            pair_micro[cells] = p.op.micro2
            pair_stage[cells] = p.op.stage2
    return ScheduleTable(
        name=order.name,
        p=order.p,
        m=order.m,
        n_stages=order.n_stages,
        placement=order.placement,
        micro_replica=order.micro_replica,
        stage_fractions=order.stage_fractions,
        kind=kind,
        micro=micro,
        stage=stage,
        replica=replica,
        split_backward=order.split_backward,
        f_slots=f_slots,
        b_slots=b_slots,
        options=dict(order.options),
        pair_micro=pair_micro,
        pair_stage=pair_stage,
    )


def format_table(table: ScheduleTable, width: int | None = None) -> str:
    """A readable grid of the table: one line per worker, one cell per slot (``F3`` = forward of mb 3).

    Continuation slots of multi-slot operations are shown as ``·``; idle slots as ``.``.
    Stages are shown (``F3s5``) where a worker holds more than one stage.
    """
    show_stage = table.n_stages * table.n_replicas > table.p
    labels = {}
    for placed in table.placed_ops():
        labels[(placed.worker, placed.start)] = op_label(placed.op, show_stage)
    cell = width or max([len(s) for s in labels.values()] + [2])
    lines = []
    for w in range(table.p):
        cells = []
        for t in range(table.length):
            if (w, t) in labels:
                cells.append(labels[(w, t)].ljust(cell))
            elif table.kind[w, t] == Kind.IDLE:
                cells.append(".".ljust(cell))
            else:
                cells.append("·".ljust(cell))
        lines.append(f"w{w:<3d}| " + " ".join(cells).rstrip())
    return "\n".join(lines)
