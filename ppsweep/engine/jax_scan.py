"""The max-plus scan as JAX code (the ``jax_scan`` backend's kernels, noise included): jit-compiled
blocks of waves, vectorized over a tile of points (docs/contract.md §4).

:mod:`ppsweep.engine.core` cuts the grid into tiles and calls :func:`run_tiles`; this module is
imported only where a JAX scan runs (JAX's import takes about 1.4 s a process), so a sweep whose
tables take the compiled CPU loop or the envelope never imports JAX. Every JAX call here runs
inside JAX's scoped ``jax.enable_x64`` context (float64 times; the process's global flag untouched).
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ppsweep.engine.comm import TIE_TOLERANCE, message_time, send, step_end, synchronise
from ppsweep.engine.compiled import NOISY_BLOCK, WAVE_BLOCK, ScanShape, WaveShape
from ppsweep.engine.cost_grid import register_pytree

register_pytree()  # Costs as a JAX pytree, now that JAX is imported


def device_count() -> int:
    """JAX's devices in this process (a tile is split across them)."""
    return len(jax.devices())


def run_tiles(shape: ScanShape, blocks: tuple, counts: tuple, factors: tuple[np.ndarray, np.ndarray] | None, k: int,
              tiles: NamedTuple, dtype: np.dtype, out: tuple[np.ndarray, np.ndarray, np.ndarray], workers: int) -> None:
    """Run the scan over every tile of ``tiles`` (per-point inputs laid out tile-major, ``(n_tiles, …, size)``)
    into ``out = (t_sim (n_tiles, size), finish (n_tiles, p, size), path (n_tiles, size))``.

    Args:
      shape: the table's scan shape; blocks, counts: its lanes cut into blocks of :data:`WAVE_BLOCK`
        waves (each ending with its lanes' tiers) and the waves each block runs.
      factors: ``(compute, message)`` noise factors ``(waves padded, p, k)``, or None; k: samples (0: none).
      tiles: the tiles' inputs (``dur``, ``alpha``, ``wire``, ``sync_dur``, ``t_opt``).
      dtype: the scan's float dtype; workers: threads that run tiles side by side on one device.
    """
    devices = jax.devices()
    block_factors: list[tuple] = [()] * len(blocks)
    if factors is not None:
        compute, message = factors
        with jax.enable_x64(True):
            block_factors = [(jnp.asarray(compute[b:b + WAVE_BLOCK], dtype), jnp.asarray(message[b:b + WAVE_BLOCK], dtype))
                             for b in range(0, len(blocks) * WAVE_BLOCK, WAVE_BLOCK)]
    placed = _placement(devices)
    t_sim, finish, path = out
    size = t_sim.shape[-1]

    def one(i: int) -> None:
        with jax.enable_x64(True):  # pool threads do not inherit the caller's scope
            put = lambda a: jax.device_put(a, devices[0] if placed is None else placed(a.ndim))  # noqa: E731
            args = type(tiles)(*(put(a[i]) for a in tiles))
            # on the device as every block leaves it, so that every block calls the same compiled code
            state = jax.tree_util.tree_map(put, _initial_state(shape, size, dtype))
            for lanes, count, factor in zip(blocks, counts, block_factors):
                state = _scan_waves(shape.waves, lanes, count, args.dur, args.alpha, args.wire, state, k, *factor)
            t_sim[i], finish[i], path[i] = _scan_end(shape, state, args.sync_dur, args.t_opt, k)

    n_tiles = t_sim.shape[0]
    workers = workers if placed is None else 1
    if workers > 1 and n_tiles > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(one, range(n_tiles)))
    else:
        for i in range(n_tiles):
            one(i)


def _placement(devices: list) -> Callable[[int], Any] | None:
    """None on one device; else ``ndim -> NamedSharding`` splitting the last (point) axis across ``devices``."""
    if len(devices) == 1:
        return None
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(devices), ("points",))
    return lambda ndim: NamedSharding(mesh, PartitionSpec(*([None] * (ndim - 1) + ["points"])))


