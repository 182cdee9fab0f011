"""Compile a schedule table into the static index arrays the engine scans (docs/contract.md §4).

Everything here depends on the table alone, never on the swept costs, so it is computed once
per table and shared by every point that uses it.

The engine walks the table's **waves**: the distinct slots where some operation starts. Within a
wave each worker starts at most one operation, and no operation depends on another of the same
wave (a producer ends at least one slot before its consumer starts), so a wave is one vectorized
step with one lane per worker. Inputs produced on the same worker are implied by the worker's
order; only cross-worker inputs travel, as messages, through a small set of **registers**: a
message's arrival time lives in a register from the wave that sends it to the last wave that
reads it, and registers are reused (interval colouring), so the carried state stays small.

**Overlapped pairs F&B** are lowered into four steps of the pair's worker, in four sub-waves of
the pair's start slot (waves are ordered by ``(slot, sub-wave)``): a zero-length step that reads
the forward half's input, one that reads the backward half's input and runs the forward part
(``(1 - fb_overlap)·t_f``, duration row ``PAIR_F``), one that runs the backward half and sends the
first output, and a zero-length one that sends the second (outputs in destination-worker order,
as the reference sends them). The pair thus starts when both inputs have arrived, lasts
``(1 - fb_overlap)·t_f + t_b`` and sends both outputs at its end; in ``blocking`` the second
message leaves when the first arrives. Scan and envelope need nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppsweep.tables.ops import Kind, Op, dependencies, frees_activation, halves
from ppsweep.tables.table import PlacedOp, ScheduleTable

#: Order of the per-kind rows of the duration table: row = KIND_ROW[kind] * S + stage. Row block
#: 4 is the forward part of an overlapped pair (``PAIR_F``); one last row, ``5·S``, is always 0.
KIND_ROW = {Kind.F: 0, Kind.B: 1, Kind.I: 2, Kind.W: 3}
PAIR_F = 4


def n_duration_rows(n_stages: int) -> int:
    """Rows of the duration table: F, B, I, W and the pair's forward part per stage, then a zero row."""
    return 5 * n_stages + 1


def compute_time(program: "Program", durations: np.ndarray, t_opt: np.ndarray | float) -> np.ndarray:
    """A step's compute time: every operation's duration (``durations``, one row per duration row,
    :func:`n_duration_rows`; a point's numbers or the envelope's vectors) and every worker's
    optimizer update ``t_opt``."""
    counts = np.bincount(program.compute_rows, minlength=n_duration_rows(program.n_stages)).astype(float)
    return counts @ durations + program.p * t_opt


def zero_row(n_stages: int) -> int:
    """The duration row that is always 0 (the zero-length steps of a pair)."""
    return 5 * n_stages


@dataclass(frozen=True, eq=False)
class Program:
    """A table compiled for the engine.

    Lane arrays have shape ``(n_waves, p)``; a lane without an operation in a wave is inactive.

    Attributes:
      p: workers (lanes).
      n_stages: stages on a microbatch's path (durations are looked up per kind and stage).
      active: bool, the worker starts an operation in this wave.
      cost_row: row of the ``(5·S + 1, N)`` duration table for that operation (:func:`n_duration_rows`).
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
      n_ops: operations in the table (a pair counts once).
      compute_rows: duration row of every step (an operation, or a pair's four steps), for the
        total compute time.
      lane_end: ``(n_waves, p)`` slot where each lane's operation (a pair: the whole pair) ends in
        the table, the order in which the table sends messages (``ports``).
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
    lane_end: np.ndarray

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


def sync_rings(table: ScheduleTable, links: dict[tuple[int, int], int]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The synchronised stages (held by several workers), their holders and their ring's links.

    Args:
      table: the table.
      links: ``(src, dst) -> link`` of the messages; each ring hop's link is added where missing.

    Returns:
      ``(sync_stages, sync_holders, sync_ring_links)`` as in :class:`Program`.
    """
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
    return sync_stages, sync_holders, sync_ring


@dataclass(frozen=True)
class _Step:
    """One lane of one wave: an operation, or one of the four steps of a pair (module docstring)."""

    key: tuple[int, int]  # (start slot, sub-wave)
    worker: int
    end: int  # the slot its operation (the whole pair) ends
    row: int
    reads: Op | None = None  # the cross-worker input (an operation or a pair's half) it waits for
    sends: Op | None = None  # the operation (or half) whose output it sends
    frees: int | None = None  # the stage whose backward it ends (for synchronisations)


