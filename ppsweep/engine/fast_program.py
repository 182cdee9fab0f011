"""Compile a table into its :class:`~ppsweep.engine.program.Program` with array code.

:func:`ppsweep.engine.program.compile_program` is the reference: it walks the operations one at a
time. :func:`compile_program_fast` computes the same Program, every array equal, from the
table's operation arrays (:func:`ppsweep.tables.fast_realize.table_ops`): waves from the distinct start
slots (an F&B pair's four steps in sub-waves of its slot), cross-worker inputs from dependency
ids, links in the order the reference meets them, and registers by the same first-fit interval
colouring, one wave at a time (a compiled loop). Tables it does not handle (operations missing,
repeated or out of range; two remote inputs to one operation; an output sent to two workers)
are compiled by the reference, which raises where it cannot compile them.
"""

from __future__ import annotations

import numba
import numpy as np

from ppsweep.engine.program import KIND_ROW, PAIR_F, Program, StepArrays, assemble_program, compile_program
from ppsweep.implementations import Implementations
from ppsweep.lex_order import lex_order
from ppsweep.small_inputs import compiled_unless_small
from ppsweep.tables.fast_realize import OpArrays, array_path_handles, input_halves, table_ops, taken_halves
from ppsweep.tables.ops import Kind
from ppsweep.tables.table import ScheduleTable

#: ``KIND_ROW`` indexed by kind code.
_ROW_OF_KIND = np.zeros(max(int(k) for k in Kind) + 1, dtype=np.int64)
for _kind, _row in KIND_ROW.items():
    _ROW_OF_KIND[int(_kind)] = _row


def compile_program_fast(table: ScheduleTable) -> Program:
    """:func:`ppsweep.engine.program.compile_program` with array code: the same :class:`Program`, array for array.

    Args:
      table: the table to compile.

    Returns:
      The compiled program.

    Raises:
      NotImplementedError: if an operation's output must travel to two other workers (from the
        reference).
    """
    if not array_path_handles(table):
        return compile_program(table)
    ops = table_ops(table)
    m, n_stages = table.m, table.n_stages
    # The reference's order: by start slot, then worker (table_ops lists them worker by worker).
    order = np.argsort(ops.start, kind="stable")
    ops = ops.taken(order)
    halves = taken_halves(table, order)  # what building the table found, else found again
    if halves is None:
        halves = input_halves(ops.kind, ops.micro, ops.stage, m, n_stages, table.split_backward, ops.micro2, ops.stage2)
    if halves is None:  # an operation twice, or an input missing
        return compile_program(table)
    steps = _steps(ops, halves, n_stages, table.p)
    if steps is None:  # what the reference refuses (two remote inputs, an output to two workers) or reads otherwise
        return compile_program(table)
    return assemble_program(table, *steps, n_ops=len(ops))


