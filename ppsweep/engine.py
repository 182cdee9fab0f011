"""The communication-aware engine: a jit-compiled max-plus scan over a table's waves (SPEC section 4).

``simulate(table, t_f, t_b, alpha, beta, msg_bytes, mode=...)`` runs every point of a broadcast
grid at once. The table is compiled once (:mod:`ppsweep.program`); the scan then carries, for
each point, each worker's free time, the arrival time of every message in flight (registers),
each link's free time (``contention``) and each synchronisation's readiness. Alongside every
time it carries the compute time of the critical path that produced it, so that ``comm_time``
comes out of the same pass (README, "Critical path").

JAX runs in float64 here (``jax_enable_x64``): times span nanoseconds to seconds. float32 is
available through ``dtype`` for speed studies.

Two methods compute the same results (``method``):

- ``scan``: the max-plus scan over the table's waves. The grid is cut into tiles of at most
  :data:`SCAN_TILE` points (their state stays in cache); tiles run on every CPU core (threads)
  or, where the process has several JAX devices, are split across them with a ``NamedSharding``
  over the point axis. One compiled scan serves every table of the same padded shape.
- ``envelope``: the table compiled once into its maximal path vectors (:mod:`ppsweep.envelope`);
  each point is then a small matrix product and a maximum. Falls back to the scan where a table
  needs more than ``cap`` vectors; points whose ``comm_time`` depends on the README's tie rule
  are recomputed with the scan.
- ``auto`` (default): the envelope where it compiles within the cap, else the scan.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ppsweep import envelope as _envelope  # noqa: E402
from ppsweep.noise import NoiseConfig, op_factors, op_identities  # noqa: E402
from ppsweep.program import Program, program_for  # noqa: E402
from ppsweep.table import ScheduleTable  # noqa: E402

MODES = ("overlap", "blocking", "contention")

#: Accepted values of ``method``.
METHODS = ("auto", "scan", "envelope")

#: Most points one compiled scan call handles per device: the scan's state for a tile stays in
#: the CPU's cache (measured on 2 cores: 1024 points ~2x faster than 16384).
SCAN_TILE = 1024

#: Most points of a noisy scan tile (rounded down to whole groups of samples, at least one): its
#: per-lane durations and message times, ``3 × (waves, p, tile)``, are materialized before the
#: loop, so the tile is kept small for the cache (p=8, m=32 on 2 cores: 128 points ~2x faster than 1024).
NOISY_TILE = 128

#: Points whose costs the scan expands from their broadcast arrays at once (bounds its memory).
HOST_BATCH = 1 << 18

#: Candidates within this relative distance of a maximum tie (README, "Critical path").
TIE_TOLERANCE = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-6}

#: Points per compiled call; grids are cut into chunks of this many points.
DEFAULT_CHUNK = 16384


@dataclass(frozen=True)
class SimResult:
    """Result of :func:`simulate`, every array with the broadcast point shape ``batch``.

    Attributes:
      t_sim: step time, s, ``batch``.
      worker_finish: ``batch + (p,)``: when each worker finished its last operation (and, in
        ``blocking``, its last send), before any optimizer update, s.
      comm_time: time the critical path spends outside compute (messages, link queues,
        synchronisations), s, ``batch``.
      compute_time: total compute time of all operations and optimizer updates, s, ``batch``.
      method: ``scan`` or ``envelope``: what computed it.
    """

    t_sim: np.ndarray
    worker_finish: np.ndarray
    comm_time: np.ndarray
    compute_time: np.ndarray
    method: str = "scan"

    def idle_fraction(self, p: int) -> np.ndarray:
        """``idle_sim = 1 - compute_time / (p · t_sim)``."""
        return 1.0 - self.compute_time / (p * self.t_sim)


def check_method(method: str) -> str:
    """``method`` if it is a known engine method, else a ValueError naming the accepted ones."""
    if method not in METHODS:
        raise ValueError(f"engine.method: unknown method {method!r}; accepted: {', '.join(METHODS)}")
    return method


def check_mode(mode: str) -> str:
    """``mode`` if it is a known communication mode, else a ValueError naming the accepted ones."""
    if mode not in MODES:
        raise ValueError(f"comm.mode: unknown mode {mode!r}; accepted: {', '.join(MODES)}")
    return mode


def simulate(
    table: ScheduleTable,
    t_f: Any,
    t_b: Any,
    alpha: Any,
    beta: Any,
    msg_bytes: Any,
    mode: str = "overlap",
    *,
    t_i: Any = None,
    t_w: Any = None,
    grad_bytes: Any = 0.0,
    t_opt: Any = 0.0,
    dtype: Any = np.float64,
    chunk: int = DEFAULT_CHUNK,
    method: str = "auto",
    finish: bool = True,
    cap: int = _envelope.DEFAULT_CAP,
    noise: NoiseConfig | None = None,
) -> SimResult:
    """Simulate one table at every point of a broadcast grid of costs.

    Per-stage costs (``t_f``, ``t_b``, ``t_i``, ``t_w``, ``grad_bytes``) broadcast against
    ``batch + (S,)``: a trailing axis of length ``S = table.n_stages`` gives one value per stage,
    a trailing axis of length 1 (or a scalar) the same value for every stage. Per-point costs
    (``alpha``, ``beta``, ``msg_bytes``, ``t_opt``) broadcast against ``batch``.

    Args:
      table: the schedule table (its per-worker order is what runs).
      t_f: forward seconds per microbatch of one stage.
      t_b: full-backward seconds per microbatch of one stage.
      alpha: message latency, s (>= 0).
      beta: bandwidth, bytes/s (> 0; ``inf`` for free transfers).
      msg_bytes: bytes of one point-to-point message (>= 0).
      mode: ``overlap``, ``blocking`` or ``contention`` (SPEC section 4).
      t_i, t_w: input- and weight-gradient seconds where the backward is split (default ``t_b/2``).
      grad_bytes: gradient bytes of each stage, for synchronising replicated stages.
      t_opt: optimizer update seconds per worker (0: none).
      dtype: float64 (default) or float32.
      chunk: most points per compiled call (the scan uses tiles of at most :data:`SCAN_TILE`).
      method: ``auto`` (default), ``scan`` or ``envelope`` (module docstring).
      finish: compute ``worker_finish``; with False it comes back with a trailing axis of length 0
        (sweeps do not store it, and it is most of the envelope's output).
      cap: most vectors the envelope keeps at one node before falling back to the scan.
      noise: a :class:`ppsweep.noise.NoiseConfig` with ``samples = k > 0``: every point is run
        ``k`` times with the operations' and messages' factors of samples ``0 … k-1`` (drawn
        here, :func:`ppsweep.noise.op_factors`), on the scan (the envelope cannot take per-operation
        noise); results get a trailing axis of length ``k``. Where every factor is 1
        (``noise.is_zero``) the noise-free results are repeated along it.

    Returns:
      A :class:`SimResult` with arrays of the broadcast shape (``+ (k,)`` with noise).
    """
    check_mode(mode)
    check_method(method)
    dtype = np.dtype(dtype)
    S = table.n_stages
    t_i = np.asarray(t_b, float) / 2 if t_i is None else t_i
    t_w = np.asarray(t_b, float) / 2 if t_w is None else t_w
    per_stage = {"t_f": t_f, "t_b": t_b, "t_i": t_i, "t_w": t_w, "grad_bytes": grad_bytes}
    per_point = {"alpha": alpha, "beta": beta, "msg_bytes": msg_bytes, "t_opt": t_opt}
    stage_arrays = {k: _as_stage_array(k, v, S) for k, v in per_stage.items()}
    point_arrays = {k: np.asarray(v, dtype=float) for k, v in per_point.items()}
    _check_costs(stage_arrays, point_arrays)
    batch = np.broadcast_shapes(*(a.shape[:-1] for a in stage_arrays.values()), *(a.shape for a in point_arrays.values()))
    n = int(np.prod(batch, dtype=np.int64))

    program = program_for(table)
    if noise is not None and noise.enabled:
        if noise.is_zero:
            plain = simulate(table, t_f, t_b, alpha, beta, msg_bytes, mode, t_i=t_i, t_w=t_w, grad_bytes=grad_bytes,
                             t_opt=t_opt, dtype=dtype, chunk=chunk, method=method, finish=finish, cap=cap)
            rep = lambda a, axis: np.repeat(np.expand_dims(a, axis), noise.samples, axis=axis)  # noqa: E731
            return SimResult(rep(plain.t_sim, -1), rep(plain.worker_finish, -2), rep(plain.comm_time, -1),
                             rep(plain.compute_time, -1), plain.method)
        factors = _lane_factors(program, table, noise)
        batch = batch + (noise.samples,)
        n *= noise.samples
    else:
        factors = None
        if method in ("auto", "envelope"):
            result = _simulate_envelope(table, program, stage_arrays, point_arrays, batch, mode, dtype, chunk, finish, cap)
            if result is not None:
                return result
    t_sim, fin, comm, compute = _simulate_scan(program, stage_arrays, point_arrays, batch, np.arange(n), mode, dtype, chunk, factors)
    return SimResult(
        t_sim=t_sim.reshape(batch),
        worker_finish=fin.T.reshape(batch + (table.p,)) if finish else np.zeros(batch + (0,)),
        comm_time=comm.reshape(batch),
        compute_time=compute.reshape(batch),
        method="scan",
    )


def _simulate_scan(
    program: Program,
    stage_arrays: dict[str, np.ndarray],
    point_arrays: dict[str, np.ndarray],
    batch: tuple[int, ...],
    index: np.ndarray,
    mode: str,
    dtype: np.dtype,
    chunk: int,
    factors: "_LaneFactors | None" = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The scan at the points ``index`` (flat indices into ``batch``): t_sim, finish (p, n), comm, compute.

    Per-point costs are expanded from their broadcast arrays :data:`HOST_BATCH` points at a time,
    so memory beyond the results stays bounded however large the grid. With ``factors`` the last
    axis of ``batch`` is the sample, and the costs broadcast against the axes before it.
    """
    S = program.n_stages
    n = index.shape[0]
    t_sim, comm, compute = np.empty(n), np.empty(n), np.empty(n)
    finish = np.empty((program.p, n))
    counts = np.bincount(program.compute_rows, minlength=4 * S).astype(float)
    step = HOST_BATCH if factors is None else max(1, HOST_BATCH // batch[-1]) * batch[-1]  # whole groups of samples
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        where = np.unravel_index(index[lo:hi], batch)
        sample = None
        if factors is not None:
            where, sample = where[:-1], where[-1]
        cost_batch = batch[:-1] if factors is not None else batch
        flat_stage = {k: np.broadcast_to(a, cost_batch + (S,))[where] for k, a in stage_arrays.items()}
        flat_point = {k: np.broadcast_to(a, cost_batch)[where] for k, a in point_arrays.items()}
        dur = np.concatenate([flat_stage[k] for k in ("t_f", "t_b", "t_i", "t_w")], axis=1).T  # (4S, n)
        with np.errstate(divide="ignore"):
            wire = np.where(np.isinf(flat_point["beta"]), 0.0, flat_point["msg_bytes"] / flat_point["beta"])
            sync_dur = _sync_durations(program, flat_stage["grad_bytes"], flat_point["alpha"], flat_point["beta"])
        t, f, path_compute = run_program(program, dur, flat_point["alpha"], wire, sync_dur, flat_point["t_opt"], mode, dtype, chunk,
                                         factors=factors, sample=sample)
        t_sim[lo:hi], finish[:, lo:hi], comm[lo:hi] = t, f, t - path_compute
        if factors is None:
            compute[lo:hi] = counts @ dur + program.p * flat_point["t_opt"]
        else:
            compute[lo:hi] = np.einsum("rn,rn->n", dur, factors.row_sums[:, sample]) + program.p * flat_point["t_opt"]
    return t_sim, finish, comm, compute


def _simulate_envelope(
    table: ScheduleTable,
    program: Program,
    stage_arrays: dict[str, np.ndarray],
    point_arrays: dict[str, np.ndarray],
    batch: tuple[int, ...],
    mode: str,
    dtype: np.dtype,
    chunk: int,
    finish: bool,
    cap: int,
) -> SimResult | None:
    """The envelope method, or None where the table needs more than ``cap`` vectors."""
    feats = _envelope.features(
        program, stage_arrays, point_arrays["alpha"], point_arrays["beta"], point_arrays["msg_bytes"],
        point_arrays["t_opt"], ndim=len(batch),
    )
    try:
        env = _envelope.envelope_for(table, program, mode, feats, cap)
    except _envelope.EnvelopeTooLarge:
        return None
    r = _envelope.evaluate(env, feats, batch, dtype, finish=finish, tie_rtol=TIE_TOLERANCE[dtype])
    comm = r.comm_time
    ambiguous = np.flatnonzero(r.ambiguous)
    if ambiguous.size:  # the README's tie rule decides these: ask the scan
        _, _, scanned, _ = _simulate_scan(program, stage_arrays, point_arrays, batch, ambiguous, mode, dtype, chunk)
        comm = comm.copy()
        comm.flat[ambiguous] = scanned
    return SimResult(
        t_sim=r.t_sim,
        worker_finish=r.finish if finish else np.zeros(batch + (0,)),
        comm_time=comm,
        compute_time=r.compute_time,
        method="envelope",
    )


def _as_stage_array(name: str, value: Any, n_stages: int) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if array.ndim == 0:
        return array.reshape(1)
    if array.shape[-1] not in (1, n_stages):
        raise ValueError(
            f"{name}: trailing axis must have length 1 or n_stages={n_stages} (one value per stage), "
            f"got shape {array.shape}"
        )
    return array


def _check_costs(stage_arrays: dict[str, np.ndarray], point_arrays: dict[str, np.ndarray]) -> None:
    rules = {
        "t_f": "finite and >= 0",
        "t_b": "finite and >= 0",
        "t_i": "finite and >= 0",
        "t_w": "finite and >= 0",
        "grad_bytes": "finite and >= 0",
        "alpha": "finite and >= 0",
        "msg_bytes": "finite and >= 0",
        "t_opt": "finite and >= 0",
    }
    arrays = {**stage_arrays, **point_arrays}
    for name, rule in rules.items():
        a = arrays[name]
        if not (np.all(np.isfinite(a)) and np.all(a >= 0)):
            raise ValueError(f"{name}: must be {rule}")
    if not np.all(point_arrays["beta"] > 0):
        raise ValueError("beta: bandwidth must be > 0 bytes/s (inf allowed)")


def _sync_durations(program: Program, grad_bytes: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Ring all-reduce time of each synchronised stage, ``(n_sync, n)``: ``2(n-1)(α + bytes/(n·β))``."""
    out = np.zeros((program.n_sync, alpha.shape[0]))
    for k, stage in enumerate(program.sync_stages):
        n = int(np.sum(program.sync_holders[k] >= 0))
        wire = np.where(np.isinf(beta), 0.0, grad_bytes[:, stage] / n / beta)
        out[k] = 2 * (n - 1) * (alpha + wire)
    return out


def run_program(
    program: Program,
    dur: np.ndarray,
    alpha: np.ndarray,
    wire: np.ndarray,
    sync_dur: np.ndarray,
    t_opt: np.ndarray,
    mode: str,
    dtype: np.dtype = np.dtype(np.float64),
    chunk: int = DEFAULT_CHUNK,
    *,
    factors: "_LaneFactors | None" = None,
    sample: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run a compiled table over flat per-point costs, chunk by chunk.

    Args:
      program: the compiled table.
      dur: ``(4·S, n)`` compute seconds by (kind, stage) row.
      alpha: ``(n,)`` latency, s.
      wire: ``(n,)`` message bytes / bandwidth, s.
      sync_dur: ``(n_sync, n)`` all-reduce time of each synchronised stage, s.
      t_opt: ``(n,)`` optimizer update time, s.
      mode: communication mode.
      dtype: float dtype of the computation.
      chunk: most points per compiled call (tiles of at most :data:`SCAN_TILE` per device).
      factors: noise factors of the table's lanes (:func:`_lane_factors`), or None.
      sample: ``(n,)`` sample index of each point (with ``factors``).

    Returns:
      ``t_sim (n,)``, ``finish (p, n)`` and the critical path's compute time ``(n,)``, float64.
    """
    n = alpha.shape[0]
    static, xs = _lanes_for(program)
    devices = jax.devices()
    tile = min(chunk, SCAN_TILE, _bucket(n, 256))
    k = 0
    lane_factors: tuple = (None, None)
    if factors is not None:
        # A tile holds whole groups of k samples (points are ordered sample-fastest), so each
        # point's sample is its position modulo k and the factors broadcast without a gather.
        k = factors.compute.shape[-1]
        if n % k or (sample is not None and not np.array_equal(sample, np.arange(n) % k)):
            raise ValueError("run_program: noisy points must come in whole groups of samples 0 … k-1")
        tile = max(1, min(tile, NOISY_TILE) // k) * k
        lane_factors = (jnp.asarray(factors.compute, dtype), jnp.asarray(factors.message, dtype))
    size = tile * len(devices)
    placed = _placement(len(devices))

    def one(lo: int):
        hi = min(lo + size, n)
        args = [_pad_points(a[..., lo:hi], size).astype(dtype) for a in (dur, alpha, wire, sync_dur, t_opt)]
        if k:
            args = [_sample_major(a, k) for a in args]
        if placed is not None:
            args = [jax.device_put(a, placed(a.ndim)) for a in args]
        out = [np.asarray(o) for o in _scan_chunk(static, mode, k, *xs, *args, *lane_factors)]
        if k:
            out = [_sample_major(o, size // k) for o in out]
        return hi - lo, out

    starts = range(0, n, size)
    workers = _scan_workers() if placed is None else 1
    if workers > 1 and len(starts) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outs = list(pool.map(one, starts))
    else:
        outs = [one(lo) for lo in starts]
    t_sim = np.concatenate([o[0][:k] for k, o in outs]).astype(np.float64)
    finish = np.concatenate([o[1][:, :k] for k, o in outs], axis=1).astype(np.float64)
    path = np.concatenate([o[2][:k] for k, o in outs]).astype(np.float64)
    return t_sim, finish, path


def _sample_major(a: np.ndarray, k: int) -> np.ndarray:
    """Points ``(…, g·k)`` ordered sample-fastest -> sample-slowest (and back, with ``k`` the group count)."""
    lead, n = a.shape[:-1], a.shape[-1]
    return np.ascontiguousarray(np.swapaxes(a.reshape(lead + (n // k, k)), -1, -2)).reshape(lead + (n,))


def _scan_workers() -> int:
    """Threads that run scan tiles side by side on one device (every core: XLA's CPU kernels of a
    tile this small use one core each)."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _placement(n_devices: int):
    """None on one device; else ``ndim -> NamedSharding`` splitting the last (point) axis across devices."""
    if n_devices == 1:
        return None
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()), ("points",))
    return lambda ndim: NamedSharding(mesh, PartitionSpec(*([None] * (ndim - 1) + ["points"])))


_LANES: "weakref.WeakKeyDictionary[Program, tuple]" = weakref.WeakKeyDictionary()
_LANES_LOCK = threading.Lock()


def _lanes_for(program: Program) -> tuple["_StaticProgram", tuple]:
    """The static part and padded lane arrays of ``program``, on the device, once per program."""
    with _LANES_LOCK:
        hit = _LANES.get(program)
    if hit is None:
        hit = (_StaticProgram.of(program), tuple(jnp.asarray(x) for x in _padded_lanes(program)))
        with _LANES_LOCK:
            _LANES[program] = hit
    return hit


def _bucket(n: int, step: int) -> int:
    """``n`` rounded up to a multiple of ``step`` (at least ``step``)."""
    return max(step, -(-n // step) * step)


def _pad_points(a: np.ndarray, size: int) -> np.ndarray:
    pad = size - a.shape[-1]
    if pad == 0:
        return a
    return np.concatenate([a, np.repeat(a[..., -1:], pad, axis=-1)], axis=-1)


@dataclass(frozen=True)
class _StaticProgram:
    """The hashable part of a program that shapes the compiled scan (padded to share compilations)."""

    p: int
    n_regs: int  # padded; zero register = n_regs, trash = n_regs + 1
    n_links: int  # padded; trash link = n_links
    sync_holders: tuple[tuple[int, ...], ...]
    sync_ring_links: tuple[tuple[int, ...], ...]
    sync_order: tuple[int, ...]

    @classmethod
    def of(cls, program: Program) -> "_StaticProgram":
        return cls(
            p=program.p,
            n_regs=_bucket(program.n_regs, 8),
            n_links=_bucket(program.n_links, 8),
            sync_holders=tuple(tuple(int(w) for w in row if w >= 0) for row in program.sync_holders),
            sync_ring_links=tuple(tuple(int(l) for l in row if l >= 0) for row in program.sync_ring_links),
            sync_order=tuple(int(k) for k in program.sync_order),
        )

    @property
    def n_sync(self) -> int:
        return len(self.sync_holders)


def _padded_lanes(program: Program) -> tuple[np.ndarray, ...]:
    """Lane arrays with waves padded to a multiple of 32 and indices remapped to padded registers."""
    static = _StaticProgram.of(program)
    waves = _bucket(program.n_waves, 32)
    extra = waves - program.n_waves

    def remap(a: np.ndarray, old_base: int, new_base: int) -> np.ndarray:
        return np.where(a >= old_base, a - old_base + new_base, a)

    dep = remap(program.dep_reg, program.n_regs, static.n_regs)
    out = remap(program.out_reg, program.n_regs, static.n_regs)
    link = remap(program.link, program.n_links, static.n_links)
    lanes = [
        (program.active, False),
        (program.cost_row, 0),
        (dep, static.n_regs),
        (out, static.n_regs + 1),
        (link, static.n_links),
        (program.sync_slot, program.trash_sync),
    ]
    return tuple(np.concatenate([a, np.full((extra, program.p), fill, dtype=a.dtype)]) for a, fill in lanes)


@dataclass(frozen=True)
class _LaneFactors:
    """Noise factors laid out like the scan's padded lanes.

    Attributes:
      compute, message: ``(n_waves padded, p, k)`` factor of the operation in each lane (1 where none).
      row_sums: ``(4·S, k)`` sum of the compute factors of the operations of each duration row.
    """

    compute: np.ndarray
    message: np.ndarray
    row_sums: np.ndarray


def _lane_factors(program: Program, table: ScheduleTable, noise: NoiseConfig) -> _LaneFactors:
    """Draw the noise of every operation of ``table`` in samples ``0 … k-1`` and lay it out in lanes.

    Operations are in the program's order, ``(start slot, worker)``, which is the row-major order
    of the active lanes (one operation per worker per wave).
    """
    k = noise.samples
    f = op_factors(noise, op_identities(table), table.p, np.arange(k))
    waves = _bucket(program.n_waves, 32)
    lanes = np.flatnonzero(program.active.ravel())  # op i sits in flat lane lanes[i]
    if lanes.shape[0] != program.n_ops:
        raise AssertionError("program lanes and table operations disagree")  # pragma: no cover

    def layout(values: np.ndarray) -> np.ndarray:
        out = np.ones((waves * program.p, k))
        out[lanes] = values.T
        return out.reshape(waves, program.p, k)

    row_sums = np.zeros((4 * program.n_stages, k))
    np.add.at(row_sums, program.compute_rows, f.compute.T)
    return _LaneFactors(layout(f.compute), layout(f.message), row_sums)


def _pick(candidates: list[tuple[jax.Array, jax.Array]], tol: float) -> tuple[jax.Array, jax.Array]:
    """Max-plus step with the README's tie rule: the maximum time, and the path compute of the first
    candidate (in priority order) within ``tol`` of it."""
    times = [t for t, _ in candidates]
    top = functools.reduce(jnp.maximum, times)
    threshold = top - tol * jnp.abs(top)
    path = candidates[-1][1]
    for t, pc in reversed(candidates[:-1]):
        path = jnp.where(t >= threshold, pc, path)
    return top, path


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _scan_chunk(static: _StaticProgram, mode: str, k: int, active, cost_row, dep_reg, out_reg, link, sync_slot, dur, alpha, wire, sync_dur, t_opt,
                compute_factor, message_factor):
    """One tile of the scan; with ``k > 0`` samples, the tile's points are ordered sample-major
    (point ``i`` has sample ``i // (n/k)``) and the ``(n_waves, p, k)`` factors scale each lane's
    compute time and message."""
    p, n = static.p, alpha.shape[0]
    dtype = alpha.dtype
    tol = TIE_TOLERANCE[np.dtype(dtype)]
    zeros = lambda rows: jnp.zeros((rows, n), dtype)  # noqa: E731
    msg = alpha + wire
    carry = {
        "free": zeros(p),
        "free_pc": zeros(p),
        "reg": zeros(static.n_regs + 2),
        "reg_pc": zeros(static.n_regs + 2),
        "link": zeros(static.n_links + 1),
        "link_pc": zeros(static.n_links + 1),
        "ready": zeros(static.n_sync * p + 1),
        "ready_pc": zeros(static.n_sync * p + 1),
    }

    def wave(c, x):
        on, row, dep, out, lk, ss = x[:6]
        if k:  # this wave's noisy durations and message times (p, n), computed before the loop
            d, lane_msg, lane_wire = x[6], x[7], x[8]
        else:
            d, lane_msg, lane_wire = dur[row], msg, wire  # (p, n), (n,), (n,)
        start, start_pc = _pick([(c["free"], c["free_pc"]), (c["reg"][dep], c["reg_pc"][dep])], tol)
        end, end_pc = start + d, start_pc + d
        if mode == "contention":
            go, go_pc = _pick([(end, end_pc), (c["link"][lk], c["link_pc"][lk])], tol)
            c["link"] = c["link"].at[lk].set(go + lane_wire)
            c["link_pc"] = c["link_pc"].at[lk].set(go_pc)
            arrival, arrival_pc = go + lane_msg, go_pc
        else:
            arrival, arrival_pc = end + lane_msg, end_pc
        c["reg"] = c["reg"].at[out].set(arrival)
        c["reg_pc"] = c["reg_pc"].at[out].set(arrival_pc)
        if mode == "blocking":
            sends = (out != static.n_regs + 1)[:, None]
            end, end_pc = jnp.where(sends, arrival, end), jnp.where(sends, arrival_pc, end_pc)
        on = on[:, None]
        c["free"] = jnp.where(on, end, c["free"])
        c["free_pc"] = jnp.where(on, end_pc, c["free_pc"])
        if static.n_sync:
            c["ready"] = c["ready"].at[ss].set(start + d)
            c["ready_pc"] = c["ready_pc"].at[ss].set(start_pc + d)
        return c, None

    noisy = ()
    if k:
        # Every lane's duration and message times with their factors, (waves, p, n), before the
        # loop: the products are rounded on their own, so no multiply can fuse with an add
        # (which XLA may do in some lanes of a tile and not in others: results would then
        # depend on the tiling). The tile's points are sample-major: (k, n/k).
        scale = lambda f, a: (a.reshape(a.shape[:-1] + (k, n // k)) * f[..., None]).reshape(f.shape[:2] + (n,))  # noqa: E731
        lane_d = scale(compute_factor, dur[cost_row])
        noisy = (lane_d, scale(message_factor, jnp.broadcast_to(msg, (1, 1, n))), scale(message_factor, jnp.broadcast_to(wire, (1, 1, n))))
        noisy = jax.lax.optimization_barrier(noisy)
    xs = (active, cost_row, dep_reg, out_reg, link, sync_slot) + noisy
    c, _ = jax.lax.scan(wave, carry, xs)
    finish, finish_pc = c["free"], c["free_pc"]

    # Gradient synchronisations, in the order they take their links.
    links, links_pc = c["link"], c["link_pc"]
    sync_end: dict[int, tuple[jax.Array, jax.Array]] = {}
    for k in static.sync_order:
        holders, ring = static.sync_holders[k], static.sync_ring_links[k]
        cands = [(c["ready"][k * p + w], c["ready_pc"][k * p + w]) for w in holders]
        if mode == "contention":
            cands += [(links[l], links_pc[l]) for l in ring]
        start, start_pc = _pick(cands, tol)
        end = start + sync_dur[k]
        if mode == "contention":
            idx = jnp.array(ring)
            links = links.at[idx].set(end)
            links_pc = links_pc.at[idx].set(start_pc)
        sync_end[k] = (end, start_pc)

    # Each worker's optimizer update (where t_opt > 0), then the step's end.
    updating = t_opt > 0
    worker_end = []
    for w in range(p):
        cands = [(finish[w], finish_pc[w])] + [sync_end[k] for k, h in enumerate(static.sync_holders) if w in h]
        t, pc = _pick(cands, tol)
        worker_end.append((jnp.where(updating, t + t_opt, finish[w]), jnp.where(updating, pc + t_opt, finish_pc[w])))
    t_sim, t_pc = _pick(worker_end + [sync_end[k] for k in range(static.n_sync)], tol)
    return t_sim, finish, t_pc
