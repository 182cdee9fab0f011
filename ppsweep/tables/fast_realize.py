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
import weakref
from dataclasses import dataclass
from typing import AbstractSet

import numba
import numpy as np

from ppsweep.last_value import LastValue
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
    split = split_pairs(split_backward)
    inside = (split[:, 0] >= 0) & (split[:, 0] < m) & (split[:, 1] >= 0) & (split[:, 1] < n_stages)
    grid[split[inside, 0], split[inside, 1]] = True
    return grid


def split_pairs(split_backward: AbstractSet[tuple[int, int]]) -> np.ndarray:
    """The ``(micro, stage)`` pairs of a set of split backwards as an ``(n, 2)`` array, in order
    (by micro, then stage): the set's content in a form that hashes and stores without Python objects."""
    pairs = np.array(list(split_backward), dtype=np.int64).reshape(-1, 2)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


@numba.njit(cache=True, nogil=True)
def _input_halves(kind, micro, stage, micro2, stage2, m, n_stages, grad, halves):
    """:func:`input_halves`' loop: fills ``halves`` (``(2, n)``, or ``(4, n)`` with pairs: each half's
    two inputs) and returns False where a half is listed twice or an input is not among them.

    Each operation is one half, a pair F&B (kind 5) two: an F(``micro``, ``stage``), then a
    B(``micro2``, ``stage2``). A half's id is ``((kind - 1)·m + micro)·S + stage``, and its inputs
    follow :func:`ppsweep.tables.ops.dependencies`: the upstream input first (F(j, s-1) for F; for B
    and I the input gradient of (j, s+1), from the kind ``grad[j, s]`` (I where the backward above is
    split, else B), or F(j, S-1) at the last stage; I(j, s) for W), then F(j, s) for B and I below the
    last stage."""
    n = kind.shape[0]
    n_parts = halves.shape[0] // 2
    block = m * n_stages  # ids of one kind
    position = np.full(4 * block + 1, -1, dtype=np.int64)  # id -> half; the last entry: no input
    half_kind = np.zeros((n_parts, n), dtype=np.int64)  # 0: no such half (the second of a non-pair)
    for h in range(n_parts):
        for i in range(n):
            paired = kind[i] == 5  # Kind.FB
            if h == 0:
                half_kind[h, i] = 1 if paired else kind[i]
            elif paired:
                half_kind[h, i] = 2
            if half_kind[h, i]:
                j, s = (micro2[i], stage2[i]) if h == 1 else (micro[i], stage[i])
                at = ((half_kind[h, i] - 1) * m + j) * n_stages + s
                if position[at] >= 0:
                    return False  # a half listed twice
                position[at] = 2 * i + h
    for h in range(n_parts):
        for i in range(n):
            k = half_kind[h, i]
            j, s = (micro2[i], stage2[i]) if h == 1 else (micro[i], stage[i])
            f_id = j * n_stages + s  # F(j, s)
            first = second = -1
            if k == 1 and s > 0:  # F: the forward below
                first = f_id - 1
            elif k == 2 or k == 3:  # B, I
                if s < n_stages - 1:
                    first = (grad[j, s] - 1) * block + f_id + 1
                    second = f_id
                else:
                    first = f_id
            elif k == 4:  # W: its I
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
    return None if halves is None else _positions(halves)


