"""Array versions of the per-operation Python in building a table (SPEC section 2).

:func:`ppsweep.table.realize`, :func:`ppsweep.validate.validate_table` and
:meth:`ppsweep.table.ScheduleTable.activation_profile` are the reference implementations: they
walk the operations one at a time in Python (about 20 µs per operation). The functions here
compute the same results with numpy over all operations at once, and hand anything they do not
handle (operation kinds other than F, B, I and W, malformed orders or tables) back to the
reference, so that every result, error included, is the reference's:

- :func:`realize_fast`: the as-soon-as-possible table of an order. Every operation's start is
  ``max(end of its worker's previous operation, end of each input)``, a longest path through the
  order's dependency graph, so it does not depend on the order in which operations are visited.
  Each step visits every worker's next operation at once and places those whose inputs are placed.
- :func:`table_ops`: the operations of a dense table as arrays (what ``placed_ops`` lists).
- :func:`validate_fast`: the table's validity, checked on those arrays; a table that fails any
  rule goes to :func:`~ppsweep.validate.validate_table`, which names the first violation.
- :func:`activation_profile_fast`: stored activations per worker and slot.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass

import numpy as np

from ppsweep.ops import NONE, Kind
from ppsweep.schedules.base import ScheduleOrder
from ppsweep.table import ScheduleTable, realize, table_from_placed

#: The kinds the array paths handle; tables or orders with any other kind use the reference.
FAST_KINDS = (Kind.F, Kind.B, Kind.I, Kind.W)


@dataclass(frozen=True)
class OpArrays:
    """Operations as parallel int64 arrays (one entry per operation).

    Attributes:
      worker, start, slots, kind, micro, stage: where each operation runs, its first slot and
        length in slots, and the operation itself.
    """

    worker: np.ndarray
    start: np.ndarray
    slots: np.ndarray
    kind: np.ndarray
    micro: np.ndarray
    stage: np.ndarray

    @property
    def end(self) -> np.ndarray:
        """First slot after each operation."""
        return self.start + self.slots

    def __len__(self) -> int:
        return int(self.kind.shape[0])


def kind_slots(kind: np.ndarray, f_slots: int, b_slots: int) -> np.ndarray:
    """Slots of each operation of ``kind`` (array version of :func:`ppsweep.table.op_slots`)."""
    per_kind = np.zeros(max(int(k) for k in Kind) + 1, dtype=np.int64)
    per_kind[Kind.F], per_kind[Kind.B] = f_slots, b_slots
    per_kind[Kind.I] = per_kind[Kind.W] = max(1, b_slots // 2)
    return per_kind[kind]


def op_index(kind: np.ndarray, micro: np.ndarray, stage: np.ndarray, m: int, n_stages: int) -> np.ndarray:
    """A dense id of each operation, ``(kind - 1, micro, stage)`` in row-major order.

    Valid only for kinds in :data:`FAST_KINDS`, ``micro`` in ``[0, m)`` and ``stage`` in ``[0, S)``.
    """
    return ((kind - 1) * m + micro) * n_stages + stage


def dependency_ids(
    kind: np.ndarray, micro: np.ndarray, stage: np.ndarray, m: int, n_stages: int, split_backward: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Ids (:func:`op_index`) of the two inputs of each operation, -1 where there is none.

    The same rules, and the same order, as :func:`ppsweep.ops.dependencies`: the upstream input
    first, then (for B and I below the last stage) the same-stage forward.
    """
    grad = int(Kind.I if split_backward else Kind.B)
    last = stage == n_stages - 1
    is_f = kind == Kind.F
    is_bwd = (kind == Kind.B) | (kind == Kind.I)
    is_w = kind == Kind.W
    f_ids = op_index(np.full_like(kind, int(Kind.F)), micro, stage, m, n_stages)
    first = np.full(kind.shape, -1, dtype=np.int64)
    second = np.full(kind.shape, -1, dtype=np.int64)
    has_up = is_f & (stage > 0)
    first[has_up] = f_ids[has_up] - 1  # F(j, s-1)
    bwd_last = is_bwd & last
    first[bwd_last] = f_ids[bwd_last]  # F(j, S-1)
    bwd_mid = is_bwd & ~last
    first[bwd_mid] = op_index(np.full_like(kind, grad), micro, stage + 1, m, n_stages)[bwd_mid]
    second[bwd_mid] = f_ids[bwd_mid]  # F(j, s)
    first[is_w] = op_index(np.full_like(kind, int(Kind.I)), micro, stage, m, n_stages)[is_w]
    return first, second


