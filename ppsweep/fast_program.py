"""Compile a table into its :class:`~ppsweep.program.Program` with array code.

:func:`ppsweep.program.compile_program` is the reference: it walks the operations one at a
time. :func:`compile_program_fast` computes the same Program, every array equal, from the
table's operation arrays (:func:`ppsweep.fast_realize.table_ops`): waves from the distinct start
slots, cross-worker inputs from dependency ids, links in the order the reference meets them,
and registers by the same first-fit interval colouring, one wave at a time. Tables it does not
handle (kinds outside F, B, I, W; operations missing, repeated or out of range; an output sent
to two workers) are compiled by the reference, which raises where it cannot compile them.
"""

from __future__ import annotations

import numpy as np

from ppsweep.fast_realize import FAST_KINDS, OpArrays, _plain_split, dependency_ids, op_index, table_ops
from ppsweep.ops import Kind
from ppsweep.program import KIND_ROW, Program, compile_program, sync_rings
from ppsweep.table import ScheduleTable

#: ``KIND_ROW`` indexed by kind code.
_ROW_OF_KIND = np.zeros(max(int(k) for k in Kind) + 1, dtype=np.int64)
for _kind, _row in KIND_ROW.items():
    _ROW_OF_KIND[int(_kind)] = _row


def compile_program_fast(table: ScheduleTable) -> Program:
    """:func:`ppsweep.program.compile_program` with array code: the same :class:`Program`, array for array.

    Args:
      table: the table to compile.

    Returns:
      The compiled program.

    Raises:
      NotImplementedError: if an operation's output must travel to two other workers (from the
        reference).
    """
    ops = table_ops(table)
    if ops is None or len(ops) == 0 or not _plain_split(table.split_backward):
        return compile_program(table, fast=False)
    m, n_stages, p = table.m, table.n_stages, table.p
    if not np.isin(ops.kind, np.array([int(k) for k in FAST_KINDS])).all():
        return compile_program(table, fast=False)
    if (ops.micro < 0).any() or (ops.micro >= m).any() or (ops.stage < 0).any() or (ops.stage >= n_stages).any():
        return compile_program(table, fast=False)
    # The reference's order: by start slot, then worker.
    order = np.lexsort((ops.worker, ops.start))
    ops = OpArrays(*(getattr(ops, f)[order] for f in ("worker", "start", "slots", "kind", "micro", "stage")))
    n = len(ops)
    ids = op_index(ops.kind, ops.micro, ops.stage, m, n_stages)
    position = np.full(4 * m * n_stages + 1, -1, dtype=np.int64)
    position[ids] = np.arange(n)
    if np.count_nonzero(position[:-1] >= 0) != n:
        return compile_program(table, fast=False)
    deps = dependency_ids(ops.kind, ops.micro, ops.stage, m, n_stages, table.split_backward)
    dep_pos = [np.where(d >= 0, position[np.where(d >= 0, d, -1)], -2) for d in deps]
    if any((d == -1).any() for d in dep_pos):  # an input missing from the table
        return compile_program(table, fast=False)

    starts, wave = np.unique(ops.start, return_inverse=True)
    wave = wave.reshape(-1).astype(np.int64)
    n_waves = len(starts)

    # Cross-worker inputs: (consumer, producer) pairs, in the reference's order (consumer, then input).
    consumer_list, producer_list = [], []
    remote_dep = []
    for d in dep_pos:
        has = d >= 0
        remote = np.zeros(n, dtype=bool)
        remote[has] = ops.worker[d[has]] != ops.worker[has]
        remote_dep.append(remote)
        consumer_list.append(np.flatnonzero(remote))
        producer_list.append(d[remote])
    if (remote_dep[0] & remote_dep[1]).any():  # two inputs from other workers: the reference refuses it
        return compile_program(table, fast=False)
    consumer = np.concatenate(consumer_list)
    producer = np.concatenate(producer_list)
    dst_lo = np.full(n, p, dtype=np.int64)
    dst_hi = np.full(n, -1, dtype=np.int64)
    np.minimum.at(dst_lo, producer, ops.worker[consumer])
    np.maximum.at(dst_hi, producer, ops.worker[consumer])
    sends = dst_hi >= 0
    if (dst_lo[sends] != dst_hi[sends]).any():
        return compile_program(table, fast=False)  # the reference raises NotImplementedError naming the operation
    senders = np.flatnonzero(sends)  # in the reference's order

    # Links: numbered in the order the senders first use them, then the synchronisation rings'.
    pair = ops.worker[senders] * p + dst_hi[senders]
    codes, first_use = np.unique(pair, return_index=True)
    by_first = np.argsort(first_use, kind="stable")
    link_of_code = np.empty(len(codes), dtype=np.int64)
    link_of_code[by_first] = np.arange(len(codes))
    links: dict[tuple[int, int], int] = {
        (int(c) // p, int(c) % p): int(link_of_code[i]) for i, c in enumerate(codes)
    }
    sender_link = link_of_code[np.searchsorted(codes, pair)]

    sync_stages, sync_holders, sync_ring = sync_rings(table, links)
    sync_index = np.full(n_stages, -1, dtype=np.int64)
    sync_index[np.array(sync_stages, dtype=np.int64)] = np.arange(len(sync_stages))
    ready = np.zeros(n_stages, dtype=np.int64)
    frees = (ops.kind == Kind.B) | (ops.kind == Kind.W)  # ppsweep.ops.frees_activation
    np.maximum.at(ready, ops.stage[frees], ops.end[frees])
    sync_order = sorted(range(len(sync_stages)), key=lambda k: (int(ready[sync_stages[k]]), sync_stages[k]))

    # Registers: first-fit interval colouring, senders in wave order.
    dies = np.full(n, -1, dtype=np.int64)
    np.maximum.at(dies, producer, wave[consumer])
    register, n_regs = _allocate_registers(wave[senders], dies[senders])
    register_of = np.full(n, -1, dtype=np.int64)
    register_of[senders] = register

    shape = (n_waves, p)
    lane = (wave, ops.worker)
    rows = _ROW_OF_KIND[ops.kind] * n_stages + ops.stage
    active = np.zeros(shape, dtype=bool)
    active[lane] = True
    cost_rows = np.zeros(shape, dtype=np.int64)
    cost_rows[lane] = rows
    dep_reg = np.full(shape, -1, dtype=np.int64)
    for d, remote in zip(dep_pos, remote_dep):  # a later remote input overwrites an earlier one
        dep_reg[wave[remote], ops.worker[remote]] = register_of[d[remote]]
    out_reg = np.full(shape, -1, dtype=np.int64)
    out_reg[wave[senders], ops.worker[senders]] = register
    link = np.full(shape, len(links), dtype=np.int64)
    link[wave[senders], ops.worker[senders]] = sender_link
    sync_slot = np.full(shape, len(sync_stages) * p, dtype=np.int64)
    synced = frees & (sync_index[ops.stage] >= 0)
    sync_slot[wave[synced], ops.worker[synced]] = sync_index[ops.stage[synced]] * p + ops.worker[synced]
    dep_reg[dep_reg < 0] = n_regs
    out_reg[out_reg < 0] = n_regs + 1
    lane_end = np.zeros(shape, dtype=np.int64)
    lane_end[lane] = ops.end
    return Program(
        p=p,
        n_stages=n_stages,
        active=active,
        cost_row=cost_rows,
        dep_reg=dep_reg,
        out_reg=out_reg,
        link=link,
        sync_slot=sync_slot,
        n_regs=n_regs,
        links=np.array(sorted(links, key=links.get), dtype=np.int64).reshape(-1, 2),
        sync_stages=np.array(sync_stages, dtype=np.int64),
        sync_holders=sync_holders,
        sync_ring_links=sync_ring,
        sync_order=np.array(sync_order, dtype=np.int64),
        n_ops=n,
        compute_rows=rows,
        lane_end=lane_end,
    )


def _allocate_registers(born: np.ndarray, dies: np.ndarray) -> tuple[np.ndarray, int]:
    """First-fit interval colouring, as :func:`ppsweep.program._allocate_registers` does it.

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
    free_after = np.empty(0, dtype=np.int64)
    if len(born) == 0:
        return register, 0
    bounds = np.flatnonzero(np.diff(born)) + 1
    for lo, hi in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(born)]])):
        count = hi - lo
        free = np.flatnonzero(free_after <= born[lo])
        if len(free) < count:
            new = np.arange(len(free_after), len(free_after) + count - len(free), dtype=np.int64)
            free_after = np.concatenate([free_after, np.empty(len(new), dtype=np.int64)])
            free = np.concatenate([free, new])
        chosen = free[:count]
        free_after[chosen] = dies[lo:hi]
        register[lo:hi] = chosen
    return register, len(free_after)