def _steps(ops: OpArrays, halves: np.ndarray, n_stages: int, p: int) -> tuple[StepArrays, int, dict] | None:
    """The engine's steps of the operations ``ops`` (in the reference's order) whose inputs are the
    halves ``halves`` (:func:`ppsweep.tables.fast_realize.input_halves`): ``(steps, registers,
    links)``, or None where the reference must decide.

    A message is a half's output (``2·i`` operation ``i``, a pair's forward half; ``2·i + 1`` a
    pair's backward half) read on another worker. An operation is one step; a pair four, in
    sub-waves 0-3 of its start slot (:mod:`ppsweep.engine.program`): the forward half's input, the
    backward half's input and the forward part, the backward part and the first output, the second.
    """
    n = len(ops)
    pairs = ops.kind == Kind.FB
    halves = np.ascontiguousarray(halves, dtype=np.int64)
    reads = np.empty((2, n), dtype=np.int64)  # the remote input of each operation (a pair: of each half)
    out = np.empty((n, 2), dtype=np.int64)  # each operation's outputs in send order
    destination = np.empty(2 * n, dtype=np.int64)  # the worker that reads each message (-1: none)
    if not compiled_unless_small(_messages, n)(halves, ops.worker, ops.start, pairs, reads, out, destination):
        return None  # what the reference refuses (two remote inputs, an output to two workers) or reads otherwise

    # The steps: one per operation, four per pair (sub-waves 0-3 of its start slot).
    single_row = _ROW_OF_KIND[ops.kind] * n_stages + ops.stage
    frees_single = np.where((ops.kind == Kind.B) | (ops.kind == Kind.W), ops.stage, -1)
    if pairs.any():
        worker, start, end, sub, row, step_read, step_send, step_free = _pair_steps(
            ops, pairs, reads, out, single_row, frees_single, n_stages)
    else:  # one step per operation, already in the engine's order: by start slot, then worker
        worker, start, end, sub = ops.worker, ops.start, ops.end, np.zeros(n, dtype=np.int64)
        row, step_read, step_send, step_free = single_row, reads[0], out[:, 0], frees_single
    step_read, step_send = np.ascontiguousarray(step_read), np.ascontiguousarray(step_send)
    wave, link = np.empty(len(worker), dtype=np.int64), np.empty(len(worker), dtype=np.int64)
    pair_of_link, dies = np.empty(p * p, dtype=np.int64), np.empty(2 * n, dtype=np.int64)
    n_links = compiled_unless_small(_waves_and_links, len(worker))(
        np.ascontiguousarray(worker), start * 4 + sub, step_read, step_send, destination, p, wave, link, pair_of_link, dies)
    links = {(c // p, c % p): i for i, c in enumerate(pair_of_link[:n_links].tolist())}

    # Registers: first-fit interval colouring, senders in wave order.
    senders = np.flatnonzero(step_send >= 0)
    register, n_regs = _allocate_registers(wave[senders], dies[step_send[senders]])
    register_of = np.full(2 * n + 1, -1, dtype=np.int64)  # register_of[-1] = -1: no message
    register_of[step_send[senders]] = register
    steps = StepArrays(wave=wave, worker=worker, row=row, end=end, reads=register_of[step_read],
                       sends=register_of[step_send], link=link, frees=step_free)
    return steps, n_regs, links


@numba.njit(cache=True, nogil=True)
def _messages(halves, worker, start, pairs, reads, out, destination):
    """Each operation's remote inputs and outputs, or False where the reference must decide.

    Args:
      halves: ``(2, n)`` or, with pairs, ``(4, n)``: the half each input reads (``2·i + h``), -1: none;
        rows 0-1 an operation's own inputs (a pair: its forward half's), rows 2-3 a pair's backward half's.
      worker, start: ``(n,)`` each operation's worker and first slot; pairs: ``(n,)`` whether it is an F&B.
      reads: ``(2, n)`` receives the message each operation reads (row 1: a pair's backward half's), -1: none.
      out: ``(n, 2)`` receives each operation's messages in send order (-1: none): by destination
        worker, then by the start of their first reader (a single output first).
      destination: ``(2n,)`` receives the worker that reads each message, -1 where none does.

    Returns False for two remote inputs to one operation (a pair: to one of its halves), a remote
    input to a non-pair's backward half, a pair's backward half reading what its forward half
    reads, an output read on two workers, or a non-pair sending its second output.
    """
    n = worker.shape[0]
    rows = halves.shape[0]
    for i in range(n):
        for half in range(2):  # rows 0-1, then (pairs) rows 2-3
            found = -1
            if 2 * half < rows:
                for r in range(2 * half, 2 * half + 2):
                    h = halves[r, i]
                    if h >= 0 and worker[h >> 1] != worker[i]:
                        if found >= 0:
                            return False  # two remote inputs: the reference says which
                        found = h
            reads[half, i] = found
        if reads[1, i] >= 0 and (not pairs[i] or reads[1, i] == halves[0, i]):
            return False  # the reference's filter decides
    for c in range(2 * n):
        destination[c] = -1
    first_reader = np.full(2 * n, n, dtype=np.int64)
    for half in range(2):
        for i in range(n):
            c = reads[half, i]
            if c >= 0:
                if destination[c] >= 0 and destination[c] != worker[i]:
                    return False  # an output read on two workers
                destination[c] = worker[i]
                first_reader[c] = min(first_reader[c], i)
    for i in range(n):
        d0, d1 = destination[2 * i], destination[2 * i + 1]
        if d1 >= 0 and not pairs[i]:
            return False
        out[i, 0] = 2 * i if d0 >= 0 else -1
        out[i, 1] = 2 * i + 1 if d1 >= 0 else -1
        if d0 >= 0 and d1 >= 0:
            s0, s1 = start[first_reader[2 * i]], start[first_reader[2 * i + 1]]
            if d1 < d0 or (d1 == d0 and s1 < s0):
                out[i, 0], out[i, 1] = 2 * i + 1, 2 * i
        elif d1 >= 0:  # a single output goes first
            out[i, 0], out[i, 1] = 2 * i + 1, -1
    return True


@numba.njit(cache=True, nogil=True)
def _waves_and_links(worker, key, step_read, step_send, destination, p, wave, link, pair_of_link, dies):
    """Each step's wave (a new one where ``key``, its start slot and sub-wave, changes), the link its
    message takes (numbered in the order the senders first use them; -1: it sends none) and the last
    wave reading each message (``dies``, -1: none); fills ``pair_of_link`` with each link's
    ``src·p + dst`` and returns the number of links."""
    for c in range(dies.shape[0]):
        dies[c] = -1
    link_of_pair = np.full(p * p, -1, dtype=np.int64)
    n_links = 0
    w = 0
    for s in range(worker.shape[0]):
        if s > 0 and key[s] != key[s - 1]:
            w += 1
        wave[s] = w
        if step_read[s] >= 0:
            dies[step_read[s]] = max(dies[step_read[s]], w)
        link[s] = -1
        if step_send[s] >= 0:
            code = worker[s] * p + destination[step_send[s]]
            if link_of_pair[code] < 0:
                link_of_pair[code] = n_links
                pair_of_link[n_links] = code
                n_links += 1
            link[s] = link_of_pair[code]
    return n_links


def _pair_steps(ops: OpArrays, pairs: np.ndarray, reads: np.ndarray, out: np.ndarray, single_row: np.ndarray,
                frees_single: np.ndarray, n_stages: int) -> tuple[np.ndarray, ...]:
    """The steps of a table with pairs, in the engine's order (start slot, sub-wave, worker): each
    array's value per step (worker, start, end, sub-wave, duration row, register read, message
    sent, synchronised stage freed). A pair runs four steps (module :mod:`ppsweep.engine.program`):
    its forward half's input, its backward half's input and the forward part, the backward part
    and its first output, its second output; any other operation one."""
    n = len(ops)
    zero = 5 * n_stages
    none = np.full(n, -1)
    stage2 = np.where(pairs, ops.stage2, 0)
    rows = [np.where(pairs, zero, single_row), np.where(pairs, PAIR_F * n_stages + ops.stage, -1),
            np.where(pairs, KIND_ROW[Kind.B] * n_stages + stage2, -1), np.where(pairs, zero, -1)]
    step_reads = [reads[0], reads[1], none, none]
    step_sends = [np.where(pairs, -1, out[:, 0]), none, np.where(pairs, out[:, 0], -1), np.where(pairs, out[:, 1], -1)]
    step_frees = [np.where(pairs, -1, frees_single), none, np.where(pairs, stage2, -1), none]
    present = [np.ones(n, dtype=bool)] + [pairs] * 3
    sub = np.concatenate([np.full(int(p.sum()), k) for k, p in enumerate(present)])
    take = lambda arrays: np.concatenate([a[p] for a, p in zip(arrays, present)])  # noqa: E731
    op_of = take([np.arange(n)] * 4)
    worker, start, end = ops.worker[op_of], ops.start[op_of], ops.end[op_of]
    order = lex_order(worker, sub, start)  # by (start slot, sub-wave), then worker
    return tuple(a[order] for a in (worker, start, end, sub, take(rows), take(step_reads), take(step_sends), take(step_frees)))


def _allocate_registers(born: np.ndarray, dies: np.ndarray) -> tuple[np.ndarray, int]:
    """First-fit interval colouring, as :func:`ppsweep.engine.program._allocate_registers` does it.

    A message holds its register from its sending wave ``born`` to its last reading wave ``dies``;
    the reference gives each message, in order, the lowest register whose value's last reader is
    in a wave ``<= born``. ``born`` is non-decreasing, so a register free for one message stays
    free until it is given again: all messages of one wave take the lowest free registers in
    order, new ones where too few are free.

    Args:
      born: ``(k,)`` sending wave of each message, non-decreasing.
      dies: ``(k,)`` last reading wave of each message.

    Returns:
      ``(register of each message, registers used)``.
    """
    register = np.empty(len(born), dtype=np.int64)
    if len(born) == 0:
        return register, 0
    compiled_unless_small(_first_fit, len(born))(np.ascontiguousarray(born, dtype=np.int64), np.ascontiguousarray(dies, dtype=np.int64), register)
    return register, int(register.max()) + 1


@numba.njit(cache=True, nogil=True)
def _first_fit(born: np.ndarray, dies: np.ndarray, register: np.ndarray) -> None:
    """:func:`_allocate_registers`' loop: each wave's messages, in order, take the lowest registers
    free at the wave's start (registers not used yet count as free since wave -1; there are at most
    as many registers as messages)."""
    n = born.shape[0]
    free_after = np.full(n + 1, -1, dtype=np.int64)  # the last reading wave of each register's value
    lo = 0
    while lo < n:
        wave, hi = born[lo], lo
        while hi < n and born[hi] == wave:
            hi += 1
        r = 0
        for k in range(lo, hi):
            while free_after[r] > wave:
                r += 1
            register[k] = r
            r += 1
        for k in range(lo, hi):
            free_after[register[k]] = dies[k]
        lo = hi


#: A table's :class:`Program`: the reference (:func:`ppsweep.engine.program.compile_program`) and this
#: module's array code (``array``), which runs where :func:`ppsweep.tables.fast_realize.array_path_handles`
#: holds. ``PROGRAM(table)`` compiles; ``PROGRAM(table, implementation="reference")`` walks the operations.
PROGRAM = Implementations("compile_program", compile_program, array_path_handles)
PROGRAM.register("array", compile_program_fast)