def _order_arrays(order: ScheduleOrder) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(worker, kind, micro, stage) of every operation of ``order``, worker by worker."""
    lengths = np.array([len(row) for row in order.orders], dtype=np.int64)
    n = int(lengths.sum())
    first = next((row[0] for row in order.orders if row), ())
    width = len(first)  # fields per operation (kind, micro, stage, and any more the Op type has)
    flat = np.fromiter(
        itertools.chain.from_iterable(itertools.chain.from_iterable(order.orders)), dtype=np.int64, count=width * n
    ).reshape(n, width)
    worker = np.repeat(np.arange(order.p, dtype=np.int64), lengths)
    return worker, flat[:, 0].copy(), flat[:, 1].copy(), flat[:, 2].copy()


def _plain_split(split_backward: object) -> bool:
    """True where the backward is split for every operation or for none (what the array paths handle)."""
    return isinstance(split_backward, (bool, np.bool_))


def _well_formed(kind: np.ndarray, micro: np.ndarray, stage: np.ndarray, m: int, n_stages: int) -> bool:
    """Known kinds, micro and stage in range: the conditions under which :func:`op_index` is defined."""
    return bool(
        np.isin(kind, np.array([int(k) for k in FAST_KINDS])).all()
        and (micro >= 0).all() and (micro < m).all()
        and (stage >= 0).all() and (stage < n_stages).all()
    )


def realize_fast(order: ScheduleOrder, f_slots: int = 1, b_slots: int = 2) -> ScheduleTable:
    """:func:`ppsweep.table.realize` with array code; the same table to the bit.

    Orders the array code does not handle (other kinds, operations out of range or repeated, an
    input that is not in the order, a deadlock) are realized by the reference, which raises its
    own error where the order cannot run.

    Args:
      order: the schedule's per-worker order.
      f_slots: slots a forward takes (default 1).
      b_slots: slots a full backward takes (default 2; I and W take half each).

    Returns:
      The dense table.

    Raises:
      OrderDeadlockError: when no worker can start its next operation (from the reference).
    """
    if f_slots < 1 or b_slots < 1:
        return realize(order, f_slots, b_slots)  # the reference names the bad field
    if not _plain_split(order.split_backward):
        return realize(order, f_slots, b_slots)
    worker, kind, micro, stage = _order_arrays(order)
    m, n_stages, n = order.m, order.n_stages, len(kind)
    if n == 0 or not _well_formed(kind, micro, stage, m, n_stages):
        return realize(order, f_slots, b_slots)
    ids = op_index(kind, micro, stage, m, n_stages)
    position = np.full(4 * m * n_stages + 1, -1, dtype=np.int64)  # id -> index into the order
    position[ids] = np.arange(n)
    if np.count_nonzero(position[:-1] >= 0) != n:  # an operation listed twice
        return realize(order, f_slots, b_slots)
    first, second = dependency_ids(kind, micro, stage, m, n_stages, order.split_backward)
    # An input's index into the order; n (a sentinel that is always placed at time 0) where there is none.
    dep = np.stack([first, second])
    dep_pos = np.where(dep >= 0, position[np.where(dep >= 0, dep, -1)], n)
    if (dep_pos < 0).any():  # an input missing from the order: the reference reports the deadlock
        return realize(order, f_slots, b_slots)
    slots = kind_slots(kind, f_slots, b_slots)
    start = _asap_starts(order, dep_pos, slots)
    if start is None:
        return realize(order, f_slots, b_slots)
    table = _table(order, worker, start, slots, kind, micro, stage, f_slots, b_slots)
    # What table_ops would read back off the dense arrays: worker by worker, in slot order (each
    # worker's operations start in increasing slots, none repeated, so no two runs merge).
    _OPS[table] = OpArrays(worker=worker, start=start, slots=slots, kind=kind, micro=micro, stage=stage)
    return table


def _asap_starts(order: ScheduleOrder, dep_pos: np.ndarray, slots: np.ndarray) -> np.ndarray | None:
    """First slot of every operation (index into the order), or None on a deadlock.

    Each step looks at every worker's next operation and places those whose inputs are all
    placed, at ``max(worker free, inputs' ends)``.
    """
    lengths = np.array([len(row) for row in order.orders], dtype=np.int64)
    n = int(lengths.sum())
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    end = np.full(n + 1, -1, dtype=np.int64)  # -1: not placed yet; end[n] = 0 for "no input"
    end[n] = 0
    start = np.zeros(n, dtype=np.int64)
    free = np.zeros(order.p, dtype=np.int64)
    cursor = offsets.copy()
    stop = offsets + lengths
    first, second = dep_pos[0], dep_pos[1]
    workers = np.flatnonzero(cursor < stop)
    while workers.size:
        current = cursor[workers]
        e1 = end[first[current]]
        e2 = end[second[current]]
        ready = (e1 >= 0) & (e2 >= 0)
        if not ready.any():
            return None
        if not ready.all():
            workers, current, e1, e2 = workers[ready], current[ready], e1[ready], e2[ready]
        begin = np.maximum(np.maximum(free[workers], e1), e2)
        start[current] = begin
        finish = begin + slots[current]
        end[current] = finish
        free[workers] = finish
        cursor[workers] = current + 1
        workers = np.flatnonzero(cursor < stop)
    return start


def _table(
    order: ScheduleOrder,
    worker: np.ndarray,
    start: np.ndarray,
    slots: np.ndarray,
    kind: np.ndarray,
    micro: np.ndarray,
    stage: np.ndarray,
    f_slots: int,
    b_slots: int,
) -> ScheduleTable:
    """The dense table of placed operations (as :func:`ppsweep.table.table_from_placed` fills it)."""
    length = int((start + slots).max())
    shape = (order.p, length)
    rows = np.repeat(worker, slots)
    firsts = np.repeat(start, slots)
    cols = firsts + (np.arange(len(rows)) - np.repeat(np.cumsum(slots) - slots, slots))
    table = table_from_placed(order, [], f_slots, b_slots)  # the metadata; arrays replaced below
    arrays = {}
    for name, fill, values in (
        ("kind", int(Kind.IDLE), kind),
        ("micro", NONE, micro),
        ("stage", NONE, stage),
        ("replica", NONE, np.asarray(order.micro_replica, dtype=np.int64)[micro]),
    ):
        cells = np.full(shape, fill, dtype=np.int64)
        cells[rows, cols] = np.repeat(values, slots)
        arrays[name] = cells
    return _with_arrays(table, arrays)


def _with_arrays(table: ScheduleTable, arrays: dict[str, np.ndarray]) -> ScheduleTable:
    import dataclasses

    return dataclasses.replace(table, **arrays)


# ---------------------------------------------------------------------------------------------
# reading a dense table


def table_ops(table: ScheduleTable) -> OpArrays | None:
    """The operations of ``table`` in (worker, slot) order, as :meth:`ScheduleTable.placed_ops` finds them.

    An operation is a maximal run of consecutive cells of a row holding the same
    ``(kind, micro, stage)``. Returns None where a cell holds a kind outside
    :data:`FAST_KINDS` and IDLE (the reference handles those).
    """
    known = _OPS.get(table)
    if known is not None:
        return known
    ops = _read_ops(table)
    if ops is not None:
        _OPS[table] = ops
    return ops


#: Operation arrays of tables already read (or realized here), held as long as the table lives.
_OPS: "weakref.WeakKeyDictionary[ScheduleTable, OpArrays]" = weakref.WeakKeyDictionary()


def _read_ops(table: ScheduleTable) -> OpArrays | None:
    kind, micro, stage = table.kind, table.micro, table.stage
    if kind.ndim != 2 or micro.shape != kind.shape or stage.shape != kind.shape:
        return None
    codes = np.array([int(Kind.IDLE)] + [int(k) for k in FAST_KINDS])
    if not np.isin(kind, codes).all():
        return None
    busy = kind != Kind.IDLE
    same_as_previous = np.zeros(kind.shape, dtype=bool)
    same_as_previous[:, 1:] = (
        (kind[:, 1:] == kind[:, :-1]) & (micro[:, 1:] == micro[:, :-1]) & (stage[:, 1:] == stage[:, :-1])
    )
    begins = busy & ~same_as_previous
    w, t = np.nonzero(begins)  # row-major: worker, then slot
    # A run ends where the next run (or an idle cell, or the row's end) begins.
    boundary = ~same_as_previous
    boundary = np.concatenate([boundary[:, 1:], np.ones((kind.shape[0], 1), dtype=bool)], axis=1)
    bw, bt = np.nonzero(boundary)  # last cell of each run (busy or idle), row-major
    flat_last = bw * kind.shape[1] + bt
    flat_begin = w * kind.shape[1] + t
    last = flat_last[np.searchsorted(flat_last, flat_begin)]
    return OpArrays(
        worker=w.astype(np.int64),
        start=t.astype(np.int64),
        slots=(last - flat_begin + 1).astype(np.int64),
        kind=kind[w, t].astype(np.int64),
        micro=micro[w, t].astype(np.int64),
        stage=stage[w, t].astype(np.int64),
    )


def validate_fast(table: ScheduleTable) -> None:
    """:func:`ppsweep.validate.validate_table` with array code: the same tables accepted, the same errors.

    The rules are checked over all operations at once; a table that breaks any of them (or that
    the arrays cannot read) is passed to the reference, which raises naming the first violation.

    Args:
      table: the table to check.

    Raises:
      InvalidTableError: naming the worker, slot and operation of the first violation.
    """
    if not _valid(table):
        from ppsweep.validate import validate_table

        validate_table(table)


def _valid(table: ScheduleTable) -> bool:
    """True when ``table`` passes every rule of :func:`ppsweep.validate.validate_table`."""
    ops = table_ops(table)
    if ops is None or table.kind.shape[0] != table.p or table.replica.shape != table.kind.shape:
        return False
    if not _plain_split(table.split_backward):
        return False
    m, n_stages = table.m, table.n_stages
    allowed = (Kind.F, Kind.I, Kind.W) if table.split_backward else (Kind.F, Kind.B)
    n_expected = len(allowed) * m * n_stages
    if len(ops) != n_expected or not np.isin(ops.kind, np.array([int(k) for k in allowed])).all():
        return False
    if not _well_formed(ops.kind, ops.micro, ops.stage, m, n_stages):
        return False
    if not (ops.slots == kind_slots(ops.kind, table.f_slots, table.b_slots)).all():
        return False
    replica = np.asarray(table.micro_replica, dtype=np.int64)[ops.micro]
    if not (table.replica[ops.worker, ops.start] == replica).all():
        return False
    if not (np.asarray(table.placement)[replica, ops.stage] == ops.worker).all():
        return False
    ids = op_index(ops.kind, ops.micro, ops.stage, m, n_stages)
    position = np.full(4 * m * n_stages, -1, dtype=np.int64)
    position[ids] = np.arange(len(ops))
    if np.count_nonzero(position >= 0) != len(ops):  # a repeat (then, with the count right, a missing one)
        return False
    end = ops.end
    for dep in dependency_ids(ops.kind, ops.micro, ops.stage, m, n_stages, table.split_backward):
        has = dep >= 0
        producer = position[dep[has]]
        if (producer < 0).any() or (end[producer] > ops.start[has]).any():
            return False
    return True


def activation_profile_fast(table: ScheduleTable, stage_weights: np.ndarray | None = None) -> np.ndarray | None:
    """:meth:`ScheduleTable.activation_profile` with array code (the same floats), or None where the
    table holds kinds outside :data:`FAST_KINDS` (the caller then uses the reference).
    """
    ops = table_ops(table)
    if ops is None or not _plain_split(table.split_backward):
        return None
    weights = np.ones(table.n_stages) if stage_weights is None else np.asarray(stage_weights, float)
    delta = np.zeros((table.p, table.length + 1))
    # At most one operation starts and one ends at a cell, so the additions below meet at most
    # two terms per cell, whose sum does not depend on their order: the reference's floats.
    stores = ops.kind == Kind.F
    frees = (ops.kind == Kind.B) | (ops.kind == Kind.W)  # ppsweep.ops.frees_activation
    np.add.at(delta, (ops.worker[stores], ops.start[stores]), weights[ops.stage[stores]])
    np.subtract.at(delta, (ops.worker[frees], ops.end[frees]), weights[ops.stage[frees]])
    return np.cumsum(delta, axis=1)[:, : table.length]
