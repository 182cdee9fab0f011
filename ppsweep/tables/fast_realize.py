"""Array versions of the per-operation Python in building a table (SPEC section 2).

:func:`ppsweep.tables.table.realize`, :func:`ppsweep.tables.validate.validate_table` and
:meth:`ppsweep.tables.table.ScheduleTable.activation_profile` are the reference implementations: they
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
  rule goes to :func:`~ppsweep.tables.validate.validate_table`, which names the first violation.
- :func:`activation_profile_fast`: stored activations per worker and slot.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass

import numpy as np

from ppsweep.tables.ops import NONE, Kind
from ppsweep.schedules.base import OrderArrays, ScheduleOrder
from ppsweep.tables.table import ScheduleTable, check_slots, realize, table_from_placed

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
    """Slots of each operation of ``kind`` (array version of :func:`ppsweep.tables.table.op_slots`)."""
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

    The same rules, and the same order, as :func:`ppsweep.tables.ops.dependencies`: the upstream input
    first, then (for B and I below the last stage) the same-stage forward.
    """
    f_id = micro * n_stages + stage  # F(j, s); op_index is linear in kind and stage
    block = m * n_stages  # ids of one kind
    grad = int(Kind.I if split_backward else Kind.B)
    is_bwd = (kind == Kind.B) | (kind == Kind.I)
    bwd_mid = is_bwd & (stage < n_stages - 1)
    first = np.where((kind == Kind.F) & (stage > 0), f_id - 1, -1)  # F(j, s-1)
    first = np.where(is_bwd, np.where(bwd_mid, (grad - 1) * block + f_id + 1, f_id), first)  # grad(j, s+1); F(j, S-1)
    first = np.where(kind == Kind.W, (int(Kind.I) - 1) * block + f_id, first)  # I(j, s)
    second = np.where(bwd_mid, f_id, -1)  # F(j, s)
    return first, second


def input_positions(
    kind: np.ndarray, micro: np.ndarray, stage: np.ndarray, m: int, n_stages: int, split_backward: bool
) -> np.ndarray | None:
    """Where each operation's inputs are among the operations, or None.

    Args:
      kind, micro, stage: the operations (well formed: :func:`well_formed`).
      m, n_stages: microbatches and stages.
      split_backward: whether every backward is split (True) or none (False).

    Returns:
      ``(2, n)`` index of each operation's inputs (:func:`dependency_ids` order), -1 where it has
      none; None where an operation is listed twice or an input is not among the operations.
    """
    n = len(kind)
    position = np.full(4 * m * n_stages + 1, -1, dtype=np.int64)  # id -> index; the last entry: no input
    position[op_index(kind, micro, stage, m, n_stages)] = np.arange(n)
    if np.count_nonzero(position >= 0) != n:
        return None
    ids = np.stack(dependency_ids(kind, micro, stage, m, n_stages, split_backward))
    inputs = position[ids]  # ids of -1 read the last entry
    if ((inputs < 0) & (ids >= 0)).any():
        return None
    return inputs


def table_inputs(table: ScheduleTable, ops: OpArrays) -> np.ndarray | None:
    """:func:`input_positions` of ``table``'s operations (``ops = table_ops(table)``), kept with the table."""
    known = _INPUTS.get(table)
    if known is None:
        known = input_positions(ops.kind, ops.micro, ops.stage, table.m, table.n_stages, table.split_backward)
        if known is not None:
            _INPUTS[table] = known
    return known