class Timed(NamedTuple):
    """Times and, beside each, the compute time of the critical path that set it (arrays of equal shape)."""

    t: jax.Array
    pc: jax.Array

    def at(self, index: Any) -> "Timed":
        """The entries at ``index``."""
        return Timed(self.t[index], self.pc[index])

    def set(self, index: Any, value: "Timed") -> "Timed":
        """A copy with the entries at ``index`` replaced."""
        return Timed(self.t.at[index].set(value.t), self.pc.at[index].set(value.pc))

    @staticmethod
    def where(cond: jax.Array, a: "Timed", b: "Timed") -> "Timed":
        """``a`` where ``cond``, else ``b``."""
        return Timed(jnp.where(cond, a.t, b.t), jnp.where(cond, a.pc, b.pc))


@dataclass(frozen=True)
class _ScanAlgebra:
    """Times of the scan for :mod:`ppsweep.engine.comm`: a maximum follows the README's tie rule (the
    path compute of the first candidate, in priority order, within ``tol`` of the maximum)."""

    tol: float

    def join(self, *times: Timed) -> Timed:
        if len(times) == 1:
            return times[0]
        top = functools.reduce(jnp.maximum, [x.t for x in times])
        threshold = top - self.tol * jnp.abs(top)
        path = times[-1].pc
        for x in reversed(times[:-1]):
            path = jnp.where(x.t >= threshold, x.pc, path)
        return Timed(top, path)

    def comm(self, time: Timed, duration: jax.Array) -> Timed:
        return Timed(time.t + duration, time.pc)

    def compute(self, time: Timed, duration: jax.Array) -> Timed:
        return Timed(time.t + duration, time.pc + duration)


class _State(NamedTuple):
    """The scan's carry: workers free, registers (message arrivals), resources free, sync readiness."""

    free: Timed
    reg: Timed
    res: Timed
    ready: Timed


def _initial_state(shape: ScanShape, n: int, dtype: np.dtype) -> _State:
    """The scan's state before its first wave, at ``n`` points: every time and path compute 0."""
    zeros = lambda rows: Timed(np.zeros((rows, n), dtype), np.zeros((rows, n), dtype))  # noqa: E731
    return _State(free=zeros(shape.p), reg=zeros(shape.n_regs + 2), res=zeros(shape.n_resources + 1),
                  ready=zeros(shape.n_sync * shape.p + 1))


def _spread(a: Any, k: int) -> Any:
    """Per-group values ``(…, g)`` at each of their ``k`` samples, sample-major ``(…, k·g)``."""
    g = a.shape[-1]
    return jnp.broadcast_to(a[..., None, :], a.shape[:-1] + (k, g)).reshape(a.shape[:-1] + (k * g,))


