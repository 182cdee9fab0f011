"""Validity of a schedule table (docs/contract.md §2).

A valid table contains each operation of each microbatch exactly once, runs at most one
operation per worker per slot (guaranteed by the dense layout; an operation must fill exactly
its number of consecutive cells), places every stage on its worker, and respects every data
dependency. :func:`validate_table` raises :class:`InvalidTableError` naming the first violation
in slot order.
"""

from __future__ import annotations

from ppsweep.tables.ops import Kind, Op, dependencies, expected_ops, halves, is_split
from ppsweep.tables.table import PlacedOp, ScheduleTable


class InvalidTableError(ValueError):
    """A schedule table that breaks a rule of docs/contract.md §2; the message names the violation."""


def validate_table(table: ScheduleTable) -> None:
    """Check every rule of a valid table; raise on the first violation.

    Args:
      table: the table to check.

    Raises:
      InvalidTableError: naming the worker, slot and operation of the first violation.
    """
    _check_shapes(table)
    placed = sorted(table.placed_ops(), key=lambda p: (p.start, p.worker))
    seen: dict[Op, PlacedOp] = {}
    for item in placed:
        where = f"worker {item.worker}, slot {item.start}, operation {item.op}"
        expected_slots = table.slots_of(item.op.kind)
        if item.slots != expected_slots:
            raise InvalidTableError(f"{where}: occupies {item.slots} slots, expected {expected_slots}")
        for op in halves(item.op):
            _check_op(table, item, op, where)
            if op in seen:
                first = seen[op]
                raise InvalidTableError(
                    f"{where}: runs " + (f"{op} " if item.op.kind == Kind.FB else "") + f"a second time (first at worker {first.worker}, slot {first.start})"
                )
        for dep in dependencies(item.op, table.n_stages, table.split_backward):
            producer = seen.get(dep)
            if producer is None or producer.end > item.start:
                ready = "never runs before it" if producer is None else f"ends at slot {producer.end}"
                raise InvalidTableError(f"{where}: starts before its input {dep} ({ready})")
        for op in halves(item.op):
            seen[op] = item
    for op in expected_ops(table.m, table.n_stages, table.split_backward):
        if op not in seen:
            worker = int(table.placement[int(table.micro_replica[op.micro]), op.stage])
            raise InvalidTableError(f"worker {worker}, operation {op}: missing from the table")


def _check_op(table: ScheduleTable, item: PlacedOp, op: Op, where: str) -> None:
    """Kind, range, replica and placement of one operation (a half of a pair is checked alone)."""
    if not (0 <= op.micro < table.m and 0 <= op.stage < table.n_stages):
        raise InvalidTableError(f"{where}: microbatch must be in [0, {table.m}) and stage in [0, {table.n_stages})")
    split = is_split(table.split_backward, op.micro, op.stage)
    allowed = {Kind.F, Kind.I, Kind.W} if split else {Kind.F, Kind.B}
    if op.kind not in allowed:
        names = "/".join(k.name for k in sorted(allowed))
        whose = f"microbatch {op.micro} at stage {op.stage}" if not isinstance(table.split_backward, bool) else "here"
        raise InvalidTableError(f"{where}: kind {op.kind.name} not allowed {whose} (expected {names})")
    replica = int(table.micro_replica[op.micro])
    if item.op.kind != Kind.FB and int(table.replica[item.worker, item.start]) != replica:
        raise InvalidTableError(f"{where}: replica cell must be {replica}, the microbatch's replica")
    home = int(table.placement[replica, op.stage])
    if home != item.worker:
        raise InvalidTableError(f"{where}: stage {op.stage} of replica {replica} belongs to worker {home}")


def _check_shapes(table: ScheduleTable) -> None:
    shape = table.kind.shape
    if len(shape) != 2 or shape[0] != table.p:
        raise InvalidTableError(f"kind must have shape (p={table.p}, T), got {shape}")
    for name in ("micro", "stage", "replica"):
        if getattr(table, name).shape != shape:
            raise InvalidTableError(f"{name} has shape {getattr(table, name).shape}, kind has {shape}")
    codes = {int(k) for k in Kind}
    for w, t in zip(*((table.kind < 0) | (table.kind > max(codes))).nonzero()):
        raise InvalidTableError(f"worker {w}, slot {t}: unknown kind code {table.kind[w, t]}")
