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
- :func:`~ppsweep.tables.op_arrays.table_ops` (:mod:`ppsweep.tables.op_arrays`, below the table): the
  operations of a dense table as arrays (what ``placed_ops`` lists).
- :func:`validate_fast`: the table's validity, checked on those arrays; a table that fails any
  rule goes to :func:`~ppsweep.tables.validate.validate_table`, which names the first violation.
- :func:`~ppsweep.tables.op_arrays.activation_profile_fast`: stored activations per worker and slot
  (:meth:`ScheduleTable.activation_profile` calls it).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import weakref
from dataclasses import dataclass

import numba
import numpy as np

from ppsweep.schedules.base import OrderArrays, ScheduleOrder
from ppsweep.small_inputs import compiled_unless_small
from ppsweep.tables.op_arrays import _OPS, FAST_KINDS, OpArrays, _read_ops, activation_profile_fast, table_ops
from ppsweep.tables.ops import NONE, Kind, SplitBackward
from ppsweep.tables.table import ScheduleTable, check_slots, realize, table_from_placed
from ppsweep.tables.validate import validate_table

__all__ = ["FAST_KINDS", "OpArrays", "_read_ops", "activation_profile_fast", "array_path_handles", "order_handled",
           "realize_fast", "table_ops", "validate_fast"]