def _steps(item: PlacedOp, remote_deps: list[Op], outputs: list[Op], n_stages: int) -> list[_Step]:
    """The steps of one placed operation: one, or four for a pair.

    Args:
      item: the operation at its place.
      remote_deps: its inputs produced on other workers (a pair: the forward half's first).
      outputs: its results (a pair: halves) that go to other workers, in destination-worker order.
      n_stages: stages of the table.
    """
    op, w, t = item.op, item.worker, item.start
    if op.kind != Kind.FB:
        if len(remote_deps) > 1:
            raise NotImplementedError(f"{op} reads two inputs from other workers; only pairs F&B may")
        if len(outputs) > 1:
            raise NotImplementedError(f"{op} sends two outputs")
        frees = op.stage if frees_activation(op) else None
        return [_Step((t, 0), w, item.end, cost_row(op, n_stages), remote_deps[0] if remote_deps else None,
                      outputs[0] if outputs else None, frees)]
    forward, backward = halves(op)
    f_deps = [d for d in remote_deps if d in dependencies(forward, n_stages, False)]  # a forward's input
    b_deps = [d for d in remote_deps if d not in f_deps]
    zero = zero_row(n_stages)
    return [
        _Step((t, 0), w, item.end, zero, f_deps[0] if f_deps else None),
        _Step((t, 1), w, item.end, PAIR_F * n_stages + forward.stage, b_deps[0] if b_deps else None),
        _Step((t, 2), w, item.end, cost_row(backward, n_stages), None, outputs[0] if outputs else None, backward.stage),
        _Step((t, 3), w, item.end, zero, None, outputs[1] if len(outputs) > 1 else None),
    ]


def compile_program(table: ScheduleTable) -> Program:
    """Compile ``table`` into a :class:`Program` operation by operation (see the module docstring): the
    reference of :data:`ppsweep.engine.fast_program.PROGRAM`, which the engine calls (and
    :func:`ppsweep.engine.compiled.program_for` caches).

    Args:
      table: the table.

    Raises:
      NotImplementedError: if an operation's output must travel to two other workers.
    """
    placed = sorted(table.placed_ops(), key=lambda item: (item.start, item.worker))
    where: dict[Op, PlacedOp] = {half: item for item in placed for half in halves(item.op)}

    # Cross-worker consumers of each operation's (or half's) output.
    remote_consumers: dict[Op, list[PlacedOp]] = {}
    remote_deps: dict[int, list[Op]] = {}
    for i, item in enumerate(placed):
        remote_deps[i] = []
        for dep in dependencies(item.op, table.n_stages, table.split_backward):
            if where[dep].worker != item.worker:
                remote_consumers.setdefault(dep, []).append(item)
                remote_deps[i].append(dep)
    for op, consumers in remote_consumers.items():
        if len({c.worker for c in consumers}) > 1:
            raise NotImplementedError(f"{op} sends to several workers; the engine sends one message per operation")

    steps: list[_Step] = []
    for i, item in enumerate(placed):
        outputs = sorted((h for h in halves(item.op) if h in remote_consumers),
                         key=lambda h: (remote_consumers[h][0].worker, remote_consumers[h][0].start))
        steps += _steps(item, remote_deps[i], outputs, table.n_stages)
    steps.sort(key=lambda step: (step.key, step.worker))
    wave_of = {key: i for i, key in enumerate(sorted({step.key for step in steps}))}

    links: dict[tuple[int, int], int] = {}
    for step in steps:
        if step.sends is not None:
            links.setdefault((step.worker, remote_consumers[step.sends][0].worker), len(links))

    register_of, n_regs = _allocate_registers(steps, wave_of)

    def each(value) -> np.ndarray:
        return np.array([value(step) for step in steps], dtype=np.int64)

    arrays = StepArrays(
        wave=each(lambda step: wave_of[step.key]),
        worker=each(lambda step: step.worker),
        row=each(lambda step: step.row),
        end=each(lambda step: step.end),
        reads=each(lambda step: -1 if step.reads is None else register_of[step.reads]),
        sends=each(lambda step: -1 if step.sends is None else register_of[step.sends]),
        link=each(lambda step: -1 if step.sends is None else links[(step.worker, remote_consumers[step.sends][0].worker)]),
        frees=each(lambda step: -1 if step.frees is None else step.frees),
    )
    return assemble_program(table, arrays, n_regs, links, n_ops=len(placed))