def _positions(halves: np.ndarray) -> np.ndarray:
    """:func:`input_positions` from :func:`input_halves`: the operation of each half, -1 where none."""
    return np.where(halves >= 0, halves // 2, -1)


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
        grad = np.ascontiguousarray(np.where(above, int(Kind.I), int(Kind.B)), dtype=np.int64)  # C order, as above: one compile
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
    """The operations of ``order`` as arrays (:class:`_Order`), read once (:func:`_read_once`)."""
    return _read_once(order)[0]


def _read_once(order: ScheduleOrder) -> tuple[_Order, bool]:
    """``order``'s arrays and :func:`order_handled`'s answer; the last order's are kept (per thread),
    so that :func:`order_handled`, then :func:`realize_fast`, read and check it once."""
    read = _LAST_ORDER.get((order,))
    if read is None:
        ops = _read_order(order)
        handled = len(ops.kind) > 0 and well_formed(ops.kind, ops.micro, ops.stage, order.m, order.n_stages, ops.micro2, ops.stage2)
        read = _LAST_ORDER.put((order,), (), (ops, handled))
    return read


#: The last order read by :func:`_read_once`: its arrays and whether they are well formed, per thread.
_LAST_ORDER = LastValue()


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
    F, B, I, W (F&B with its halves), each half in range. Others go to the reference. The answer is
    kept with the order's arrays (:func:`_read_once`: the choice of path asks, then :func:`realize_fast`)."""
    return _read_once(order)[1]


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
    halves = input_halves(ops.kind, ops.micro, ops.stage, m, n_stages, order.split_backward, ops.micro2, ops.stage2)
    if halves is None:  # an operation listed twice, or an input missing (the reference reports the deadlock)
        return realize(order, f_slots, b_slots)
    inputs = _positions(halves)
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
    _HALVES[table] = halves
    _HANDLED[table] = True  # array_path_handles' answer: these operations, well formed (order_handled)
    return table


def _asap_starts(lengths: np.ndarray, dep_pos: np.ndarray, slots: np.ndarray) -> np.ndarray | None:
    """First slot of every operation (index into the order), or None on a deadlock.

    An operation starts at ``max(its worker's previous operation's end, its inputs' ends)``: a
    longest path through the order's dependency graph, placed in one compiled pass
    (:func:`_longest_paths`).

    Args:
      lengths: ``(p,)`` operations of each worker.
      dep_pos: ``(k, n)`` index of each input in the order, ``n`` where there is none (``k = 4``
        with pairs F&B).
      slots: ``(n,)`` length of each operation.
    """
    start = np.zeros(len(slots), dtype=np.int64)
    arrays = (np.ascontiguousarray(a, dtype=np.int64) for a in (lengths, dep_pos, slots))
    placed = compiled_unless_small(_longest_paths, len(slots))(*arrays, start)
    return start if placed else None


@numba.njit(cache=True, nogil=True)
def _longest_paths(lengths, dep_pos, slots, start):
    """:func:`_asap_starts`' pass: operations are placed once everything before them is (their
    worker's previous operation and their inputs: Kahn's order), each at the latest end among
    those; ``start`` receives the slots. Returns False where some operations can never be placed
    (the order deadlocks)."""
    k, n = dep_pos.shape
    waiting = np.zeros(n, dtype=np.int64)  # what each operation still waits for
    first = np.zeros(n + 1, dtype=np.int64)  # operations reading each one's output: users[first[i]:first[i + 1]]
    for r in range(k):
        for i in range(n):
            if dep_pos[r, i] < n:
                first[dep_pos[r, i] + 1] += 1
                waiting[i] += 1
    for i in range(n):
        first[i + 1] += first[i]
    users = np.empty(first[n], dtype=np.int64)
    filled = first[:n].copy()
    for r in range(k):
        for i in range(n):
            d = dep_pos[r, i]
            if d < n:
                users[filled[d]] = i
                filled[d] += 1
    last = np.zeros(n, dtype=np.bool_)  # the last operation of its worker (no successor there)
    at = 0
    for w in range(lengths.shape[0]):
        for i in range(at + 1, at + lengths[w]):
            waiting[i] += 1  # its worker's previous operation
        at += lengths[w]
        if lengths[w] > 0:
            last[at - 1] = True
    ready = np.empty(n, dtype=np.int64)  # a stack of operations with nothing left to wait for
    top = 0
    for i in range(n):
        start[i] = 0
        if waiting[i] == 0:
            ready[top] = i
            top += 1
    placed = 0
    while top > 0:
        top -= 1
        i = ready[top]
        placed += 1
        end = start[i] + slots[i]
        for u in range(first[i], first[i + 1]):
            j = users[u]
            start[j] = max(start[j], end)
            waiting[j] -= 1
            if waiting[j] == 0:
                ready[top] = j
                top += 1
        if not last[i]:
            j = i + 1
            start[j] = max(start[j], end)
            waiting[j] -= 1
            if waiting[j] == 0:
                ready[top] = j
                top += 1
    return placed == n


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

#: The :func:`input_halves` of the operations of tables :func:`realize_fast` built (in :func:`table_ops`' order), likewise.
_HALVES: "weakref.WeakKeyDictionary[ScheduleTable, np.ndarray]" = weakref.WeakKeyDictionary()


def taken_halves(table: ScheduleTable, order: np.ndarray) -> np.ndarray | None:
    """:func:`input_halves` of ``table_ops(table).taken(order)`` from those :func:`realize_fast` found
    when it built ``table`` (each half renamed to its place in ``order``), or None where it did not
    build it (a table read from the cache, or realized by the reference).

    Args:
      table: the table.
      order: ``(n,)`` a permutation of its operations (:func:`table_ops`' order).
    """
    known = _HALVES.get(table)
    if known is None:
        return None
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    taken = known[:, order]
    return np.where(taken >= 0, 2 * place[taken >> 1] + (taken & 1), -1)


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
    # As many halves as the schedule's operations (every F; B, or I and W where split), each once
    # (table_inputs below), each of the kind its microbatch-stage runs on its stage's worker (_ops_valid).
    split = split_grid(table.split_backward, m, n_stages)
    n_halves = len(ops.kind) + (int((ops.kind == Kind.FB).sum()) if ops.has_pairs else 0)
    if n_halves != 2 * m * n_stages + int(split.sum()):
        return False
    if not (ops.slots == kind_slots(ops.kind, table.f_slots, table.b_slots)).all():
        return False
    inputs = table_inputs(table, ops)
    if inputs is None:  # a repeat (then, with the count right, a missing one), or an input missing
        return False
    replica_of, placement = np.asarray(table.micro_replica, dtype=np.int64), np.asarray(table.placement, dtype=np.int64)
    if (replica_of.shape != (m,) or placement.ndim != 2 or placement.shape[1] != n_stages
            or not ((replica_of >= 0) & (replica_of < placement.shape[0])).all()):
        return False  # indices the compiled pass could not read (it checks no bounds): the reference decides
    no_pair = np.zeros(0, dtype=np.int64)
    arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (
        ops.kind, ops.micro, ops.stage, ops.micro2 if ops.has_pairs else no_pair, ops.stage2 if ops.has_pairs else no_pair,
        ops.worker, ops.start, ops.slots, replica_of, placement, table.replica, inputs)]
    return bool(compiled_unless_small(_ops_valid, len(ops.kind))(*arrays, split))