@functools.partial(jax.jit, static_argnums=(0, 7), donate_argnums=(6,))
def _scan_waves(shape: WaveShape, lanes: tuple, n_waves: Any, dur: Any, alpha: Any, wire: Any, state: _State, k: int = 0,
                compute_factor: Any = None, message_factor: Any = None) -> _State:
    """Run the first ``n_waves`` waves (a traced count) of one block of :data:`WAVE_BLOCK` waves
    ``lanes`` from ``state``, for one tile; the state after them.

    Every table of the same :class:`WaveShape` shares the compiled code, whatever its length. With
    ``k > 0`` samples the costs (``dur (rows, g)``, ``alpha``, ``wire (N_TIERS, g)``) are those of ``g``
    groups of samples, the tile's ``n = k·g`` points are sample-major (``k`` blocks of the ``g``
    groups) and the block's ``(WAVE_BLOCK, p, k)`` factors scale each lane's compute time and messages.
    ``lanes`` ends with each lane's tier (:meth:`ppsweep.engine.compiled.CompiledTable.tier_lanes`): its
    message takes that tier's row of ``alpha`` and ``wire``.
    """
    p = shape.p
    n = state.free.t.shape[-1]
    alg = _ScanAlgebra(TIE_TOLERANCE[np.dtype(alpha.dtype)])
    msg = message_time(alpha, wire)
    no_resource = shape.n_resources
    xs = lanes if not k else lanes + (compute_factor, message_factor)

    def scaled(x):
        """Wave ``x``'s durations, wire and message times ``(p, n)`` with its lanes' factors ``(p, k)``
        (the points sample-major)."""
        by_sample = lambda f, a: (a[:, None, :] * f[:, :, None]).reshape((p, n))  # noqa: E731
        return (by_sample(x[8], dur[x[1]]), by_sample(x[9], wire[x[7]]), by_sample(x[9], msg[x[7]]))

    def wave(s: _State, x, noisy=()) -> _State:
        on, row, dep, out, held, rnd, ss, tier = x[:8]
        d, lane_wire, lane_msg = noisy or (dur[row], wire[tier], msg[tier])
        start = alg.join(s.free, s.reg.at(dep))
        end = alg.compute(start, d)
        res, arrival = s.res, None
        for r in range(shape.n_rounds):  # messages sharing a resource in this wave: lane order
            mine = rnd == r
            idx = held if shape.n_rounds == 1 else jnp.where(mine[:, None], held, no_resource)
            arrived, released = send(alg, end, [res.at(idx[:, j]) for j in range(shape.per_message)], lane_wire, lane_msg)
            for j in range(shape.per_message):
                res = res.set(idx[:, j], released)
            arrival = arrived if arrival is None else Timed.where(mine[:, None], arrived, arrival)
        reg = s.reg.set(out, arrival)
        busy = end
        if shape.blocks_sender:
            busy = Timed.where((out != shape.n_regs + 1)[:, None], arrival, end)
        ready = s.ready.set(ss, end) if shape.n_sync else s.ready
        return _State(free=Timed.where(on[:, None], busy, s.free), reg=reg, res=res, ready=ready)

    if not k:
        return jax.lax.fori_loop(0, n_waves, lambda t, s: wave(s, tuple(a[t] for a in xs)), state)
    # The products of the noise are rounded on their own, never fused into the additions that
    # use them (a fused multiply-add, which XLA may emit in some lanes of a tile and not in
    # others: a point's last bits would then depend on its tile, and differ from the
    # reference's). The waves run in sub-blocks of NOISY_BLOCK: each sub-block's products are
    # computed at once, then an inner loop runs its waves; a value made outside a loop is a
    # buffer to the loop, which no fusion crosses (the inner loop's trip count is traced, so
    # XLA cannot unroll it; an optimization_barrier would not do: XLA removes it before fusing).
    def block(b, s):
        base = b * NOISY_BLOCK
        xb = tuple(jax.lax.dynamic_slice_in_dim(a, base, NOISY_BLOCK) for a in xs)
        products = jax.vmap(scaled)(xb)
        inner = lambda j, s: wave(s, tuple(a[j] for a in xb), tuple(q[j] for q in products))  # noqa: E731
        return jax.lax.fori_loop(0, jnp.minimum(NOISY_BLOCK, n_waves - base), inner, s)

    return jax.lax.fori_loop(0, (n_waves + NOISY_BLOCK - 1) // NOISY_BLOCK, block, state)


@functools.partial(jax.jit, static_argnums=(0, 4))
def _scan_end(shape: ScanShape, s: _State, sync_dur: Any, t_opt: Any, k: int = 0):
    """After the last wave: the gradient synchronisations, each worker's optimizer update, the
    step's end. Returns ``t_sim (n,)``, ``finish (p, n)`` and the critical path's compute ``(n,)``;
    with ``k`` samples ``sync_dur``, ``t_opt`` are per group and spread over the samples."""
    p = shape.p
    if k:
        sync_dur, t_opt = _spread(sync_dur, k), _spread(t_opt, k)
    alg = _ScanAlgebra(TIE_TOLERANCE[np.dtype(t_opt.dtype)])
    finish, res = s.free, s.res

    # Gradient synchronisations, in the order they take their resources.
    sync_end: dict[int, Timed] = {}
    for q in shape.sync_order:
        held = shape.sync_resources[q]
        end = synchronise(alg, [s.ready.at(q * p + w) for w in shape.sync_holders[q]], [res.at(i) for i in held],
                          sync_dur[q])
        if held:
            res = res.set(jnp.array(held), end)
        sync_end[q] = end

    # Each worker's optimizer update (where t_opt > 0), then the step's end.
    updating = t_opt > 0
    t_sim = step_end(alg, [finish.at(w) for w in range(p)], [sync_end[q] for q in range(shape.n_sync)], shape.sync_holders,
                     lambda w, start: Timed.where(updating, alg.compute(start, t_opt), finish.at(w)))
    return t_sim.t, finish.t, t_sim.pc