@dataclass(frozen=True)
class StepArrays:
    """A compiled table step by step, in the engine's order (by wave, then worker): what
    :func:`compile_program` and :func:`ppsweep.engine.fast_program.compile_program_fast` both work out.

    Attributes:
      wave, worker: int arrays: the lane of each step (one operation, or one of a pair's four).
      row: its duration row (:func:`cost_row`).
      end: the slot where its operation (a pair: the whole pair) ends in the table.
      reads: register holding its cross-worker input's arrival, -1 where none.
      sends: register its outgoing message's arrival goes to, -1 where none.
      link: the directed link that message takes, -1 where none.
      frees: the stage whose activation it frees (a backward, or W of a split one), -1 where none.
    """

    wave: np.ndarray
    worker: np.ndarray
    row: np.ndarray
    end: np.ndarray
    reads: np.ndarray
    sends: np.ndarray
    link: np.ndarray
    frees: np.ndarray


def assemble_program(table: ScheduleTable, steps: StepArrays, n_regs: int, links: dict[tuple[int, int], int], n_ops: int) -> Program:
    """The :class:`Program` of ``table`` from its steps: lanes filled, synchronisations added.

    Args:
      table: the compiled table (its placement gives the synchronised stages).
      steps: every step, in the engine's order.
      n_regs: registers the messages use.
      links: ``(src, dst) -> link`` of the messages, numbered in the order they are first used;
        the synchronisation rings' links are added after them.
      n_ops: operations in the table (a pair counts once).

    Returns:
      The program.
    """
    p = table.p
    sync_stages, sync_holders, sync_ring = sync_rings(table, links)
    n_sync = len(sync_stages)
    sync_index = np.full(table.n_stages + 1, -1, dtype=np.int64)  # the last entry: frees nothing
    sync_index[np.array(sync_stages, dtype=np.int64)] = np.arange(n_sync)
    # A synchronisation is ready when the idealized table ends the last backward of its stage.
    ready = np.zeros(table.n_stages + 1, dtype=np.int64)
    freeing = np.flatnonzero(steps.frees >= 0)  # the steps that free a stage (np.maximum.at costs ~30 ns a step)
    np.maximum.at(ready, steps.frees[freeing], steps.end[freeing])
    sync_order = sorted(range(n_sync), key=lambda k: (int(ready[sync_stages[k]]), sync_stages[k]))

    shape = (int(steps.wave.max()) + 1 if len(steps.wave) else 0, p)
    lane = steps.wave * p + steps.worker  # flat index into a (waves, p) grid

    def lanes(fill: int, values: np.ndarray, dtype=np.int64) -> np.ndarray:
        grid = np.full(shape, fill, dtype=dtype)
        grid.reshape(-1)[lane] = values
        return grid

    synced = sync_index[steps.frees]
    return Program(
        p=p,
        n_stages=table.n_stages,
        active=lanes(False, True, dtype=bool),
        cost_row=lanes(0, steps.row),
        dep_reg=lanes(n_regs, np.where(steps.reads >= 0, steps.reads, n_regs)),  # zero_reg where none
        out_reg=lanes(n_regs + 1, np.where(steps.sends >= 0, steps.sends, n_regs + 1)),  # trash_reg
        link=lanes(len(links), np.where(steps.link >= 0, steps.link, len(links))),  # trash_link
        sync_slot=lanes(n_sync * p, np.where(synced >= 0, synced * p + steps.worker, n_sync * p)),  # trash_sync
        n_regs=n_regs,
        links=np.array(sorted(links, key=links.get), dtype=np.int64).reshape(-1, 2),
        sync_stages=np.array(sync_stages, dtype=np.int64),
        sync_holders=sync_holders,
        sync_ring_links=sync_ring,
        sync_order=np.array(sync_order, dtype=np.int64),
        n_ops=n_ops,
        compute_rows=steps.row,
        lane_end=lanes(0, steps.end),
    )


def _allocate_registers(steps: list[_Step], wave_of: dict[tuple[int, int], int]) -> tuple[dict[Op, int], int]:
    """Interval colouring: a message occupies a register from its sending wave to its last reading wave.

    Within a wave the engine reads every register before writing any, so a register whose last
    reader is in wave ``t`` can be written again in wave ``t``.
    """
    last_read: dict[Op, int] = {}
    for step in steps:
        if step.reads is not None:
            last_read[step.reads] = max(last_read.get(step.reads, -1), wave_of[step.key])
    free_after: list[int] = []  # last reading wave of the value each register holds
    register_of: dict[Op, int] = {}
    for step in steps:  # in wave order
        if step.sends is None:
            continue
        born, dies = wave_of[step.key], last_read[step.sends]
        reg = next((r for r, last in enumerate(free_after) if last <= born), len(free_after))
        if reg == len(free_after):
            free_after.append(dies)
        else:
            free_after[reg] = dies
        register_of[step.sends] = reg
    return register_of, len(free_after)