def kind_slots(kind: np.ndarray, f_slots: int, b_slots: int) -> np.ndarray:
    """Slots of each operation of ``kind`` (array version of :func:`ppsweep.tables.table.op_slots`)."""
    per_kind = np.zeros(max(int(k) for k in Kind) + 1, dtype=np.int64)
    per_kind[Kind.F], per_kind[Kind.B], per_kind[Kind.FB] = f_slots, b_slots, f_slots + b_slots
    per_kind[Kind.I] = per_kind[Kind.W] = max(1, b_slots // 2)
    return per_kind[kind]


def split_grid(split_backward: SplitBackward, m: int, n_stages: int) -> np.ndarray:
    """``(m, S)`` True where the backward of ``(micro, stage)`` is split into I and W."""
    if isinstance(split_backward, (bool, np.bool_)):
        return np.full((m, n_stages), bool(split_backward))
    grid = np.zeros((m, n_stages), dtype=bool)
    split = np.array(sorted(split_backward), dtype=np.int64).reshape(-1, 2)
    inside = (split[:, 0] >= 0) & (split[:, 0] < m) & (split[:, 1] >= 0) & (split[:, 1] < n_stages)
    grid[split[inside, 0], split[inside, 1]] = True
    return grid


@numba.njit(cache=True, nogil=True)
def _input_halves(kind, micro, stage, micro2, stage2, m, n_stages, grad, halves):
    """:func:`input_halves`' loop: fills ``halves`` (``(2, n)``, or ``(4, n)`` with pairs: each half's
    two inputs) and returns False where a half is listed twice or an input is not among them.

    A half's inputs follow :func:`ppsweep.tables.ops.dependencies` (ids ``((kind - 1)·m + micro)·S + stage``): the upstream
    input first, F(j, s-1) for F, the input gradient (j, s+1) for B and I below the last stage,
    I(j, s) for W; then F(j, s) for B and I below the last stage (F(j, S-1) first for those of the
    last). ``grad[j, s]``: the kind that produces the input gradient of ``(j, s)`` (I where the
    backward of ``(j, s+1)`` is split, else B). Pairs (``micro2 >= 0``'s rows, with four rows): the
    forward half is F(micro, stage), the backward half B(micro2, stage2)."""
    n = kind.shape[0]
    n_parts = halves.shape[0] // 2
    block = m * n_stages  # ids of one kind
    position = np.full(4 * block + 1, -1, dtype=np.int64)  # id -> half; the last entry: no input
    for h in range(n_parts):
        for i in range(n):
            paired = kind[i] == 5  # Kind.FB
            if h == 1 and not paired:
                continue
            k = 1 if paired else kind[i]  # a pair's forward half is an F, its backward half a B
            j, s = (micro2[i], stage2[i]) if h == 1 else (micro[i], stage[i])
            if h == 1:
                k = 2
            at = ((k - 1) * m + j) * n_stages + s
            if position[at] >= 0:
                return False  # a half listed twice
            position[at] = 2 * i + h
    for h in range(n_parts):
        for i in range(n):
            paired = kind[i] == 5
            first = second = -1
            if h == 0 or paired:
                k = 2 if h == 1 else (1 if paired else kind[i])
                j, s = (micro2[i], stage2[i]) if h == 1 else (micro[i], stage[i])
                f_id = j * n_stages + s  # F(j, s)
                if k == 1:  # F: the forward below
                    if s > 0:
                        first = f_id - 1
                elif k == 2 or k == 3:  # B, I: the gradient from above (F(j, S-1) at the last stage), then F(j, s)
                    if s < n_stages - 1:
                        first = (grad[j, s] - 1) * block + f_id + 1
                        second = f_id
                    else:
                        first = f_id
                else:  # W: its I
                    first = 2 * block + f_id
            for r, dep in ((0, first), (1, second)):
                got = position[dep]  # dep -1 reads the last entry: -1
                if dep >= 0 and got < 0:
                    return False  # an input not among the operations
                halves[2 * h + r, i] = got
    return True


def half_arrays(kind: np.ndarray, micro: np.ndarray, stage: np.ndarray, micro2: np.ndarray | None,
                stage2: np.ndarray | None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The halves of each operation as ``(kind, micro, stage, present)`` arrays: one for every operation
    (a pair's forward half), and, where there are pairs, a second for their backward halves
    (:func:`ppsweep.tables.ops.halves`; ``present`` False for the other operations)."""
    pairs = kind == Kind.FB
    first = (np.where(pairs, int(Kind.F), kind), micro, stage, np.ones(len(kind), dtype=bool))
    if micro2 is None:
        return [first]
    return [first, (np.full(len(kind), int(Kind.B)), np.where(pairs, micro2, 0), np.where(pairs, stage2, 0), pairs)]


def input_positions(
    kind: np.ndarray, micro: np.ndarray, stage: np.ndarray, m: int, n_stages: int, split_backward: SplitBackward,
    micro2: np.ndarray | None = None, stage2: np.ndarray | None = None,
) -> np.ndarray | None:
    """Where each operation's inputs are among the operations, or None.

    Args:
      kind, micro, stage: the operations (well formed: :func:`well_formed`).
      m, n_stages: microbatches and stages.
      split_backward: whether every backward is split (True), none (False), or the split ``(micro, stage)``.
      micro2, stage2: the backward halves of pairs F&B (-1 elsewhere); None where there is none.

    Returns:
      ``(2, n)`` index of each operation's inputs (:func:`_input_halves`' order), -1 where it has
      none; with pairs ``(4, n)``: the forward half's two, then the backward half's
      (:func:`ppsweep.tables.ops.dependencies`' order). None where an operation is listed twice
      or an input is not among the operations.
    """
    halves = input_halves(kind, micro, stage, m, n_stages, split_backward, micro2, stage2)
    return None if halves is None else np.where(halves >= 0, halves // 2, -1)


def input_halves(
    kind: np.ndarray, micro: np.ndarray, stage: np.ndarray, m: int, n_stages: int, split_backward: SplitBackward,
    micro2: np.ndarray | None = None, stage2: np.ndarray | None = None,
) -> np.ndarray | None:
    """:func:`input_positions` naming the half that produces each input: ``2·i`` the operation ``i``
    itself (a pair: its forward half), ``2·i + 1`` the backward half of the pair ``i``; -1: no input."""
    pairs = micro2 is not None
    if isinstance(split_backward, (bool, np.bool_)):  # the kind producing each input gradient
        grad = np.full((m, n_stages), int(Kind.I if split_backward else Kind.B), dtype=np.int64)
    else:  # per microbatch and stage: the kind of the backward above
        above = split_grid(split_backward, m, n_stages)[:, np.minimum(np.arange(n_stages) + 1, n_stages - 1)]
        grad = np.where(above, int(Kind.I), int(Kind.B))
    halves = np.empty((4 if pairs else 2, len(kind)), dtype=np.int64)
    no_pair = np.zeros(0, dtype=np.int64)
    args = [np.ascontiguousarray(a, dtype=np.int64) for a in (kind, micro, stage, micro2 if pairs else no_pair, stage2 if pairs else no_pair)]
    if not compiled_unless_small(_input_halves, len(kind))(*args, m, n_stages, grad, halves):
        return None
    return halves


def table_inputs(table: ScheduleTable, ops: OpArrays) -> np.ndarray | None:
    """:func:`input_positions` of ``table``'s operations (``ops = table_ops(table)``), kept with the table."""
    known = _INPUTS.get(table)
    if known is None:
        known = input_positions(ops.kind, ops.micro, ops.stage, table.m, table.n_stages, table.split_backward,
                                ops.micro2, ops.stage2)
        if known is not None:
            _INPUTS[table] = known
    return known


@dataclass(frozen=True)
class _Order:
    """An order as arrays: operations per worker, then every operation worker by worker.

    Attributes:
      lengths: ``(p,)`` operations of each worker.
      worker, kind, micro, stage: ``(n,)`` each operation (a pair: its forward half's microbatch and stage).
      micro2, stage2: a pair's backward half (-1 elsewhere); None where the order has no pair.
    """

    lengths: np.ndarray
    worker: np.ndarray
    kind: np.ndarray
    micro: np.ndarray
    stage: np.ndarray
    micro2: np.ndarray | None = None
    stage2: np.ndarray | None = None


def _order_arrays(order: ScheduleOrder) -> _Order:
    """The operations of ``order`` as arrays (:class:`_Order`); the last order's are kept (per thread),
    so that :func:`order_handled`, then :func:`realize_fast`, read them once."""
    last = getattr(_LAST_ORDER, "value", None)
    if last is not None and last[0]() is order:
        return last[1]
    arrays = _read_order(order)
    _LAST_ORDER.value = (weakref.ref(order), arrays)
    return arrays


#: The last order read by :func:`_order_arrays` (weakly) and its arrays, per thread.
_LAST_ORDER = threading.local()


def _read_order(order: ScheduleOrder) -> _Order:
    micro2 = stage2 = None
    if isinstance(order.orders, OrderArrays):  # a generator that computed its order as arrays
        arrays = order.orders
        lengths, kind, micro, stage = arrays.lengths, arrays.kind, arrays.micro, arrays.stage
        if arrays.micro2 is not None and (kind == Kind.FB).any():
            micro2, stage2 = arrays.micro2, arrays.stage2
    else:
        lengths = np.array([len(row) for row in order.orders], dtype=np.int64)
        n = int(lengths.sum())
        first = next((row[0] for row in order.orders if row), ())
        width = len(first)  # fields per operation (kind, micro, stage, and any more the Op type has)
        flat = np.fromiter(
            itertools.chain.from_iterable(itertools.chain.from_iterable(order.orders)), dtype=np.int64, count=width * n
        ).reshape(n, width)
        kind, micro, stage = flat[:, 0].copy(), flat[:, 1].copy(), flat[:, 2].copy()
        if width >= 5 and (kind == Kind.FB).any():
            micro2, stage2 = flat[:, 3].copy(), flat[:, 4].copy()
    worker = np.repeat(np.arange(order.p, dtype=np.int64), lengths)
    return _Order(lengths, worker, kind, micro, stage, micro2, stage2)


def well_formed(kind: np.ndarray, micro: np.ndarray, stage: np.ndarray, m: int, n_stages: int,
                micro2: np.ndarray | None = None, stage2: np.ndarray | None = None) -> bool:
    """Kinds F, B, I, W (and F&B where ``micro2`` is given), every half's micro and stage in range:
    where a half's id ``((kind - 1)·m + micro)·S + stage`` is defined (:func:`_input_halves`).

    Args:
      kind, micro, stage: int arrays of the operations.
      m: microbatches. n_stages: stages.
      micro2, stage2: the backward halves of pairs (None: no pairs).
    """
    if kind.size == 0:
        return True
    highest = int(Kind.FB) if micro2 is not None else max(FAST_KINDS)
    for k, j, s, present in half_arrays(kind, micro, stage, micro2, stage2):
        j, s = j[present], s[present]
        if j.size and not (j.min() >= 0 and j.max() < m and s.min() >= 0 and s.max() < n_stages):
            return False
    return bool(kind.min() >= min(FAST_KINDS) and kind.max() <= highest)  # codes 1 … 4 (5: FB)


def order_handled(order: ScheduleOrder) -> bool:
    """Whether the array path realizes ``order`` itself (:func:`realize_fast`): operations of kinds
    F, B, I, W (F&B with its halves), each half in range. Others go to the reference."""
    ops = _order_arrays(order)
    return len(ops.kind) > 0 and well_formed(ops.kind, ops.micro, ops.stage, order.m, order.n_stages, ops.micro2, ops.stage2)


def array_path_handles(table: ScheduleTable) -> bool:
    """Whether the array paths handle ``table`` (:func:`validate_fast`, :func:`activation_profile_fast`,
    :func:`ppsweep.engine.fast_program.compile_program_fast`): its cells read as operations
    (:func:`table_ops`) of kinds F, B, I, W (F&B with its halves), each half in range. Every array
    path asks this one question; the tables it refuses go to the references."""
    known = _HANDLED.get(table)
    if known is None:
        ops = table_ops(table)
        known = _HANDLED[table] = ops is not None and len(ops) > 0 and well_formed(
            ops.kind, ops.micro, ops.stage, table.m, table.n_stages, ops.micro2, ops.stage2)
    return known


#: :func:`array_path_handles` of tables already asked (each array path asks it), as long as the table lives.
_HANDLED: "weakref.WeakKeyDictionary[ScheduleTable, bool]" = weakref.WeakKeyDictionary()


def realize_fast(order: ScheduleOrder, f_slots: int = 1, b_slots: int = 2) -> ScheduleTable:
    """:func:`ppsweep.tables.table.realize` with array code: its arguments, the same table to the bit, its errors.

    Orders the array code does not handle (other kinds, operations out of range or repeated, an
    input that is not in the order, a deadlock) are realized by the reference, which raises its
    own error where the order cannot run.
    """
    check_slots(f_slots, b_slots)
    if not order_handled(order):
        return realize(order, f_slots, b_slots)
    ops = _order_arrays(order)
    m, n_stages, n = order.m, order.n_stages, len(ops.kind)
    inputs = input_positions(ops.kind, ops.micro, ops.stage, m, n_stages, order.split_backward, ops.micro2, ops.stage2)
    if inputs is None:  # an operation listed twice, or an input missing (the reference reports the deadlock)
        return realize(order, f_slots, b_slots)
    dep_pos = np.where(inputs >= 0, inputs, n)  # n: a sentinel that is always placed at time 0
    slots = kind_slots(ops.kind, f_slots, b_slots)
    start = _asap_starts(ops.lengths, dep_pos, slots)
    if start is None:
        return realize(order, f_slots, b_slots)
    table = _table(order, ops, start, slots, f_slots, b_slots)
    # What table_ops would read back off the dense arrays: worker by worker, in slot order (each
    # worker's operations start in increasing slots, none repeated, so no two runs merge).
    _OPS[table] = OpArrays(worker=ops.worker, start=start, slots=slots, kind=ops.kind, micro=ops.micro, stage=ops.stage,
                           micro2=ops.micro2, stage2=ops.stage2)
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
      dep_pos: ``(k, n)`` index of each input in the order, ``n`` where there is none (``k = 4``
        with pairs F&B: those go wavefront by wavefront).
      slots: ``(n,)`` length of each operation.
    """
    columns = _Columns.of(lengths, dep_pos, slots) if dep_pos.shape[0] == 2 else None
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
        """The first slot of every operation, column by column (:func:`_column_starts`)."""
        chain_of = np.full(self.cell.shape[0], -1, dtype=np.int64)
        chain_of[self.chained] = np.arange(len(self.chained))
        big = np.int64(1 << 40)  # keeps the chains apart in the prefix maximum
        offset = self.segment.astype(np.int64) * big - self.shift
        arrays = (self.cell, self.first, self.second, self.length, self.lanes, offset)
        starts = compiled_unless_small(_column_starts, self.cell.size)
        return starts(self.n, *(np.ascontiguousarray(a, dtype=np.int64) for a in arrays), chain_of)


@numba.njit(cache=True, nogil=True)
def _column_starts(n, cell, first, second, length, lanes, offset, chain_of):
    """:meth:`_Columns.starts`' loop, compiled: column by column, each lane starts at the latest of its
    worker's free slot and its inputs' ends; in a chained column (``chain_of[k] >= 0``) ``x - offset``
    is a running maximum along ``lanes`` (``offset``: the chain's ``segment · 2**40`` less the slots
    before the lane, so chains do not mix). Returns the first slot of operations ``0 … n-1``."""
    width, p = cell.shape
    end = np.zeros(n + 2, dtype=np.int64)  # end[n] = 0: no input; end[n + 1]: the padding's
    begin = np.empty((width, p), dtype=np.int64)
    free = np.zeros(p, dtype=np.int64)
    row = np.empty(p, dtype=np.int64)
    for k in range(width):
        for w in range(p):
            row[w] = max(max(free[w], end[first[k, w]]), end[second[k, w]])
        c = chain_of[k]
        if c >= 0:
            top = row[lanes[c, 0]] + offset[c, 0]
            for j in range(p):
                lane = lanes[c, j]
                top = max(top, row[lane] + offset[c, j])
                row[lane] = top - offset[c, j]
        for w in range(p):
            begin[k, w] = row[w]
            free[w] = row[w] + length[k, w]
            end[cell[k, w]] = free[w]
    start = np.empty(n + 2, dtype=np.int64)
    for k in range(width):
        for w in range(p):
            start[cell[k, w]] = begin[k, w]
    return start[:n]


def _wavefront_starts(lengths: np.ndarray, dep_pos: np.ndarray, slots: np.ndarray) -> np.ndarray | None:
    """:func:`_asap_starts` for any order: each step looks at every worker's next operation and
    places those whose inputs are all placed, at ``max(worker free, inputs' ends)``. An input not
    placed yet has end ``-2**40`` (an operation with a negative input end must wait); a worker
    that has run its whole order waits at an operation that never runs.
    """
    n = int(lengths.sum())
    k = dep_pos.shape[0]  # inputs per operation
    waiting, done = -(1 << 40), n + 1  # the end of an operation not placed; the operation that never runs
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    after = np.arange(1, n + 3)  # each operation's successor on its worker
    after[offsets + lengths - 1] = done
    after[n:] = done
    # One row per operation (and the two sentinels): its inputs, its slots, its successor.
    info = np.empty((n + 2, k + 2), dtype=np.int64)
    info[:n, :k] = dep_pos.T
    info[:n, k] = slots
    info[n:, :k] = done  # "no input" (never read as an operation) and "done" (waits for itself)
    info[n:, k] = 0
    info[:, k + 1] = after
    end = np.full(n + 2, waiting, dtype=np.int64)
    end[n] = 0  # "no input": ready at time 0
    start = np.zeros(n + 2, dtype=np.int64)
    free = np.zeros(len(lengths), dtype=np.int64)
    cursor = np.where(lengths > 0, offsets, done)
    placed = 0
    while placed < n:
        row = info[cursor]
        inputs = end[row[:, :k]]
        ready = inputs.min(axis=1) >= 0
        begin = np.maximum(inputs.max(axis=1), free)
        count = int(np.count_nonzero(ready))
        if count == 0:
            return None
        finish = begin + row[:, k]
        free = np.where(ready, finish, free)
        end[cursor] = np.where(ready, finish, waiting)
        start[cursor] = begin
        cursor = np.where(ready, row[:, k + 1], cursor)
        placed += count
    return start[:n]


def _table(order: ScheduleOrder, ops: _Order, start: np.ndarray, slots: np.ndarray, f_slots: int,
           b_slots: int) -> ScheduleTable:
    """The dense table of placed operations (as :func:`ppsweep.tables.table.table_from_placed` fills it)."""
    n, length = len(ops.kind), int((start + slots).max())
    # The operation in each cell (n: idle): an operation's first cell, then its d-th for d < slots.
    cell_op = np.full(order.p * length, n, dtype=np.int64)
    first_cell = ops.worker * length + start
    cell_op[first_cell] = np.arange(n)
    for d in range(1, int(slots.max())):
        longer = np.flatnonzero(slots > d)
        cell_op[first_cell[longer] + d] = longer
    table = table_from_placed(order, [], f_slots, b_slots)  # the metadata; arrays replaced below
    fields = [
        ("kind", int(Kind.IDLE), ops.kind),
        ("micro", NONE, ops.micro),
        ("stage", NONE, ops.stage),
        ("replica", NONE, np.asarray(order.micro_replica, dtype=np.int64)[ops.micro]),
    ]
    if ops.micro2 is not None:  # a pair's cells also name its backward half
        pairs = ops.kind == Kind.FB
        fields += [("pair_micro", NONE, np.where(pairs, ops.micro2, NONE)),
                   ("pair_stage", NONE, np.where(pairs, ops.stage2, NONE))]
    arrays = {name: np.append(values, fill)[cell_op].reshape(order.p, length) for name, fill, values in fields}
    return _with_arrays(table, arrays)


def _with_arrays(table: ScheduleTable, arrays: dict[str, np.ndarray]) -> ScheduleTable:
    return dataclasses.replace(table, **arrays)


#: Their :func:`table_inputs`, likewise.
_INPUTS: "weakref.WeakKeyDictionary[ScheduleTable, np.ndarray]" = weakref.WeakKeyDictionary()


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
        validate_table(table)


def _valid(table: ScheduleTable) -> bool:
    """True when ``table`` passes every rule of :func:`ppsweep.tables.validate.validate_table`."""
    if not array_path_handles(table) or table.kind.shape[0] != table.p or table.replica.shape != table.kind.shape:
        return False
    ops = table_ops(table)
    m, n_stages = table.m, table.n_stages
    # Every half of the kind its microbatch-stage runs (F; B, or I and W where split), as many
    # halves as the schedule's operations (no repeat: table_inputs below), each on its stage's worker.
    split = split_grid(table.split_backward, m, n_stages)
    replica_of = np.asarray(table.micro_replica, dtype=np.int64)
    placement = np.asarray(table.placement)
    n_halves = 0
    for k, j, s, present in half_arrays(ops.kind, ops.micro, ops.stage, ops.micro2, ops.stage2):
        k, j, s, worker = k[present], j[present], s[present], ops.worker[present]
        backward_split = split[j, s]
        allowed = (k == Kind.F) | np.where(backward_split, (k == Kind.I) | (k == Kind.W), k == Kind.B)
        if not allowed.all() or not (placement[replica_of[j], s] == worker).all():
            return False
        n_halves += len(k)
    if n_halves != 2 * m * n_stages + int(split.sum()):
        return False
    if not (ops.slots == kind_slots(ops.kind, table.f_slots, table.b_slots)).all():
        return False
    single = ops.kind != Kind.FB  # a pair's replica cell is not checked (the reference's rule)
    if not (table.replica[ops.worker[single], ops.start[single]] == replica_of[ops.micro[single]]).all():
        return False
    inputs = table_inputs(table, ops)
    if inputs is None:  # a repeat (then, with the count right, a missing one), or an input missing
        return False
    return not ((ops.end[inputs] > ops.start) & (inputs >= 0)).any()  # an input ending after its consumer starts