#: The kinds' codes as plain integers, for the compiled checks.
_F, _B, _I, _W, _FB = int(Kind.F), int(Kind.B), int(Kind.I), int(Kind.W), int(Kind.FB)


@numba.njit(cache=True, nogil=True)
def _ops_valid(kind, micro, stage, micro2, stage2, worker, start, slots, replica_of, placement, replica, inputs, split):
    """:func:`_valid`'s rules over the operations, in one pass each: every half is of the kind its
    microbatch-stage runs (F; I or W where ``split``, else B) on its stage's worker
    (``placement[replica_of[micro], stage]``); an operation's first cell names its microbatch's replica
    (not a pair's: the reference's rule); and no input (``inputs``, :func:`table_inputs`) ends after
    its consumer starts. ``micro2``, ``stage2``: a pair's backward half (empty where the table has no pair)."""
    pairs = micro2.shape[0] > 0
    for i in range(kind.shape[0]):
        k = kind[i]
        for half in range(2 if pairs and k == _FB else 1):  # a pair: its forward half, then a B
            if half == 0:
                half_kind, j, s = (_F if k == _FB else k), micro[i], stage[i]
            else:
                half_kind, j, s = _B, micro2[i], stage2[i]
            if split[j, s]:
                allowed = half_kind == _F or half_kind == _I or half_kind == _W
            else:
                allowed = half_kind == _F or half_kind == _B
            if not allowed or placement[replica_of[j], s] != worker[i]:
                return False
        if k != _FB and replica[worker[i], start[i]] != replica_of[micro[i]]:
            return False
    for r in range(inputs.shape[0]):
        for i in range(inputs.shape[1]):
            q = inputs[r, i]
            if q >= 0 and start[q] + slots[q] > start[i]:
                return False
    return True