def _order_arrays(order: ScheduleOrder) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lengths per worker; worker, kind, micro, stage of every operation, worker by worker) of ``order``."""
    if isinstance(order.orders, OrderArrays):  # a generator that computed its order as arrays
        arrays = order.orders
        lengths, kind, micro, stage = arrays.lengths, arrays.kind, arrays.micro, arrays.stage
    else:
        lengths = np.array([len(row) for row in order.orders], dtype=np.int64)
        n = int(lengths.sum())
        first = next((row[0] for row in order.orders if row), ())
        width = len(first)  # fields per operation (kind, micro, stage, and any more the Op type has)
        flat = np.fromiter(
            itertools.chain.from_iterable(itertools.chain.from_iterable(order.orders)), dtype=np.int64, count=width * n
        ).reshape(n, width)
        kind, micro, stage = flat[:, 0].copy(), flat[:, 1].copy(), flat[:, 2].copy()
    worker = np.repeat(np.arange(order.p, dtype=np.int64), lengths)
    return lengths, worker, kind, micro, stage


def _plain_split(split_backward: object) -> bool:
    """True where the backward is split for every operation or for none (what the array paths handle)."""
    return isinstance(split_backward, (bool, np.bool_))


def well_formed(kind: np.ndarray, micro: np.ndarray, stage: np.ndarray, m: int, n_stages: int) -> bool:
    """Kinds in :data:`FAST_KINDS`, micro and stage in range: where :func:`op_index` is defined.

    Args:
      kind, micro, stage: int arrays of the operations.
      m: microbatches. n_stages: stages.
    """
    if kind.size == 0:
        return True
    return bool(
        kind.min() >= min(FAST_KINDS) and kind.max() <= max(FAST_KINDS)  # FAST_KINDS: codes 1 … 4
        and micro.min() >= 0 and micro.max() < m
        and stage.min() >= 0 and stage.max() < n_stages
    )


def realize_fast(order: ScheduleOrder, f_slots: int = 1, b_slots: int = 2) -> ScheduleTable:
    """:func:`ppsweep.tables.table.realize` with array code: its arguments, the same table to the bit, its errors.

    Orders the array code does not handle (other kinds, operations out of range or repeated, an
    input that is not in the order, a deadlock) are realized by the reference, which raises its
    own error where the order cannot run.
    """
    check_slots(f_slots, b_slots)
    if not _plain_split(order.split_backward):
        return realize(order, f_slots, b_slots)
    lengths, worker, kind, micro, stage = _order_arrays(order)
    m, n_stages, n = order.m, order.n_stages, len(kind)
    if n == 0 or not well_formed(kind, micro, stage, m, n_stages):
        return realize(order, f_slots, b_slots)
    inputs = input_positions(kind, micro, stage, m, n_stages, order.split_backward)
    if inputs is None:  # an operation listed twice, or an input missing (the reference reports the deadlock)
        return realize(order, f_slots, b_slots)
    dep_pos = np.where(inputs >= 0, inputs, n)  # n: a sentinel that is always placed at time 0
    slots = kind_slots(kind, f_slots, b_slots)
    start = _asap_starts(lengths, dep_pos, slots)
    if start is None:
        return realize(order, f_slots, b_slots)
    table = _table(order, worker, start, slots, kind, micro, stage, f_slots, b_slots)
    # What table_ops would read back off the dense arrays: worker by worker, in slot order (each
    # worker's operations start in increasing slots, none repeated, so no two runs merge).
    _OPS[table] = OpArrays(worker=worker, start=start, slots=slots, kind=kind, micro=micro, stage=stage)
    _INPUTS[table] = inputs
    return table


def _asap_starts(lengths: np.ndarray, dep_pos: np.ndarray, slots: np.ndarray) -> np.ndarray | None:
    """First slot of every operation (index into the order), or None on a deadlock.

    An operation starts at ``max(its worker's previous operation's end, its inputs' ends)``: a
    longest path through the order's dependency graph. Where every input sits in an earlier or
    the same column of the orders (position in its worker's order) and the inputs within a
    column form chains, :func:`_column_starts` places one column per vector step; other orders
    go wavefront by wavefront (:func:`_wavefront_starts`).

    Args:
      lengths: ``(p,)`` operations of each worker.
      dep_pos: ``(2, n)`` index of each input in the order, ``n`` where there is none.
      slots: ``(n,)`` length of each operation.
    """
    columns = _Columns.of(lengths, dep_pos, slots)
    if columns is not None:
        return columns.starts()
    return _wavefront_starts(lengths, dep_pos, slots)


@dataclass(frozen=True)
class _Columns:
    """The orders as a ``(columns, p)`` grid, for :meth:`starts`.

    Column ``k`` holds every worker's ``k``-th operation (padding, with no input and no length,
    where a worker's order is shorter). Its inputs in earlier columns are known when it is
    placed; an input in the same column (the fill and drain of a pipeline: ``F(j, s-1)`` right
    before ``F(j, s)`` one worker on) links operations into chains, each placed by a max-plus
    prefix scan along the chain. ``None`` from :meth:`of` where that does not hold (an input in a
    later column, an operation with two inputs in its column, or one feeding two there).

    Attributes:
      n: operations in the order.
      cell: ``(columns, p)`` index into the order (``n + 1``: padding).
      first, second: ``(columns, p)`` the inputs in earlier columns (``n``: none).
      length: ``(columns, p)`` slots of each cell's operation.
      chained: columns holding a chain.
      lanes, shift, segment: per chained column ``(len(chained), p)``: its lanes chain by chain
        (each in chain order), the slots before each lane within its chain, the chain of each.
    """

    n: int
    cell: np.ndarray
    first: np.ndarray
    second: np.ndarray
    length: np.ndarray
    chained: np.ndarray
    lanes: np.ndarray
    shift: np.ndarray
    segment: np.ndarray

    @classmethod
    def of(cls, lengths: np.ndarray, dep_pos: np.ndarray, slots: np.ndarray) -> "_Columns | None":
        p, n = len(lengths), int(lengths.sum())
        width = int(lengths.max())
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        column = np.arange(n) - np.repeat(offsets, lengths)
        dep_column = np.concatenate([column, [-1]])[dep_pos]  # -1: no input
        if (dep_column > column).any():
            return None
        in_column = dep_column == column
        both = in_column[0] & in_column[1]
        pred = np.where(in_column[0], dep_pos[0], np.where(in_column[1], dep_pos[1], -1))  # the input in its column
        linked = pred >= 0
        if both.any() or (np.bincount(pred[linked], minlength=n) > 1).any():
            return None
        # Chain head and depth of every linked operation, by pointer jumping (a chain visits each
        # worker once, so log2(p) jumps reach every head).
        members = np.flatnonzero(linked)
        compact = np.full(n, -1, dtype=np.int64)
        compact[members] = np.arange(len(members))
        up = compact[pred[members]]  # the input's place among the linked ones, -1 where it is a head
        head = np.where(up < 0, pred[members], -1)
        depth = np.ones(len(members), dtype=np.int64)
        for _ in range(p.bit_length() + 1):
            if (up < 0).all():
                break
            jumping = up >= 0
            depth = np.where(jumping, depth + depth[up], depth)
            head = np.where(jumping, head[up], head)
            up = np.where(jumping, up[up], up)
        else:
            return None  # a cycle within a column
        head_of, depth_of = np.arange(n), np.zeros(n, dtype=np.int64)
        head_of[members], depth_of[members] = head, depth
        first = np.where(in_column[0], n, dep_pos[0])
        second = np.where(in_column[1], n, dep_pos[1])
        if (lengths == width).all():  # no padding: the grid is the order seen column-wise
            cell = np.arange(n).reshape(p, width).T
            first, second, length = (a.reshape(p, width).T for a in (first, second, slots))
        else:
            real = np.arange(width)[:, None] < lengths[None, :]
            cell = np.where(real, offsets[None, :] + np.arange(width)[:, None], n + 1)
            spare = np.array([n, n])  # the inputs of "no input" and of padding
            first, second = np.concatenate([first, spare])[cell], np.concatenate([second, spare])[cell]
            length = np.concatenate([slots, [0, 0]])[cell]
        chained = np.unique(column[linked])
        # In a chained column, sort the lanes by (their chain's head lane, depth): chains contiguous, in order.
        worker = np.arange(p)[None, :]
        sub = np.minimum(cell[chained], n)  # padding (n + 1) as n, keyed by its own lane below
        head_lane = np.concatenate([np.repeat(np.arange(p), lengths)[head_of], [0]])[sub]
        key = np.where(sub < n, head_lane * p + np.concatenate([depth_of, [0]])[sub], worker * p)
        lanes = np.argsort(key, axis=1, kind="stable")
        segment = np.take_along_axis(key, lanes, axis=1) // p
        slots_in_order = np.take_along_axis(length[chained], lanes, axis=1)
        before = np.cumsum(slots_in_order, axis=1) - slots_in_order  # slots before each lane in its column
        starts_chain = np.concatenate([np.ones((len(chained), 1), dtype=bool), segment[:, 1:] != segment[:, :-1]], axis=1)
        base = np.maximum.accumulate(np.where(starts_chain, before, 0), axis=1)
        return cls(n, cell, first, second, length, chained, lanes, before - base, segment)

    def starts(self) -> np.ndarray:
        """The first slot of every operation, column by column."""
        width, p = self.cell.shape
        end = np.zeros(self.n + 2, dtype=np.int64)  # end[n] = 0: no input; end[n + 1]: the padding's
        begin = np.empty(self.cell.shape, dtype=np.int64)
        free = np.zeros(p, dtype=np.int64)
        chain_of = dict(zip(self.chained.tolist(), range(len(self.chained))))
        big = np.int64(1 << 40)  # keeps the chains apart in the prefix maximum
        first, second, length, cell = self.first, self.second, self.length, self.cell
        for k in range(width):
            row = np.maximum(np.maximum(free, end[first[k]]), end[second[k]])
            c = chain_of.get(k)
            if c is not None:
                # x = max(own, previous in the chain's end): along a chain x - shift is a running maximum.
                lanes, offset = self.lanes[c], self.segment[c] * big - self.shift[c]
                row[lanes] = np.maximum.accumulate(row[lanes] + offset) - offset
            begin[k] = row
            free = row + length[k]
            end[cell[k]] = free
        start = np.empty_like(end)
        start[self.cell] = begin
        return start[: self.n]


def _wavefront_starts(lengths: np.ndarray, dep_pos: np.ndarray, slots: np.ndarray) -> np.ndarray | None:
    """:func:`_asap_starts` for any order: each step looks at every worker's next operation and
    places those whose inputs are all placed, at ``max(worker free, inputs' ends)``. An input not
    placed yet has end ``-2**40`` (an operation with a negative input end must wait); a worker
    that has run its whole order waits at an operation that never runs.
    """
    n = int(lengths.sum())
    waiting, done = -(1 << 40), n + 1  # the end of an operation not placed; the operation that never runs
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    after = np.arange(1, n + 3)  # each operation's successor on its worker
    after[offsets + lengths - 1] = done
    after[n:] = done
    # One row per operation (and the two sentinels): its inputs, its slots, its successor.
    info = np.empty((n + 2, 4), dtype=np.int64)
    info[:n, :2] = dep_pos.T
    info[:n, 2] = slots
    info[n:, :2] = done  # "no input" (never read as an operation) and "done" (waits for itself)
    info[n:, 2] = 0
    info[:, 3] = after
    end = np.full(n + 2, waiting, dtype=np.int64)
    end[n] = 0  # "no input": ready at time 0
    start = np.zeros(n + 2, dtype=np.int64)
    free = np.zeros(len(lengths), dtype=np.int64)
    cursor = np.where(lengths > 0, offsets, done)
    placed = 0
    while placed < n:
        row = info[cursor]
        inputs = end[row[:, :2]]
        ready = np.minimum(inputs[:, 0], inputs[:, 1]) >= 0
        begin = np.maximum(np.maximum(inputs[:, 0], inputs[:, 1]), free)
        count = int(np.count_nonzero(ready))
        if count == 0:
            return None
        finish = begin + row[:, 2]
        free = np.where(ready, finish, free)
        end[cursor] = np.where(ready, finish, waiting)
        start[cursor] = begin
        cursor = np.where(ready, row[:, 3], cursor)
        placed += count
    return start[:n]


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
    """The dense table of placed operations (as :func:`ppsweep.tables.table.table_from_placed` fills it)."""
    n, length = len(kind), int((start + slots).max())
    # The operation in each cell (n: idle): an operation's first cell, then its d-th for d < slots.
    cell_op = np.full(order.p * length, n, dtype=np.int64)
    first_cell = worker * length + start
    cell_op[first_cell] = np.arange(n)
    for d in range(1, int(slots.max())):
        longer = np.flatnonzero(slots > d)
        cell_op[first_cell[longer] + d] = longer
    table = table_from_placed(order, [], f_slots, b_slots)  # the metadata; arrays replaced below
    arrays = {}
    for name, fill, values in (
        ("kind", int(Kind.IDLE), kind),
        ("micro", NONE, micro),
        ("stage", NONE, stage),
        ("replica", NONE, np.asarray(order.micro_replica, dtype=np.int64)[micro]),
    ):
        arrays[name] = np.append(values, fill)[cell_op].reshape(order.p, length)
    return _with_arrays(table, arrays)


def _with_arrays(table: ScheduleTable, arrays: dict[str, np.ndarray]) -> ScheduleTable:
    import dataclasses

    return dataclasses.replace(table, **arrays)


# ---------------------------------------------------------------------------------------------
# reading a dense table


def table_ops(table: ScheduleTable) -> OpArrays | None:
    """The operations of ``table`` in (worker, slot) order, as :meth:`ScheduleTable.placed_ops` finds them.

    An operation is a maximal run of consecutive cells of a row holding the same
    ``(kind, micro, stage)``. Returns None for the tables the array paths leave to the references:
    a cell holding a kind outside :data:`FAST_KINDS` and IDLE (an F&B pair), or a backward split
    for some operations only. Every array path, and the disk cache (which stores what they
    read), asks this one question.
    """
    known = _OPS.get(table)
    if known is not None:
        return known
    if not _plain_split(table.split_backward):
        return None
    ops = _read_ops(table)
    if ops is not None:
        _OPS[table] = ops
    return ops


#: Operation arrays of tables already read (or realized here), held as long as the table lives.
_OPS: "weakref.WeakKeyDictionary[ScheduleTable, OpArrays]" = weakref.WeakKeyDictionary()
#: Their :func:`table_inputs`, likewise.
_INPUTS: "weakref.WeakKeyDictionary[ScheduleTable, np.ndarray]" = weakref.WeakKeyDictionary()


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
    """:func:`ppsweep.tables.validate.validate_table` with array code: the same tables accepted, the same errors.

    The rules are checked over all operations at once; a table that breaks any of them (or that
    the arrays cannot read) is passed to the reference, which raises naming the first violation.

    Args:
      table: the table to check.

    Raises:
      InvalidTableError: naming the worker, slot and operation of the first violation.
    """
    if not _valid(table):
        from ppsweep.tables.validate import validate_table

        validate_table(table)


def _valid(table: ScheduleTable) -> bool:
    """True when ``table`` passes every rule of :func:`ppsweep.tables.validate.validate_table`."""
    ops = table_ops(table)
    if ops is None or table.kind.shape[0] != table.p or table.replica.shape != table.kind.shape:
        return False
    m, n_stages = table.m, table.n_stages
    allowed = (Kind.F, Kind.I, Kind.W) if table.split_backward else (Kind.F, Kind.B)
    n_expected = len(allowed) * m * n_stages
    if len(ops) != n_expected or not np.isin(ops.kind, np.array([int(k) for k in allowed])).all():
        return False
    if not well_formed(ops.kind, ops.micro, ops.stage, m, n_stages):
        return False
    if not (ops.slots == kind_slots(ops.kind, table.f_slots, table.b_slots)).all():
        return False
    replica = np.asarray(table.micro_replica, dtype=np.int64)[ops.micro]
    if not (table.replica[ops.worker, ops.start] == replica).all():
        return False
    if not (np.asarray(table.placement)[replica, ops.stage] == ops.worker).all():
        return False
    inputs = table_inputs(table, ops)
    if inputs is None:  # a repeat (then, with the count right, a missing one), or an input missing
        return False
    return not ((ops.end[inputs] > ops.start) & (inputs >= 0)).any()  # an input ending after its consumer starts


def activation_profile_fast(table: ScheduleTable, stage_weights: np.ndarray | None = None) -> np.ndarray | None:
    """:meth:`ScheduleTable.activation_profile` with array code (the same floats), or None where the
    :func:`table_ops` leaves the table to the reference (the caller then uses it).
    """
    ops = table_ops(table)
    if ops is None:
        return None
    weights = np.ones(table.n_stages) if stage_weights is None else np.asarray(stage_weights, float)
    delta = np.zeros((table.p, table.length + 1))
    # At most one operation starts and one ends at a cell, so the additions below meet at most
    # two terms per cell, whose sum does not depend on their order: the reference's floats.
    stores = ops.kind == Kind.F
    frees = (ops.kind == Kind.B) | (ops.kind == Kind.W)  # ppsweep.tables.ops.frees_activation
    np.add.at(delta, (ops.worker[stores], ops.start[stores]), weights[ops.stage[stores]])
    np.subtract.at(delta, (ops.worker[frees], ops.end[frees]), weights[ops.stage[frees]])
    return np.cumsum(delta, axis=1)[:, : table.length]
