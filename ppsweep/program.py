"""Compile a schedule table into the static index arrays the engine scans (SPEC section 4).

Everything here depends on the table alone, never on the swept costs, so it is computed once
per table and shared by every point that uses it.

The engine walks the table's **waves**: the distinct slots where some operation starts. Within a
wave each worker starts at most one operation, and no operation depends on another of the same
wave (a producer ends at least one slot before its consumer starts), so a wave is one vectorized
step with one lane per worker. Inputs produced on the same worker are implied by the worker's
order; only cross-worker inputs travel, as messages, through a small set of **registers**: a
message's arrival time lives in a register from the wave that sends it to the last wave that
reads it, and registers are reused (interval colouring), so the carried state stays small.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppsweep.ops import Kind, Op, dependencies
from ppsweep.table import PlacedOp, ScheduleTable

#: Order of the per-kind rows of the duration table: row = KIND_ROW[kind] * S + stage.
KIND_ROW = {Kind.F: 0, Kind.B: 1, Kind.I: 2, Kind.W: 3}


@dataclass(frozen=True, eq=False)
class Program:
    """A table compiled for the engine.

    Lane arrays have shape ``(n_waves, p)``; a lane without an operation in a wave is inactive.

    Attributes:
      p: workers (lanes).
      n_stages: stages on a microbatch's path (durations are looked up per kind and stage).
      active: bool, the worker starts an operation in this wave.
      cost_row: row of the ``(4·S, N)`` duration table for that operation.
      dep_reg: register holding its cross-worker input's arrival (``zero_reg`` if none).
      out_reg: register its outgoing message's arrival goes to (``trash_reg`` if it sends none).
      link: directed link its message uses (``trash_link`` if it sends none).
      sync_slot: slot in the synchronisation-readiness array it updates (``trash_sync``).
      n_regs: registers in use; ``zero_reg = n_regs`` always reads 0 and ``trash_reg = n_regs+1``
        absorbs writes of lanes that send nothing.
      links: ``(n_links, 2)`` (src, dst) workers of each directed link.
      sync_stages: stages that are synchronised (held by several workers), increasing.
      sync_holders: ``(n_sync, H)`` holders of each synchronised stage, increasing, -1 padded.
      sync_ring_links: ``(n_sync, H)`` link of each ring hop (holder i to holder i+1), -1 padded.
      sync_order: synchronisations in the order they take their links (``contention``): the order
        the idealized table makes them ready (end slot of their last backward), ties by stage.
      n_ops: operations in the table.
      compute_rows: ``(n_ops,)`` duration row of every operation (for total compute time).
    """

    p: int
    n_stages: int
    active: np.ndarray
    cost_row: np.ndarray
    dep_reg: np.ndarray
    out_reg: np.ndarray
    link: np.ndarray
    sync_slot: np.ndarray
    n_regs: int
    links: np.ndarray
    sync_stages: np.ndarray
    sync_holders: np.ndarray
    sync_ring_links: np.ndarray
    sync_order: np.ndarray
    n_ops: int
    compute_rows: np.ndarray

    @property
    def n_waves(self) -> int:
        """Steps of the scan."""
        return int(self.active.shape[0])

    @property
    def zero_reg(self) -> int:
        """Register that always holds time 0 (no cross-worker input)."""
        return self.n_regs

    @property
    def trash_reg(self) -> int:
        """Register that absorbs the writes of lanes sending nothing."""
        return self.n_regs + 1

    @property
    def n_links(self) -> int:
        """Directed links that carry messages or synchronisations."""
        return int(self.links.shape[0])

    @property
    def trash_link(self) -> int:
        """Link row absorbing the writes of lanes sending nothing."""
        return self.n_links

    @property
    def n_sync(self) -> int:
        """Synchronised stages."""
        return int(self.sync_stages.shape[0])

    @property
    def trash_sync(self) -> int:
        """Readiness slot absorbing the writes of operations no synchronisation waits for."""
        return self.n_sync * self.p


def cost_row(op: Op, n_stages: int) -> int:
    """Row of the duration table holding the compute time of ``op``."""
    return KIND_ROW[op.kind] * n_stages + op.stage


def stage_holders(table: ScheduleTable) -> list[list[int]]:
    """Workers holding each stage (over all replicas), increasing."""
    return [sorted({int(w) for w in table.placement[:, s]}) for s in range(table.n_stages)]


def program_for(table: ScheduleTable) -> Program:
    """The :class:`Program` of ``table``, compiled once per table object and cached with the rest of
    its compiled form (:func:`ppsweep.compiled.compiled_for`)."""
    from ppsweep.compiled import compiled_for

    return compiled_for(table).program


def compile_program(table: ScheduleTable) -> Program:
    """Compile ``table`` into a :class:`Program` (see the module docstring); :func:`program_for` caches it.

    Raises:
      NotImplementedError: if an operation's output must travel to two other workers.
    """
    placed = sorted(table.placed_ops(), key=lambda item: (item.start, item.worker))
    where: dict[Op, PlacedOp] = {item.op: item for item in placed}
    wave_of_slot = {slot: i for i, slot in enumerate(sorted({item.start for item in placed}))}

    # Cross-worker consumers of each operation's output.
    remote_consumers: dict[Op, list[PlacedOp]] = {}
    for item in placed:
        for dep in dependencies(item.op, table.n_stages, table.split_backward):
            if where[dep].worker != item.worker:
                remote_consumers.setdefault(dep, []).append(item)
    for op, consumers in remote_consumers.items():
        if len({c.worker for c in consumers}) > 1:
            raise NotImplementedError(f"{op} sends to several workers; the engine sends one message per operation")

    links: dict[tuple[int, int], int] = {}
    for item in placed:
        for consumer in remote_consumers.get(item.op, []):
            links.setdefault((item.worker, consumer.worker), len(links))

    holders = stage_holders(table)
    sync_stages = [s for s in range(table.n_stages) if len(holders[s]) > 1]
    width = max([len(holders[s]) for s in sync_stages], default=1)
    sync_holders = np.full((len(sync_stages), width), -1, dtype=np.int64)
    sync_ring = np.full((len(sync_stages), width), -1, dtype=np.int64)
    for k, s in enumerate(sync_stages):
        ring = holders[s]
        sync_holders[k, : len(ring)] = ring
        for i, src in enumerate(ring):
            dst = ring[(i + 1) % len(ring)]
            sync_ring[k, i] = links.setdefault((src, dst), len(links))
    sync_index = {s: k for k, s in enumerate(sync_stages)}
    freeing = Kind.W if table.split_backward else Kind.B
    ready_slot = {s: 0 for s in sync_stages}
    for item in placed:
        if item.op.kind == freeing and item.op.stage in ready_slot:
            ready_slot[item.op.stage] = max(ready_slot[item.op.stage], item.end)
    sync_order = sorted(range(len(sync_stages)), key=lambda k: (ready_slot[sync_stages[k]], sync_stages[k]))

    n_waves, p = len(wave_of_slot), table.p
    shape = (n_waves, p)
    active = np.zeros(shape, dtype=bool)
    rows = np.zeros(shape, dtype=np.int64)
    dep_reg = np.full(shape, -1, dtype=np.int64)
    out_reg = np.full(shape, -1, dtype=np.int64)
    link = np.full(shape, len(links), dtype=np.int64)
    sync_slot = np.full(shape, len(sync_stages) * p, dtype=np.int64)

    register_of, n_regs = _allocate_registers(placed, remote_consumers, wave_of_slot)
    for item in placed:
        lane = (wave_of_slot[item.start], item.worker)
        active[lane] = True
        rows[lane] = cost_row(item.op, table.n_stages)
        for dep in dependencies(item.op, table.n_stages, table.split_backward):
            if where[dep].worker != item.worker:
                dep_reg[lane] = register_of[dep]
        consumers = remote_consumers.get(item.op)
        if consumers:
            out_reg[lane] = register_of[item.op]
            link[lane] = links[(item.worker, consumers[0].worker)]
        if item.op.kind == freeing and item.op.stage in sync_index:
            sync_slot[lane] = sync_index[item.op.stage] * p + item.worker
    dep_reg[dep_reg < 0] = n_regs
    out_reg[out_reg < 0] = n_regs + 1
    return Program(
        p=p,
        n_stages=table.n_stages,
        active=active,
        cost_row=rows,
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
        n_ops=len(placed),
        compute_rows=np.array([cost_row(item.op, table.n_stages) for item in placed], dtype=np.int64),
    )


def _allocate_registers(
    placed: list[PlacedOp], remote_consumers: dict[Op, list[PlacedOp]], wave_of_slot: dict[int, int]
) -> tuple[dict[Op, int], int]:
    """Interval colouring: a message occupies a register from its sending wave to its last reading wave.

    Within a wave the engine reads every register before writing any, so a register whose last
    reader is in wave ``t`` can be written again in wave ``t``.
    """
    free_after: list[int] = []  # last reading wave of the value each register holds
    register_of: dict[Op, int] = {}
    for item in placed:  # in wave order
        consumers = remote_consumers.get(item.op)
        if not consumers:
            continue
        born = wave_of_slot[item.start]
        dies = max(wave_of_slot[c.start] for c in consumers)
        reg = next((r for r, last in enumerate(free_after) if last <= born), len(free_after))
        if reg == len(free_after):
            free_after.append(dies)
        else:
            free_after[reg] = dies
        register_of[item.op] = reg
    return register_of, len(free_after)
