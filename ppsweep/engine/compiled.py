"""A table compiled for the engine, with everything derived from it, under one cache.

:func:`compiled_for` gives the :class:`CompiledTable` of a table: its :class:`~ppsweep.engine.program.Program`
(compiled once), and, built on first use and kept with it, the scan's padded lanes of each
communication mode, the tiers of each placement of its workers on nodes (:mod:`ppsweep.engine.tiers`)
and the envelopes of each (mode, feature directions, cap, tiers). The program, the
envelopes and the compiled scan's steps are also kept on disk across runs
(:mod:`ppsweep.engine.envelope_cache`). The cache holds tables weakly: a table's compiled form
goes when the table does.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np

from ppsweep.engine.comm import Routing, route
from ppsweep.engine import envelope as _envelope
from ppsweep.engine import envelope_cache as _envelope_cache
from ppsweep.engine.fast_program import PROGRAM
from ppsweep.engine.program import Program
from ppsweep.engine.tiers import Tiers, check_worker_node, tiers_for
from ppsweep.tables.digest import table_digest
from ppsweep.tables.table import ScheduleTable


#: Waves one compiled scan call runs: a table's lanes are cut into blocks of this many waves
#: (the last padded with empty waves, which are not run), so one compiled kernel serves every
#: table of the same width (:class:`WaveShape`) whatever its number of waves. A multiple of
#: :data:`NOISY_BLOCK`.
WAVE_BLOCK = 64

#: Waves of a noisy scan whose products (durations and message times with their factors) are
#: computed at once, ``3 × (block, p, tile)`` (a divisor of :data:`WAVE_BLOCK`). Measured,
#: 1F1B p=8, m=32, 1,024 points, one thread: 16 waves ~1.4x faster than 8, 4 slower still.
NOISY_BLOCK = 16


def bucket(n: int, step: int) -> int:
    """``n`` rounded up to a multiple of ``step`` (at least ``step``)."""
    return max(step, -(-n // step) * step)


@dataclass(frozen=True)
class WaveShape:
    """What shapes the scan's waves (the compiled kernel that runs a block of them).

    Attributes:
      p: workers (lanes).
      blocks_sender: the sender is busy until its message arrives (``blocking``).
      n_regs: registers, padded; the zero register is ``n_regs``, the trash one ``n_regs + 1``.
      n_resources: resources, padded; the trash resource is ``n_resources``.
      per_message: resources one message holds.
      n_rounds: rounds of the busiest wave (:class:`ppsweep.engine.comm.Routing`).
      n_sync: synchronised stages (the readiness slots are ``n_sync · p``, plus a trash one).
    """

    p: int
    blocks_sender: bool
    n_regs: int
    n_resources: int
    per_message: int
    n_rounds: int
    n_sync: int


@dataclass(frozen=True)
class ScanShape:
    """The hashable part of a compiled table that shapes the compiled scan (padded to share compilations).

    Attributes:
      p: workers (lanes).
      mode: communication mode.
      blocks_sender: the sender is busy until its message arrives (``blocking``).
      n_regs: registers, padded; the zero register is ``n_regs``, the trash one ``n_regs + 1``.
      n_resources: resources, padded; the trash resource is ``n_resources``.
      per_message: resources one message holds.
      n_rounds: rounds of the busiest wave (:class:`ppsweep.engine.comm.Routing`).
      sync_holders: holders of each synchronised stage.
      sync_resources: resources of each synchronisation's ring hops.
      sync_order: synchronisations in the order they take their resources.
    """

    p: int
    mode: str
    blocks_sender: bool
    n_regs: int
    n_resources: int
    per_message: int
    n_rounds: int
    sync_holders: tuple[tuple[int, ...], ...]
    sync_resources: tuple[tuple[int, ...], ...]
    sync_order: tuple[int, ...]

    @property
    def n_sync(self) -> int:
        """Synchronised stages."""
        return len(self.sync_holders)

    @property
    def waves(self) -> WaveShape:
        """The part that shapes the waves (the rest shapes the synchronisations after them)."""
        return WaveShape(self.p, self.blocks_sender, self.n_regs, self.n_resources, self.per_message, self.n_rounds,
                         self.n_sync)


class ScanLanes(NamedTuple):
    """A compiled table's lanes for the scan in one mode, in blocks of :data:`WAVE_BLOCK` waves.

    Attributes:
      shape: the static shape of the scan.
      blocks: per block, the seven lane arrays ``(WAVE_BLOCK, p)`` on the device: active, duration
        row, register read, register written, resources held, round, synchronisation slot.
      counts: per block, the waves to run (the last block's padding is not run).
    """

    shape: ScanShape
    blocks: tuple[tuple[Any, ...], ...]
    counts: tuple[np.int64, ...]


class CompiledTable:
    """One table's program, scan lanes per mode and envelopes, built once each (thread-safe)."""

    def __init__(self, table: ScheduleTable):
        self._table = weakref.ref(table)
        self._lock = threading.Lock()
        self._routes: dict[str, Routing] = {}
        self._lanes: dict[str, tuple[ScanShape, tuple]] = {}
        self._envelopes: dict[tuple, Any] = {}
        self._tiers: dict[tuple[int, ...], Tiers] = {}
        self._tier_lanes: dict[tuple[int, ...], tuple] = {}
        self._derived: dict[str, Any] = {}
        self.program: Program = _envelope_cache.cached_program(self.digest, table.kind.size, lambda: PROGRAM(table))

    def routing(self, mode: str) -> Routing:
        """Resources of messages and synchronisations in ``mode``."""
        return self._cached(self._routes, mode, lambda: _envelope_cache.cached_routing(
            self.digest, self.program, mode, lambda: route(self.program, mode, self._table())))

    def lanes(self, mode: str) -> ScanLanes:
        """The scan's static shape and lane arrays (on the device, in blocks of waves) in ``mode``."""
        return self._cached(self._lanes, mode, lambda: _scan_lanes(self.program, self.routing(mode)))

    def tiers(self, worker_node: Any = None) -> Tiers:
        """The tier of every link and synchronisation with workers on nodes ``worker_node``
        (:func:`ppsweep.engine.tiers.tiers_for`; None: each worker on its own node)."""
        nodes = check_worker_node(worker_node, self.program.p)
        return self._cached(self._tiers, nodes, lambda: tiers_for(self.program, nodes))

    def tier_lanes(self, tiers: Tiers) -> tuple:
        """Per block of the scan's lanes (:meth:`lanes`), the tier of each lane's message ``(WAVE_BLOCK, p)``
        on the device (:data:`ppsweep.engine.tiers.INTER` where a lane sends nothing)."""
        return self._cached(self._tier_lanes, tiers.worker_node, lambda: _tier_blocks(self.program, tiers))

    def envelope(self, mode: str, weights: np.ndarray, comm: np.ndarray, key: tuple, cap: int,
                 tiers: Tiers | None = None, budget: int | None = None) -> Any:
        """The envelope of ``mode`` for feature ``weights`` (identified by ``key``) with messages on
        ``tiers`` (default: every one between nodes), its programme's work within ``budget`` (None:
        no limit; :func:`ppsweep.engine.envelope.build_envelope`), or the
        :class:`~ppsweep.engine.envelope.EnvelopeTooLarge` its build raised (also cached)."""
        tiers = self.tiers(None) if tiers is None else tiers
        refused = _envelope.unwalked_refusal(self.program, weights.shape[0], budget)
        if refused is not None:  # no routing, walk or cache file: the walk's own verdict
            return refused

        def build():
            try:
                return _envelope.build_envelope(self.program, mode, weights, comm, cap, routing=self.routing(mode), tiers=tiers,
                                                budget=budget)
            except _envelope.EnvelopeTooLarge as err:
                # The verdict, not the raised error: its traceback would keep the callers' frames,
                # and with them this table and its compiled form, alive as long as the cache.
                return type(err)(*err.args)

        def from_disk():
            return _envelope_cache.cached_envelope(self.digest, self.program, mode, weights, comm, cap, build, tiers.key(),
                                                   budget)

        return self._cached(self._envelopes, (mode, cap) + key + tiers.key() + (budget,), from_disk)

    def digest(self) -> str:
        """Hash of the table's content (:func:`ppsweep.tables.digest.table_digest`, which keeps it per table)."""
        return table_digest(self._table())

    @property
    def table_name(self) -> str:
        """The table's schedule name (its family: a variant with options has its family's name)."""
        return self._table().name

    def derived(self, name: str, make: Callable[[Program, ScheduleTable], Any]) -> Any:
        """A value derived from the program and the table, built once by ``make(program, table)``
        and kept under ``name`` (e.g. the scan's noise layout, :mod:`ppsweep.engine.core`)."""
        return self._cached(self._derived, name, lambda: make(self.program, self._table()))

    def _cached(self, store: dict, key: Any, make: Any) -> Any:
        with self._lock:
            if key in store:
                return store[key]
        value = make()
        with self._lock:
            return store.setdefault(key, value)


_COMPILED: "weakref.WeakKeyDictionary[ScheduleTable, CompiledTable]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def compiled_for(table: ScheduleTable) -> CompiledTable:
    """The :class:`CompiledTable` of ``table``, built once per table object (the engine's one cache).

    Tables are immutable and built once per ``(schedule, p, m, options)`` (``ppsweep.tables.build`` keeps
    them in an LRU cache), so every engine call on the same table shares it.
    """
    with _LOCK:
        hit = _COMPILED.get(table)
    if hit is None:
        made = CompiledTable(table)
        with _LOCK:
            hit = _COMPILED.setdefault(table, made)
    return hit


def _tier_blocks(program: Program, tiers: Tiers) -> tuple:
    """Each lane's tier, padded and cut into blocks as :func:`_scan_lanes` cuts the lanes."""
    import jax
    import jax.numpy as jnp

    waves = bucket(program.n_waves, WAVE_BLOCK)
    lanes = np.zeros((waves, program.p), dtype=np.int64)
    lanes[: program.n_waves] = tiers.lane_tier(program.link)  # the trash link (no message) reads INTER
    with jax.enable_x64(True):  # int64 indices, whoever calls
        return tuple(jnp.asarray(lanes[b:b + WAVE_BLOCK]) for b in range(0, waves, WAVE_BLOCK))


def program_for(table: ScheduleTable) -> Program:
    """The :class:`Program` of ``table``, compiled once per table object and cached with the rest of
    its compiled form (:func:`compiled_for`)."""
    return compiled_for(table).program


def envelope_for(table: ScheduleTable, program: Program, mode: str, feats: Any, cap: int = _envelope.DEFAULT_CAP,
                 tiers: Tiers | None = None) -> Any:
    """:func:`ppsweep.engine.envelope.build_envelope` of ``table`` for the features ``feats``, cached
    with the table's compiled form (:func:`compiled_for`).

    Args:
      table: the table; program: its compiled program (kept for callers; the cached one is used).
      mode: communication mode; feats: the :class:`~ppsweep.engine.envelope.Features`; cap: largest set kept at a node.
      tiers: the tier of each message (:meth:`CompiledTable.tiers`; default: every one between nodes).

    Raises:
      EnvelopeTooLarge: when the table needs more than ``cap`` vectors (also cached).
    """
    hit = compiled_for(table).envelope(mode, feats.weights, feats.comm, feats.key(), cap, tiers)
    if isinstance(hit, _envelope.EnvelopeTooLarge):
        raise _envelope.EnvelopeTooLarge(*hit.args)  # a new error: raising the cached verdict would tie frames to it
    return hit


def _scan_lanes(program: Program, routing: Routing) -> ScanLanes:
    """Lane arrays with waves padded to whole blocks of :data:`WAVE_BLOCK`, registers and resources
    remapped to padded ones, cut into blocks."""
    import jax
    import jax.numpy as jnp

    shape = ScanShape(
        p=program.p,
        mode=routing.mode.name,
        blocks_sender=routing.mode.blocks_sender,
        n_regs=bucket(program.n_regs, 8),
        n_resources=bucket(routing.n_resources, 8),
        per_message=int(routing.lane_resources.shape[-1]),
        n_rounds=routing.n_rounds,
        sync_holders=tuple(tuple(int(w) for w in row if w >= 0) for row in program.sync_holders),
        sync_resources=routing.sync_resources,
        sync_order=tuple(int(k) for k in program.sync_order),
    )
    waves = bucket(program.n_waves, WAVE_BLOCK)
    extra = waves - program.n_waves

    def remap(a: np.ndarray, old_base: int, new_base: int) -> np.ndarray:
        return np.where(a >= old_base, a - old_base + new_base, a)

    resources = np.where(routing.lane_resources < 0, shape.n_resources, routing.lane_resources)
    lanes = [
        (program.active, False),
        (program.cost_row, 0),
        (remap(program.dep_reg, program.n_regs, shape.n_regs), shape.n_regs),
        (remap(program.out_reg, program.n_regs, shape.n_regs), shape.n_regs + 1),
        (resources, shape.n_resources),
        (routing.rounds, 0),
        (program.sync_slot, program.trash_sync),
    ]
    padded = tuple(
        np.concatenate([a, np.full((extra,) + a.shape[1:], fill, dtype=a.dtype)]) for a, fill in lanes
    )
    starts = range(0, waves, WAVE_BLOCK)
    with jax.enable_x64(True):  # int64 indices, whoever calls
        blocks = tuple(tuple(jnp.asarray(x[b:b + WAVE_BLOCK]) for x in padded) for b in starts)
    counts = tuple(np.int64(min(WAVE_BLOCK, program.n_waves - b)) for b in starts)
    return ScanLanes(shape, blocks, counts)
