"""Compile a table into its :class:`~ppsweep.engine.program.Program` with array code.

:func:`ppsweep.engine.program.compile_program` is the reference: it walks the operations one at a
time. :func:`compile_program_fast` computes the same Program, every array equal, from the
table's operation arrays (:func:`ppsweep.tables.fast_realize.table_ops`): waves from the distinct start
slots, cross-worker inputs from dependency ids, links in the order the reference meets them,
and registers by the same first-fit interval colouring, one wave at a time. Tables it does not
handle (kinds outside F, B, I, W; operations missing, repeated or out of range; an output sent
to two workers) are compiled by the reference, which raises where it cannot compile them.
"""

from __future__ import annotations

import numpy as np

from ppsweep.tables.fast_realize import OpArrays, table_inputs, table_ops, well_formed
from ppsweep.tables.ops import Kind
from ppsweep.engine.program import KIND_ROW, Program, StepArrays, assemble_program, compile_program
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
    ops = table_ops(table)
    m, n_stages, p = table.m, table.n_stages, table.p
    if ops is None or len(ops) == 0 or not well_formed(ops.kind, ops.micro, ops.stage, m, n_stages):
        return compile_program(table, fast=False)
    inputs = table_inputs(table, ops)
    if inputs is None:  # an operation twice, or an input missing
        return compile_program(table, fast=False)
    # The reference's order: by start slot, then worker (table_ops lists them worker by worker).
    order = np.argsort(ops.start, kind="stable")
    ops = OpArrays(*(getattr(ops, f)[order] for f in ("worker", "start", "slots", "kind", "micro", "stage")))
    n = len(ops)
    moved_to = np.empty(n + 1, dtype=np.int64)
    moved_to[order] = np.arange(n)
    moved_to[n] = -1  # an input of -1 (none) reads this entry
    dep_pos = moved_to[inputs[:, order]]

    wave = np.concatenate([[0], np.cumsum(ops.start[1:] != ops.start[:-1])])  # waves: the distinct start slots

    # Cross-worker inputs: at most one per operation (the reference refuses two).
    remote = [(d >= 0) & (ops.worker[d] != ops.worker) for d in dep_pos]
    if (remote[0] & remote[1]).any():
        return compile_program(table, fast=False)
    remote_input = np.where(remote[0], dep_pos[0], np.where(remote[1], dep_pos[1], -1))
    consumer = np.flatnonzero(remote_input >= 0)
    producer = remote_input[consumer]
    destination = np.full(n, -1, dtype=np.int64)
    destination[producer] = ops.worker[consumer]
    if (destination[producer] != ops.worker[consumer]).any():
        return compile_program(table, fast=False)  # an output to two workers: the reference raises NotImplementedError
    senders = np.flatnonzero(destination >= 0)  # in the reference's order

    # Links: numbered in the order the senders first use them, then the synchronisation rings'.
    pair = ops.worker[senders] * p + destination[senders]
    first_use = np.full(p * p, len(senders), dtype=np.int64)
    np.minimum.at(first_use, pair, np.arange(len(senders)))
    used = np.flatnonzero(first_use < len(senders))
    used = used[np.argsort(first_use[used])]  # (src, dst) codes in link order
    link_of_pair = np.full(p * p, -1, dtype=np.int64)
    link_of_pair[used] = np.arange(len(used))
    links: dict[tuple[int, int], int] = {(c // p, c % p): i for i, c in enumerate(used.tolist())}
    sender_link = link_of_pair[pair]

    # Registers: first-fit interval colouring, senders in wave order.
    dies = np.full(n, -1, dtype=np.int64)
    np.maximum.at(dies, producer, wave[consumer])
    register, n_regs = _allocate_registers(wave[senders], dies[senders])
    register_of = np.full(n + 1, -1, dtype=np.int64)  # register_of[-1] = -1: no remote input
    register_of[senders] = register
    link = np.full(n, -1, dtype=np.int64)
    link[senders] = sender_link
    frees = (ops.kind == Kind.B) | (ops.kind == Kind.W)  # ppsweep.tables.ops.frees_activation
    steps = StepArrays(
        wave=wave,
        worker=ops.worker,
        row=_ROW_OF_KIND[ops.kind] * n_stages + ops.stage,
        end=ops.end,
        reads=register_of[remote_input],
        sends=register_of[:n],
        link=link,
        frees=np.where(frees, ops.stage, -1),
    )
    return assemble_program(table, steps, n_regs, links, n_ops=n)


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
    # Registers not used yet count as free since wave -1: the lowest free ones are then the
    # reference's choice, reused or new. The array grows when a wave finds too few free.
    free_after = np.full(64, -1, dtype=np.int64)
    bounds = (np.flatnonzero(np.diff(born)) + 1).tolist()
    for lo, hi, wave in zip([0] + bounds, bounds + [len(born)], born[[0] + bounds].tolist()):
        free = (free_after <= wave).nonzero()[0]
        while len(free) < hi - lo:
            free_after = np.concatenate([free_after, np.full(len(free_after), -1, dtype=np.int64)])
            free = (free_after <= wave).nonzero()[0]
        chosen = free[: hi - lo]
        free_after[chosen] = dies[lo:hi]
        register[lo:hi] = chosen
    return register, int(register.max()) + 1
