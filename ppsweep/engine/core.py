"""The communication-aware engine: a jit-compiled max-plus scan over a table's waves (docs/contract.md §4).

``simulate(table, costs, mode)`` runs every point of a broadcast grid of :class:`~ppsweep.engine.cost_grid.Costs`
at once (``simulate(table, t_f, t_b, alpha, beta, msg_bytes, mode, ...)`` builds the costs from
keywords). The table is compiled once (:mod:`ppsweep.engine.compiled`); the scan then carries, for each
point, each worker's free time, the arrival time of every message in flight (registers), each
resource's free time (links in ``contention``, ports in ``ports``) and each synchronisation's
readiness. Alongside every time it carries the compute time of the critical path that produced it,
so that ``comm_time`` comes out of the same pass (README, "Critical path"). The communication rules
themselves are :mod:`ppsweep.engine.comm`'s, shared with the envelope.

The engine computes in float64 (times span nanoseconds to seconds); where it runs JAX, inside
JAX's scoped ``jax.enable_x64`` context, which leaves JAX's global ``jax_enable_x64`` flag as it
was. It imports JAX only where a JAX scan runs (:mod:`ppsweep.engine.jax_scan`). float32 is
available through ``dtype`` for speed studies.

Which implementation computes a call is the backend registry's choice (:mod:`ppsweep.engine.backend`;
``backend=``). This module holds these and registers them, with the reference:

- ``native_scan`` / ``jax_scan``: the max-plus scan over the table's waves, as a compiled CPU loop
  (:mod:`ppsweep.engine.native_scan`) or as JAX code (:mod:`ppsweep.engine.jax_scan`; noise included);
  the same results to the bit.
  The JAX scan cuts the grid into tiles of at most ``chunk`` points (default :data:`DEFAULT_CHUNK`:
  their state stays in cache); tiles run on every CPU core (threads) or, where the process has
  several JAX devices, are split across them with a ``NamedSharding`` over the point axis. One
  compiled scan serves every table of the same padded shape.
- ``envelope``: the table compiled once into its maximal path vectors (:mod:`ppsweep.engine.envelope`);
  each point is then a small matrix product and a maximum; only where it compiles within ``cap``
  vectors, and without noise. Points whose ``comm_time`` depends on the README's tie rule are
  recomputed with the scan.
- ``piecewise_scan``: the periodic scan at the ends and midpoints of segments along one axis of
  the grid, each segment's other points interpolated where convexity proves the step time affine
  there (:mod:`ppsweep.engine.piecewise`).
- ``auto`` (default): the envelope where it compiles within the cap and there is no noise, else
  the piecewise scan (a grid with an axis that moves the costs on lines, no noise), else the
  compiled CPU loop (JAX on one CPU device), else the JAX scan.
"""

from __future__ import annotations

import functools
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ppsweep import engine_threads
from ppsweep.engine import envelope as _envelope
from ppsweep.engine import piecewise as _piecewise
from ppsweep.engine import reference as _reference
from ppsweep.engine import scan_tally
from ppsweep.engine.backend import AUTO, SCAN, SimResult, Tolerance, check_backend, choose, register
from ppsweep.engine.comm import MODE_RULES, MODES, TIE_TOLERANCE, RingAllReduce, check_mode
from ppsweep.engine.compiled import NOISY_BLOCK, WAVE_BLOCK, CompiledTable, ScanShape, bucket, compiled_for
from ppsweep.engine.cost_grid import Costs
from ppsweep.engine.methods import METHODS, SCAN_ENV, check_method, method_backend, scan_implementation  # noqa: F401 - re-exported
from ppsweep.engine.noise import NoiseConfig, op_factors, op_identities, pair_sends, reference_inputs
from ppsweep.engine.tiers import INTER, INTRA, N_TIERS, Tiers, check_worker_node
from ppsweep.last_value import LastValue
from ppsweep.tables.ops import Kind
from ppsweep.engine.program import Program, compute_time, n_duration_rows
from ppsweep.tables.table import ScheduleTable

__all__ = ["DEFAULT_CHUNK", "METHODS", "MODES", "Costs", "SimResult", "check_method", "check_mode", "method_backend", "simulate",
           "simulate_costs"]

#: Default ``chunk``: most points one compiled scan call handles per device (its state stays in
#: the CPU's cache; measured on 2 cores: 1024 points ~2x faster than 16384).
DEFAULT_CHUNK = 1024

#: Most bytes of float rows one scan tile keeps (its duration table, its carried state and, with
#: noise, its lanes' products): a tile has the most points, in powers of two from 256 up to
#: ``chunk``, whose rows fit. Past about this size a tile's waves slow down two- to four-fold
#: (p=8, m=32 on 2 cores, one thread, per point: 1F1B (81 rows) as fast at 512 and 1024 points;
#: Hanayo (121 rows) 2x faster at 512 than at 1024; Chimera in contention (243 rows) 2x faster
#: at 256 or 512 than at 1024; 1F1B 5x slower at 2048 than at 1024).
TILE_BYTES = 1 << 20

#: Points whose costs the scan expands from their broadcast arrays at once (bounds its memory).
HOST_BATCH = 1 << 18


def simulate(
    table: ScheduleTable,
    t_f: Any,
    t_b: Any = None,
    alpha: Any = None,
    beta: Any = None,
    msg_bytes: Any = None,
    mode: str = "overlap",
    *,
    t_i: Any = None,
    t_w: Any = None,
    grad_bytes: Any = 0.0,
    t_opt: Any = 0.0,
    fb_overlap: Any = 0.0,
    dtype: Any = np.float64,
    chunk: int = DEFAULT_CHUNK,
    backend: str = AUTO,
    finish: bool = True,
    cap: int = _envelope.DEFAULT_CAP,
    noise: NoiseConfig | None = None,
    method: str | None = None,
    alpha_intra: Any = None,
    beta_intra: Any = None,
    worker_node: Any = None,
) -> SimResult:
    """Simulate one table at every point of a broadcast grid of costs.

    Two forms: ``simulate(table, costs, mode, ...)`` with a :class:`~ppsweep.engine.cost_grid.Costs`
    (what :func:`ppsweep.cost_model.engine_costs` produces), or ``simulate(table, t_f, t_b, alpha,
    beta, msg_bytes, mode, ...)`` with the costs as arrays (this builds the ``Costs``).

    Per-stage costs (``t_f``, ``t_b``, ``t_i``, ``t_w``, ``grad_bytes``) broadcast against
    ``batch + (S,)``: a trailing axis of length ``S = table.n_stages`` gives one value per stage,
    a trailing axis of length 1 (or a scalar) the same value for every stage. Per-point costs
    (``alpha``, ``beta``, ``msg_bytes``, ``t_opt``) broadcast against ``batch``.

    Args:
      table: the schedule table (its per-worker order is what runs).
      t_f: forward seconds per microbatch of one stage -- or a ``Costs`` (then ``t_b`` is the mode).
      t_b: full-backward seconds per microbatch of one stage.
      alpha: message latency, s (>= 0).
      beta: bandwidth, bytes/s (> 0; ``inf`` for free transfers).
      msg_bytes: bytes of one point-to-point message (>= 0).
      mode: one of :data:`MODES` (docs/contract.md §4).
      t_i, t_w: input- and weight-gradient seconds where the backward is split (default ``t_b/2``).
      grad_bytes: gradient bytes of each stage, for synchronising replicated stages.
      t_opt: optimizer update seconds per worker (0: none).
      fb_overlap: share in [0, 1] of an overlapped pair's forward half hidden under its backward half:
        a pair lasts ``(1 - fb_overlap)·t_f + t_b`` (:func:`ppsweep.tables.ops.pair_time`).
      dtype, chunk, backend, finish, cap, noise, method, worker_node: as in :func:`simulate_costs`.
      alpha_intra, beta_intra: latency and bandwidth of the tier within a node (default ``alpha``,
        ``beta``; :mod:`ppsweep.engine.tiers`); ``alpha``, ``beta`` are the tier between nodes.

    Returns:
      A :class:`SimResult` with arrays of the broadcast shape.
    """
    if isinstance(t_f, Costs):
        loose = {"alpha": alpha, "beta": beta, "msg_bytes": msg_bytes, "t_i": t_i, "t_w": t_w, "alpha_intra": alpha_intra,
                 "beta_intra": beta_intra}
        given = [k for k, v in loose.items() if v is not None]
        if given or not all(np.ndim(v) == 0 and v == 0.0 for v in (grad_bytes, t_opt, fb_overlap)):
            raise ValueError(f"simulate(table, costs, mode): costs come from the Costs alone, got also {given or ['grad_bytes/t_opt/fb_overlap']}")
        return simulate_costs(table, t_f, mode if t_b is None else t_b, dtype=dtype, chunk=chunk, backend=backend,
                              finish=finish, cap=cap, noise=noise, method=method, worker_node=worker_node)
    check_mode(mode)
    backend = _backend_of(backend, method)
    costs = Costs.of(table.n_stages, t_f, t_b, alpha, beta, msg_bytes, t_i=t_i, t_w=t_w, grad_bytes=grad_bytes, t_opt=t_opt,
                     fb_overlap=fb_overlap, alpha_intra=alpha_intra, beta_intra=beta_intra)
    return _simulate_valid_costs(table, costs, mode, dtype=dtype, chunk=chunk, backend=backend, finish=finish, cap=cap, noise=noise,
                                 worker_node=worker_node)


def simulate_costs(
    table: ScheduleTable,
    costs: Costs,
    mode: str = "overlap",
    *,
    dtype: Any = np.float64,
    chunk: int = DEFAULT_CHUNK,
    backend: str = AUTO,
    finish: bool = True,
    cap: int = _envelope.DEFAULT_CAP,
    noise: NoiseConfig | None = None,
    method: str | None = None,
    worker_node: Any = None,
) -> SimResult:
    """Simulate one table at every point of ``costs`` (``simulate(table, costs, mode)``).

    Args:
      table: the schedule table.
      costs: its costs over the grid (validated here against the table's stages).
      mode: one of :data:`MODES`.
      dtype: float64 (default) or float32.
      chunk: most points per compiled scan call and device (the scan's tile; default :data:`DEFAULT_CHUNK`).
      backend: ``auto`` (default), ``scan`` or a registered backend's name (:mod:`ppsweep.engine.backend`):
        which implementation computes it; the result's ``backend`` and ``reason`` say which ran and why.
      finish: compute ``worker_finish``; with False it comes back with a trailing axis of length 0
        (sweeps do not store it, and it is most of the envelope's output).
      cap: most vectors the envelope keeps at one node before falling back to the scan.
      noise: a :class:`ppsweep.engine.noise.NoiseConfig` with ``samples = k > 0``: every point is run
        ``k`` times with the operations' and messages' factors of samples ``0 … k-1`` (drawn
        here, :func:`ppsweep.engine.noise.op_factors`), on the scan (the envelope cannot take
        per-operation noise); results get a trailing axis of length ``k``. Where every factor is
        1 (``noise.is_zero``) the noise-free results are repeated along it.
      method: deprecated (DeprecationWarning): ``auto`` or ``envelope`` is ``backend="auto"``, ``scan`` is
        ``backend="scan"``.
      worker_node: the node of each pipeline worker, ``p`` integers (default: each its own node):
        a message between two workers of one node takes the intra tier (``costs.alpha_intra``,
        ``beta_intra``), any other the tier between nodes (``alpha``, ``beta``); :mod:`ppsweep.engine.tiers`.
        Every backend takes each message's tier.

    Returns:
      A :class:`SimResult` with arrays of the broadcast shape (``+ (k,)`` with noise).

    Raises:
      UnsupportedCase: (a NotImplementedError) where no backend asked for can run the case, with each one's reason.
    """
    backend = _backend_of(backend, method)
    return _simulate_valid_costs(table, _validated(costs, table.n_stages), mode, dtype=dtype, chunk=chunk, backend=backend,
                                 finish=finish, cap=cap, noise=noise, worker_node=worker_node)


def _validated(costs: Costs, n_stages: int) -> Costs:
    """``costs`` checked and broadcast for a table of ``n_stages`` stages (:meth:`Costs.of`): the last
    ones asked for on this thread are kept, so that a sweep, which simulates one table's costs in each
    mode in turn, hands every mode the same object, and what the engine keeps per costs (the
    envelope's features, :func:`_features`) is computed once per table, not once per mode."""
    valid = _VALID_COSTS.get((costs,), n_stages)
    if valid is None:
        valid = _VALID_COSTS.put((costs,), n_stages, Costs.of(
            n_stages, costs.t_f, costs.t_b, costs.alpha, costs.beta, costs.msg_bytes, t_i=costs.t_i, t_w=costs.t_w,
            grad_bytes=costs.grad_bytes, t_opt=costs.t_opt, fb_overlap=costs.fb_overlap, alpha_intra=costs.alpha_intra,
            beta_intra=costs.beta_intra))
    return valid


#: One-entry memo of :func:`_validated` per thread.
_VALID_COSTS = LastValue()


def _backend_of(backend: str, method: str | None) -> str:
    """``backend``, or the deprecated ``method``'s (:func:`method_backend`), then :data:`SCAN_ENV`'s narrowing."""
    if method is not None:
        warnings.warn("simulate(method=...) is deprecated: use backend= (auto, scan or a backend's name)", DeprecationWarning,
                      stacklevel=3)
        if backend != AUTO:
            raise ValueError(f"simulate: give backend= or the deprecated method=, not both (backend={backend!r}, method={method!r})")
        backend = method_backend(method)
    check_backend(backend)
    scan = scan_implementation()
    if scan == "auto":
        return backend
    warnings.warn(f"{SCAN_ENV} is deprecated: use simulate(backend=...) (jax_scan or native_scan)", DeprecationWarning, stacklevel=3)
    return f"{scan}_scan" if backend in (AUTO, SCAN) else backend


def _simulate_valid_costs(table: ScheduleTable, costs: Costs, mode: str, *, dtype: Any, chunk: int, backend: str,
                          finish: bool, cap: int, noise: NoiseConfig | None, worker_node: Any = None) -> SimResult:
    """:func:`simulate_costs` of costs that :meth:`Costs.of` has checked against ``table``'s stages:
    checks, zero noise, then the registry's backend (:func:`ppsweep.engine.backend.choose`)."""
    check_mode(mode)
    worker_node = check_worker_node(worker_node, table.p)
    if not (isinstance(chunk, (int, np.integer)) and not isinstance(chunk, bool) and chunk >= 1):
        raise ValueError(f"engine.chunk: must be an integer >= 1 (points per scan tile), got {chunk!r}")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"engine.dtype: must be float64 or float32, got {dtype!r}") from None
    if dtype not in TIE_TOLERANCE:
        raise ValueError(f"engine.dtype: must be float64 or float32, got {dtype.name}")
    if noise is not None and noise.enabled and noise.is_zero:
        plain = _simulate_valid_costs(table, costs, mode, dtype=dtype, chunk=chunk, backend=backend, finish=finish, cap=cap,
                                      noise=None, worker_node=worker_node)
        rep = lambda a, axis: np.repeat(np.expand_dims(a, axis), noise.samples, axis=axis)  # noqa: E731
        return SimResult(rep(plain.t_sim, -1), rep(plain.worker_finish, -2), rep(plain.comm_time, -1),
                         rep(plain.compute_time, -1), plain.backend, plain.reason)
    noise = noise if noise is not None and noise.enabled else None
    chosen, reason = choose(table, costs, mode, noise, backend, cap, worker_node)
    prepared = chosen.prepare(table, mode, costs, cap=cap, worker_node=worker_node)
    result = chosen.run(prepared, costs, mode, dtype=dtype, chunk=chunk, finish=finish, noise=noise)
    return SimResult(result.t_sim, result.worker_finish, result.comm_time, result.compute_time, chosen.name, reason)


def _scan_result(table: ScheduleTable, costs: Costs, mode: str, dtype: np.dtype, chunk: int, finish: bool,
                 noise: NoiseConfig | None, run: Any, tiers: Tiers) -> SimResult:
    """The scan's results at every point of ``costs`` (``+ (k,)`` samples with ``noise``), each message on
    its tier of ``tiers``, tiles run by ``run`` (:func:`_run_scan` or :func:`_run_native`)."""
    batch = costs.batch
    n = int(np.prod(batch, dtype=np.int64))
    factors = None
    compiled = compiled_for(table)
    if noise is not None:
        batch, n = batch + (noise.samples,), n * noise.samples
        factors = _lane_factors(compiled, table, noise)
    t_sim, fin, comm, compute = _simulate_scan(compiled, costs, batch, np.arange(n), mode, dtype, chunk, factors, run, tiers)
    return SimResult(
        t_sim=t_sim.reshape(batch),
        worker_finish=fin.T.reshape(batch + (table.p,)) if finish else np.zeros(batch + (0,)),
        comm_time=comm.reshape(batch),
        compute_time=compute.reshape(batch),
    )


def _simulate_scan(
    compiled: CompiledTable,
    costs: Costs,
    batch: tuple[int, ...],
    index: np.ndarray,
    mode: str,
    dtype: np.dtype,
    chunk: int,
    factors: "_LaneFactors | None" = None,
    run: Any = None,
    tiers: Tiers | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The scan at the points ``index`` (flat indices into ``batch``): t_sim, finish (p, n), comm, compute,
    its tiles run by ``run`` (default :func:`_run_scan`, the JAX scan; :func:`_run_native`), each message
    on its tier of ``tiers`` (default: every one between nodes).

    Per-point costs are expanded from their broadcast arrays :data:`HOST_BATCH` points at a time,
    so memory beyond the results stays bounded however large the grid. With ``factors`` the last
    axis of ``batch`` is the sample (``index`` then covers whole groups of samples), the costs
    broadcast against the axes before it and are expanded once per group (the scan spreads them
    over the group's samples).
    """
    program = compiled.program
    tiers = compiled.tiers(None) if tiers is None else tiers
    n = index.shape[0]
    t_sim, comm, compute = np.empty(n), np.empty(n), np.empty(n)
    finish = np.empty((program.p, n))
    k = 1 if factors is None else batch[-1]
    grid = batch if factors is None else batch[:-1]
    step = max(1, HOST_BATCH // k) * k  # whole groups of samples
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        # the costs of each point, or with noise of each group of samples (its samples share them)
        point = _scan_point(compiled, costs, grid, index[lo:hi:k] // k, tiers)
        t, f, path_compute = (run or _run_scan)(compiled, mode, point, dtype, chunk, factors, tiers)
        t_sim[lo:hi], finish[:, lo:hi], comm[lo:hi] = t, f, t - path_compute
        if factors is None:
            compute[lo:hi] = compute_time(program, point.dur, point.t_opt)
        else:  # every point's durations, laid out as durations() lays them out (the same sums, to the bit)
            per_point = np.repeat(point.dur.T, k, axis=0).T
            sample = index[lo:hi] % k
            compute[lo:hi] = np.einsum("rn,rn->n", per_point, factors.row_sums[:, sample]) + program.p * np.repeat(point.t_opt, k)
    return t_sim, finish, comm, compute


def _simulate_envelope(
    compiled: CompiledTable,
    costs: Costs,
    feats: "_envelope.Features",
    env: "_envelope.Envelope",
    mode: str,
    dtype: np.dtype,
    chunk: int,
    finish: bool,
    tiers: Tiers,
) -> SimResult:
    """The envelope ``env`` of the features ``feats`` of ``costs`` (messages on ``tiers``) at every point;
    the points the tie rule decides get their ``comm_time`` from the scan (:func:`_preferred_scan`)."""
    batch = costs.batch
    r = _envelope.evaluate(env, feats, batch, dtype, finish=finish, tie_rtol=TIE_TOLERANCE[dtype])
    comm = r.comm_time
    ambiguous = np.flatnonzero(r.ambiguous)
    if ambiguous.size:  # the README's tie rule decides these: ask the scan
        _, _, scanned, _ = _simulate_scan(compiled, costs, batch, ambiguous, mode, dtype, chunk, None, _preferred_scan(), tiers)
        comm = comm.copy()
        comm.flat[ambiguous] = scanned
    return SimResult(
        t_sim=r.t_sim,
        worker_finish=r.finish if finish else np.zeros(batch + (0,)),
        comm_time=comm,
        compute_time=r.compute_time,
    )


def _sync_durations(program: Program, costs: Costs, tiers: Tiers) -> np.ndarray:
    """All-reduce time of each synchronised stage at flat ``costs`` on its tier, ``(n_sync, n)``."""
    out = np.zeros((program.n_sync, costs.alpha.shape[0]))
    alpha, beta = costs.tier_alpha(), costs.tier_beta()
    for k, stage in enumerate(program.sync_stages):
        ring = RingAllReduce(int(np.sum(program.sync_holders[k] >= 0)))
        tier = int(tiers.sync_tier[k])
        out[k] = ring.time(alpha[tier], costs.grad_bytes[:, stage], beta[tier])
    return out


class _Point(NamedTuple):
    """Flat per-point inputs of the scan: durations ``(4S, n)``, ``alpha``, ``wire`` per tier
    ``(N_TIERS, n)`` (:mod:`ppsweep.engine.tiers`), all-reduce times ``(n_sync, n)``, ``t_opt`` ``(n,)``."""

    dur: Any
    alpha: Any
    wire: Any
    sync_dur: Any
    t_opt: Any


def _scan_point(compiled: CompiledTable, costs: Costs, grid: tuple[int, ...], index: np.ndarray, tiers: Tiers) -> _Point:
    """The scan's inputs at the points ``index`` (flat indices into ``grid``; none: a single point) of
    ``costs``, each message on its tier of ``tiers``."""
    program = compiled.program
    flat = costs.at(np.unravel_index(index, grid or (1,)), program.n_stages)
    return _Point(flat.durations(), flat.tier_alpha(), flat.tier_wire(), _sync_durations(program, flat, tiers), flat.t_opt)


def _run_scan(
    compiled: CompiledTable, mode: str, point: _Point, dtype: np.dtype, chunk: int, factors: "_LaneFactors | None" = None,
    tiers: Tiers | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the scan over flat per-point inputs, tile by tile: ``t_sim (n,)``, ``finish (p, n)`` and
    the critical path's compute time ``(n,)``, float64.

    The points are padded (repeating the last) to whole tiles and laid out tile-major once, so a
    tile's inputs are contiguous; every tile writes its results into one output buffer. With
    ``factors`` (``k`` samples) ``point`` holds the costs of groups of samples ``0 … k-1``; a tile
    holds whole groups, its results come out sample-major, so each lane's factors broadcast over it.
    Each lane's message takes its tier of ``tiers`` (default: every one between nodes).
    """
    from ppsweep.engine import jax_scan

    tiers = compiled.tiers(None) if tiers is None else tiers
    shape, blocks, counts = compiled.lanes(mode)
    blocks = tuple(lanes + (tier,) for lanes, tier in zip(blocks, compiled.tier_lanes(tiers)))
    k = 0 if factors is None else factors.compute.shape[-1]
    n = point.alpha.shape[-1] * max(k, 1)  # points (with noise: groups × samples)
    tile = min(chunk, _power_of_two(n, 256), _tile_points(shape, point.dur.shape[0], k))
    if k:
        tile = max(1, tile // k) * k
    size = tile * jax_scan.device_count()
    n_tiles = -(-n // size)
    tiles = _Point(*(_tile_major(a, size // max(k, 1), dtype) for a in point))  # each (n_tiles, …, size or groups)
    t_sim, path = np.empty((n_tiles, size), dtype), np.empty((n_tiles, size), dtype)
    finish = np.empty((n_tiles, shape.p, size), dtype)
    jax_scan.run_tiles(shape, blocks, counts, None if factors is None else (factors.compute, factors.message), k, tiles, dtype,
                       (t_sim, finish, path), _scan_workers())
    t_sim, path = (_point_major(a, k)[:n].astype(np.float64) for a in (t_sim, path))
    finish = _point_major(np.moveaxis(finish, 1, 0), k)[:, :n].astype(np.float64)
    return t_sim, finish, path


def _one_cpu_device() -> bool:
    """Whether JAX runs on one CPU device (where the compiled CPU loop is the faster scan). Without
    importing JAX where nothing could give it another device (:func:`_jax_may_see_devices`): then
    it would run on one CPU device, and a sweep that never scans with JAX never imports it."""
    if "jax" not in sys.modules and not _jax_may_see_devices():
        return True
    import jax

    devices = jax.devices()
    return len(devices) == 1 and devices[0].platform == "cpu"


def _jax_may_see_devices() -> bool:
    """Whether JAX, once imported, might find a device other than one CPU: a platform or a CPU
    device count asked for in the environment, or an accelerator plugin installed (JAX finds them
    in the ``jax_plugins`` namespace package or entry points, or as ``libtpu``)."""
    if os.environ.get("JAX_PLATFORMS", "").strip().lower() not in ("", "cpu"):
        return True
    if "device_count" in os.environ.get("XLA_FLAGS", "") or os.environ.get("JAX_NUM_CPU_DEVICES", "").strip() not in ("", "1"):
        return True
    return _accelerator_plugin_installed()


@functools.cache
def _accelerator_plugin_installed() -> bool:
    """Whether a JAX plugin (CUDA, ROCm, TPU, ...) is installed; looked up once per process."""
    from importlib.metadata import entry_points
    from importlib.util import find_spec

    return bool(find_spec("jax_plugins") or find_spec("libtpu") or entry_points(group="jax_plugins"))


def _preferred_scan():
    """The tile runner of the scan ``auto`` prefers: :func:`_run_native` on one CPU device, else :func:`_run_scan`."""
    return _run_native if _one_cpu_device() else _run_scan


def _run_native(compiled: CompiledTable, mode: str, point: _Point, dtype: np.dtype, chunk: int,
                factors: "_LaneFactors | None" = None, tiers: Tiers | None = None,
                periodic: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_run_scan` as the compiled CPU loop (:mod:`ppsweep.engine.native_scan`): ranges of
    points on every core (threads; the loop holds no interpreter lock), each carried through the
    table a tile of :func:`_native_tile` points (at most ``chunk``) at a time. With ``factors``
    (``k`` samples) ``point`` holds groups of samples and the results come back group-major, as
    :func:`_run_scan`'s. Each step's message takes its tier of ``tiers`` (default: every one between nodes).
    ``periodic``: step over the runs of waves that repeat once the state does (:mod:`ppsweep.engine.steady_state`)."""
    from ppsweep.engine.envelope_cache import cached_periodic_runs
    from ppsweep.engine.native_scan import run_points, step_factors
    from ppsweep.engine.steady_state import periodic_runs

    steps = compiled.derived(f"native_steps:{mode}", lambda program, _: _native_steps(compiled, mode))
    shape = _runs_shape(compiled, mode, steps)
    runs = compiled.derived(f"periodic_runs:{shape}", lambda program, table: cached_periodic_runs(
        compiled.digest, program, shape, lambda: periodic_runs(steps, program.p, table.m))) if periodic and factors is None else None
    program = compiled.program
    tiers = compiled.tiers(None) if tiers is None else tiers
    k = 0 if factors is None else factors.compute.shape[-1]
    noisy = None if factors is None else step_factors(steps, factors.compute, factors.message, np.dtype(dtype))
    n = point.alpha.shape[-1] * max(k, 1)  # points (with noise: groups × samples)
    state_rows = 2 * (program.p + steps.n_regs + steps.n_res + steps.sync_holders.size + program.p + program.n_sync)
    workers = _scan_workers()
    # every core a tile at least (small grids), each no larger than the caches hold
    tile = max(1, min(chunk, -(-n // workers), _native_tile(state_rows + point.dur.shape[0] + 2, np.dtype(dtype).itemsize)))
    # (n, rows) by point: Costs.durations lays its (rows, n) out column-major, so this is no copy in float64
    dur_t = np.ascontiguousarray(point.dur.T, dtype=dtype)
    alpha, wire, t_opt = (np.ascontiguousarray(a, dtype=dtype) for a in (point.alpha, point.wire, point.t_opt))
    sync_dur = np.ascontiguousarray(point.sync_dur.reshape(-1, point.alpha.shape[-1]), dtype=dtype)
    out = (np.empty(n), np.empty((program.p, n)), np.empty(n))
    # a few ranges of whole tiles per thread, so that threads that run slower still end together
    per_range = tile * max(1, -(-n // (tile * 4 * workers)))
    ranges = [(lo, min(lo + per_range, n)) for lo in range(0, n, per_range)]
    step_tier = tiers.lane_tier(steps.link)
    run = lambda r: run_points(steps, step_tier, dur_t, alpha, wire, sync_dur, t_opt, TIE_TOLERANCE[dtype], tile, out, *r, noisy, runs)  # noqa: E731
    tallying = scan_tally.active()  # decided once: a tally opened meanwhile waits for the next scan
    if tallying:
        run = _timed(run)
    if workers > 1 and len(ranges) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            ran = list(pool.map(run, ranges))
    else:
        ran = [run(r) for r in ranges]
    if tallying:
        scan_tally.record((compiled.table_name, program.p, mode), sum(seconds for _, seconds in ran),
                          steps.wave_start.shape[0] - 1, n, sum(counts for counts, _ in ran))
    return out


def _timed(run: Any) -> Any:
    """``run`` (one range of points of :func:`_run_native`) returning its counts and its seconds."""
    def timed(r: tuple[int, int]) -> tuple[np.ndarray, float]:
        start = time.perf_counter()
        counts = run(r)
        return counts, time.perf_counter() - start

    return timed


def _runs_shape(compiled: CompiledTable, mode: str, steps: Any) -> str:
    """The name a table's periodic runs in ``mode`` are kept under. The one-round modes whose messages
    hold no resource (``overlap``, ``blocking``) have the same steps but for blocking the sender, which
    :func:`~ppsweep.engine.steady_state.periodic_runs` does not read: they share one name and one computation."""
    return "no_resources" if compiled.routing(mode).n_rounds == 1 and steps.held.shape[1] == 0 else mode


def _native_steps(compiled: CompiledTable, mode: str) -> Any:
    """:func:`ppsweep.engine.native_scan.native_steps` of ``compiled`` in ``mode``, from the engine's
    disk cache where it holds them (:mod:`ppsweep.engine.envelope_cache`). The modes whose routing
    has one round per wave (all but ``ports``) take the lanes in one order, so they share its
    :func:`~ppsweep.engine.native_scan.ordered_steps` (built or read once per table) and add their
    messages' resources; ``ports``' steps are kept whole."""
    from ppsweep.engine.comm import scan_lanes
    from ppsweep.engine.envelope_cache import cached_native_steps, cached_ordered_steps
    from ppsweep.engine.native_scan import native_steps, ordered_steps

    routing, program = compiled.routing(mode), compiled.program
    if routing.n_rounds > 1:
        return cached_native_steps(compiled.digest, program, mode, lambda: native_steps(program, routing))
    ordered = compiled.derived("ordered_steps:one_round", lambda program, _: cached_ordered_steps(
        compiled.digest, program, lambda: ordered_steps(program, scan_lanes(program, routing))))
    return native_steps(program, routing, ordered)


def _native_tile(rows: int, itemsize: int) -> int:
    """Most points of a compiled-loop tile whose ``rows`` rows of floats fit :data:`TILE_BYTES`: a
    power of two, at least 256. Measured on 2 cores, 256 points (the design sweep's grid): tables of
    p = 32-64 run 2-2.6x faster with 1 MiB than with 256 KiB (fewer, longer loops per step); p = 8,
    m = 32 is as fast with 128 KiB to 2 MiB; p = 16-64, one thread, 256-point tiles beat 128-point
    ones by 1.1-1.6x and 16-point ones by 4-6x however many rows (each step's fixed cost, about
    60 ns, is paid once per tile)."""
    tile = 256
    while 2 * tile * rows * itemsize <= TILE_BYTES:  # twice the tile still fits
        tile *= 2
    return tile


def _power_of_two(n: int, least: int) -> int:
    """The smallest power of two at least ``n`` and ``least`` (tiles of few points come in few shapes)."""
    return max(least, 1 << max(0, int(n) - 1).bit_length())


def _tile_points(shape: ScanShape, duration_rows: int, k: int) -> int:
    """Most points of a scan tile whose float rows fit :data:`TILE_BYTES`: a power of two, at least 256.

    Rows per point: the duration table (with ``k`` samples, one column per group of ``k`` points,
    and the lanes' products of one block of :data:`NOISY_BLOCK` waves, three rows per lane), and
    twice (time, path compute) the carried workers, registers, resources and synchronisation readiness.
    """
    state = shape.p + shape.n_regs + 2 + shape.n_resources + 1 + shape.n_sync * shape.p + 1
    rows = 2 * state + (duration_rows / k + 3 * shape.p * NOISY_BLOCK if k else duration_rows)
    tile = 256
    while 2 * tile * rows * 8 <= TILE_BYTES:
        tile *= 2
    return tile


def _tile_major(a: np.ndarray, size: int, dtype: np.dtype) -> np.ndarray:
    """Flat points ``(…, n)`` padded (repeating the last point) to whole tiles of ``size`` and laid
    out ``(tiles, …, size)``, contiguous, as ``dtype``."""
    lead, n = a.shape[:-1], a.shape[-1]
    n_tiles = -(-n // size)
    if n_tiles * size > n:
        a = np.concatenate([a, np.repeat(a[..., -1:], n_tiles * size - n, axis=-1)], axis=-1)
    return np.ascontiguousarray(np.moveaxis(a.reshape(lead + (n_tiles, size)), -2, 0), dtype=dtype)


def _point_major(a: np.ndarray, k: int) -> np.ndarray:
    """Results ``(…, tiles, size)`` back to flat points ``(…, tiles·size)``; with ``k`` samples each
    tile's results are sample-major (``k`` blocks of its groups) and come back group-major."""
    lead, (n_tiles, size) = a.shape[:-2], a.shape[-2:]
    if k:  # (…, tiles, k, groups) -> (…, tiles, groups, k)
        a = a.reshape(lead + (n_tiles, k, size // k)).swapaxes(-1, -2)
    return a.reshape(lead + (n_tiles * size,))


@dataclass(frozen=True)
class _LaneFactors:
    """Noise factors laid out like the scan's padded lanes.

    Attributes:
      compute, message: ``(waves padded, p, k)`` factor of the operation in each lane (1 where none).
      row_sums: ``(5·S + 1, k)`` sum of the compute factors of the operations of each duration row.
    """

    compute: np.ndarray
    message: np.ndarray
    row_sums: np.ndarray


def _lane_factors(compiled: CompiledTable, table: ScheduleTable, noise: NoiseConfig) -> _LaneFactors:
    """Draw the noise of every operation of ``table`` in samples ``0 … k-1`` and lay it out in lanes
    (:func:`_noise_layout`)."""
    program = compiled.program
    k = noise.samples
    layout = compiled.derived("noise_layout", _noise_layout)
    f = op_factors(noise, layout.identities, table.p, np.arange(k))
    ones = np.ones((k, 1))
    compute = np.concatenate([f.compute, ones], axis=1)[:, layout.rows[:, 0]]  # row -1: the appended ones
    message = np.concatenate([f.message, ones], axis=1)[:, layout.rows[:, 1]]
    waves = bucket(program.n_waves, WAVE_BLOCK)  # as the scan's padded lanes (ppsweep.engine.compiled)

    def lay_out(values: np.ndarray) -> np.ndarray:
        out = np.ones((waves * program.p, k))
        out[layout.lanes] = values.T
        return out.reshape(waves, program.p, k)

    row_sums = np.zeros((n_duration_rows(program.n_stages), k))
    np.add.at(row_sums, program.cost_row.ravel()[layout.lanes], compute.T)
    return _LaneFactors(lay_out(compute), lay_out(message), row_sums)


class _NoiseLayout(NamedTuple):
    """Where each keyed operation's factors go in a compiled table's lanes (a function of the table alone).

    Attributes:
      identities: ``(n_keys, 4)`` :func:`ppsweep.engine.noise.op_identities` of the table.
      lanes: ``(n_steps,)`` flat active lane of each step of the program.
      rows: ``(n_steps, 2)`` key row of each step's compute and message factor (-1: factor 1).
    """

    identities: np.ndarray
    lanes: np.ndarray
    rows: np.ndarray


def _noise_layout(program: Program, table: ScheduleTable) -> _NoiseLayout:
    """The lanes of the keyed operations of ``table`` compiled as ``program`` (kept with its
    compiled form, :meth:`ppsweep.engine.compiled.CompiledTable.derived`: built once per table).

    Each step of the program (:mod:`ppsweep.engine.program`) takes the factors of the keyed operation it
    runs (:func:`ppsweep.engine.noise.op_identities`): an operation's single step its own; an overlapped
    pair's four steps, in sub-waves 0-3 of its start slot: none (zero length), the forward half's
    compute factor (the pair's forward part), the backward half's compute factor and the message
    factor of the half it sends first, and the message factor of the half it sends second
    (:func:`ppsweep.engine.noise.pair_sends`). Steps ordered by ``(start slot, sub-wave, worker)`` are the
    row-major order of the active lanes (one step per worker per wave).
    """
    sends = pair_sends(table)
    steps = []  # (start, sub-wave, worker, row of its compute factor, row of its message factor); -1: factor 1
    key = 0
    for item in sorted(table.placed_ops(), key=lambda item: (item.start, item.worker)):
        t, w = item.start, item.worker
        if item.op.kind != Kind.FB:
            steps.append((t, 0, w, key, key))
            key += 1
            continue
        sent = [key + half for half in sends[(w, t)]] + [-1, -1]
        steps += [(t, 0, w, -1, -1), (t, 1, w, key, -1), (t, 2, w, key + 1, sent[0]), (t, 3, w, -1, sent[1])]
        key += 2
    steps.sort()
    lanes = np.flatnonzero(program.active.ravel())  # step i sits in flat lane lanes[i]
    if lanes.shape[0] != len(steps):
        raise AssertionError(f"noise: {table.name}: {len(steps)} steps but {lanes.shape[0]} active lanes")
    rows = np.array([s[3:] for s in steps], dtype=np.int64).reshape(-1, 2)
    return _NoiseLayout(op_identities(table), lanes, rows)


def _scan_workers() -> int:
    """Threads that run scan tiles side by side on one device: this evaluator's share of the cores
    (:func:`ppsweep.engine_threads`; XLA's CPU kernels of a tile this small use one core each)."""
    return engine_threads()




# --------------------------------------------------------------------------------------------
# the backends of this module, registered (ppsweep.engine.backend)


def _compile_refusal(table: ScheduleTable, mode: str) -> str | None:
    """Why the compiled table cannot run in ``mode`` (the program or the mode's routing refuses it), or None.

    Only a mode that orders the messages at a port as the table sends them
    (:attr:`~ppsweep.engine.comm.Mode.sends_in_table_order`) can refuse a routing
    (:func:`~ppsweep.engine.comm.route`), so the others are not routed here: a warm run, whose
    envelopes are on disk, then routes only the tables it scans (measured: 2.4 % of a warm design
    run's CPU samples were these routings)."""
    try:
        compiled = compiled_for(table)
        if MODE_RULES[mode].sends_in_table_order:
            compiled.routing(mode)
    except NotImplementedError as err:
        return str(err)
    return None


#: Relative bound of the engine's backends against the reference, float64, on every field (comm_time:
#: ``1e-12 · t_sim`` absolute); tests/conformance holds them to it.
ENGINE_RTOL = 1e-12


class _Prepared(NamedTuple):
    """A table prepared for a backend's :meth:`run`: the table, the node of each worker, the tier of
    each message and synchronisation (:meth:`ppsweep.engine.compiled.CompiledTable.tiers`; None for the
    reference, which reads the nodes), and what the backend built of it."""

    table: ScheduleTable
    worker_node: tuple[int, ...] | None = None
    tiers: Tiers | None = None
    built: Any = None


def _prepare_compiled(table: ScheduleTable, worker_node: tuple[int, ...] | None, built: Any = None) -> _Prepared:
    """A :class:`_Prepared` for the compiled backends: the tiers of ``worker_node`` from the compiled table."""
    tiers = compiled_for(table).tiers(worker_node)
    return _Prepared(table, tiers.worker_node, tiers, built)


class _CompiledScan:
    """What the two scans share: every table the program compiles, every mode, noise; they differ in
    the tile runner (:meth:`runner`) and their priority."""

    is_scan: bool = True

    def supports(self, table: ScheduleTable, costs: Costs, mode: str, noise: Any, *, cap: int,
                 worker_node: tuple[int, ...] | None = None) -> str | None:
        return _compile_refusal(table, mode)

    def prepare(self, table: ScheduleTable, mode: str, costs: Costs, *, cap: int,
                worker_node: tuple[int, ...] | None = None) -> _Prepared:
        return _prepare_compiled(table, worker_node)

    def run(self, prepared: _Prepared, costs: Costs, mode: str, *, dtype: np.dtype, chunk: int, finish: bool,
            noise: Any) -> SimResult:
        return _scan_result(prepared.table, costs, mode, dtype, chunk, finish, noise, self.runner(), prepared.tiers)


@dataclass(frozen=True)
class JaxScan(_CompiledScan):
    """The jit-compiled JAX scan (this module): every table the program compiles, every mode, noise."""

    name: str = "jax_scan"
    tolerance: Tolerance = Tolerance(rtol=ENGINE_RTOL)

    @property
    def priority(self) -> int:
        return 10

    def runner(self) -> Any:
        """The tile runner: :func:`_run_scan`."""
        return _run_scan


@dataclass(frozen=True)
class NativeScan(_CompiledScan):
    """The compiled CPU loop (:mod:`ppsweep.engine.native_scan`): the JAX scan's results to the bit,
    noise included. ``auto`` prefers it to the JAX scan where JAX runs on one CPU device."""

    name: str = "native_scan"
    tolerance: Tolerance = Tolerance(rtol=ENGINE_RTOL, exact_to="jax_scan")

    @property
    def priority(self) -> int:
        return 20 if _one_cpu_device() else 5

    def runner(self) -> Any:
        """The tile runner: :func:`_run_native`."""
        return _run_native


@dataclass(frozen=True)
class PeriodicScan(_CompiledScan):
    """The compiled CPU loop that steps over a table's steady state (:mod:`ppsweep.engine.steady_state`):
    once a block of repeating waves moves every row it writes by one increment, the blocks up to the
    last are added as that increment (docs/contract.md §4, "The periodic scan"); within
    :data:`ENGINE_RTOL` of the reference. ``auto`` prefers it to the plain loop where JAX runs on one
    CPU device; with noise (each step's own factors) it scans every wave, as ``native_scan``."""

    name: str = "periodic_scan"
    tolerance: Tolerance = Tolerance(rtol=ENGINE_RTOL)

    @property
    def priority(self) -> int:
        return 25 if _one_cpu_device() else 4

    def runner(self) -> Any:
        """The tile runner: :func:`_run_native`, stepping over the steady state."""
        return functools.partial(_run_native, periodic=True)


class _Grid(NamedTuple):
    """A grid's points as the piecewise scan takes them (the same in every mode): every point's scan
    inputs and compute time, the plan of its segments (:func:`ppsweep.engine.piecewise.plan`; the
    reason from :func:`~ppsweep.engine.piecewise.grid_lines` where it has none) and the scan's
    inputs at the segments' ends, then at their midpoints (None without a plan)."""

    point: _Point
    compute: np.ndarray
    plan: Any
    first: _Point | None


@dataclass(frozen=True)
class PiecewiseScan:
    """The periodic scan at the ends and midpoints of segments along one axis of the grid; the inner
    points of each segment whose step time is proved affine are interpolated, the rest scanned
    (:mod:`ppsweep.engine.piecewise`; docs/contract.md §4, "The piecewise scan"). Grids with an axis
    that moves the costs on lines, no noise; within :data:`ENGINE_RTOL` of the reference. ``auto``
    prefers it to the periodic scan where JAX runs on one CPU device. Not a ``scan``: not every
    point is scanned."""

    name: str = "piecewise_scan"
    tolerance: Tolerance = Tolerance(rtol=ENGINE_RTOL)
    is_scan: bool = False

    @property
    def priority(self) -> int:
        return 27 if _one_cpu_device() else 3

    def supports(self, table: ScheduleTable, costs: Costs, mode: str, noise: Any, *, cap: int,
                 worker_node: tuple[int, ...] | None = None) -> str | None:
        if noise is not None:
            return "per-operation noise: every point is scanned"
        refused = _compile_refusal(table, mode)
        if refused is not None:
            return refused
        program = compiled_for(table).program
        n_points = int(np.prod(costs.batch, dtype=np.int64))
        if n_points * (n_duration_rows(program.n_stages) + program.n_sync + 2 * N_TIERS + 1) > PIECEWISE_FLOATS:
            return f"its grid's costs pass {PIECEWISE_FLOATS} floats (every point's are kept at once)"
        plan = self._grid(table, costs, worker_node).plan
        return f"the grid: {plan}" if isinstance(plan, str) else None

    def prepare(self, table: ScheduleTable, mode: str, costs: Costs, *, cap: int,
                worker_node: tuple[int, ...] | None = None) -> _Prepared:
        return _prepare_compiled(table, worker_node, self._grid(table, costs, worker_node))

    def run(self, prepared: _Prepared, costs: Costs, mode: str, *, dtype: np.dtype, chunk: int, finish: bool,
            noise: Any) -> SimResult:
        return _piecewise_result(prepared.table, costs, dtype, chunk, finish, prepared.tiers, prepared.built,
                                 functools.partial(_run_native, mode=mode, periodic=True))

    def _grid(self, table: ScheduleTable, costs: Costs, worker_node: tuple[int, ...] | None) -> _Grid:
        """Every point's scan inputs and compute time, and the grid's plan: the last ones asked for on
        this thread are kept (a sweep asks for each mode of a table in turn)."""
        compiled = compiled_for(table)
        tiers = compiled.tiers(worker_node)
        grid = _GRID_MEMO.get((compiled, costs), tiers.worker_node)
        if grid is None:
            batch = costs.batch
            point = _scan_point(compiled, costs, batch, np.arange(int(np.prod(batch, dtype=np.int64))), tiers)
            n = point.t_opt.shape[0]
            every_cost = np.vstack([point.dur, point.alpha, point.wire, point.sync_dur.reshape(-1, n), point.t_opt[None]])
            lines = _piecewise.grid_lines(every_cost, batch)
            plan = lines if isinstance(lines, str) else _piecewise.plan(lines)
            first = None
            if not isinstance(plan, str):  # the segments' ends, then each probed segment's midpoint
                first = _Point(*(np.concatenate([a[..., plan.ends], a[..., plan.probed_ends].mean(axis=-1)], axis=-1) for a in point))
            grid = _GRID_MEMO.put((compiled, costs), tiers.worker_node, _Grid(point, compute_time(compiled.program, point.dur, point.t_opt), plan, first))
        return grid


#: One-entry memo of :meth:`PiecewiseScan._grid` per thread.
_GRID_MEMO = LastValue()

#: Most floats of per-point costs the piecewise scan keeps for one grid (64 MiB): it expands every
#: point's costs at once (the scans expand :data:`HOST_BATCH` points at a time); it declines larger
#: grids, which ``auto`` gives the periodic scan (the design grid at p = 64: about 86,000).
PIECEWISE_FLOATS = 1 << 23


def _piecewise_result(table: ScheduleTable, costs: Costs, dtype: np.dtype, chunk: int, finish: bool, tiers: Tiers, grid: _Grid,
                      run: Any) -> SimResult:
    """The piecewise scan's results (:class:`PiecewiseScan`): ``run`` (the periodic scan's tile runner
    in the mode) at the segments' ends and midpoints, the certified segments interpolated, then
    ``run`` at every point left. With ``finish`` each worker's finish time is certified and
    interpolated too; without it only the step time and the critical path's compute time are."""
    compiled = compiled_for(table)
    p = compiled.program.p
    plan = grid.plan
    outputs = np.full((2 + p, grid.compute.shape[0]), np.nan)  # the step time, the path's compute, each worker's finish
    t, fin, path = run(compiled, point=grid.first, dtype=dtype, chunk=chunk, tiers=tiers)
    scanned = np.vstack([t[None], path[None], fin])
    at = plan.ends.size
    outputs[:, plan.ends] = scanned[:, :at]
    kept = slice(None) if finish else slice(0, 2)
    end_values = outputs[kept][:, plan.probed_ends]  # (k, n_probed, 2)
    exact = np.zeros(plan.segments.shape[0], dtype=bool)
    exact[plan.probed] = _piecewise.certified(end_values, scanned[kept, at:], end_values[0].max(axis=-1))
    _piecewise.interpolate(plan, outputs[kept], exact)
    rest = np.flatnonzero(np.isnan(outputs[0]))
    if rest.size:
        t, fin, path = run(compiled, point=_Point(*(a[..., rest] for a in grid.point)), dtype=dtype, chunk=chunk, tiers=tiers)
        outputs[:, rest] = np.vstack([t[None], path[None], fin])
    batch = costs.batch
    return SimResult(
        t_sim=outputs[0].reshape(batch),
        worker_finish=outputs[2:].T.reshape(batch + (p,)) if finish else np.zeros(batch + (0,)),
        comm_time=(outputs[0] - outputs[1]).reshape(batch),
        compute_time=grid.compute.reshape(batch),
    )


@dataclass(frozen=True)
class EnvelopeBackend:
    """The compiled envelope (:mod:`ppsweep.engine.envelope`): tables whose envelope at the costs'
    features stays within ``cap`` vectors, no noise; within :data:`ENGINE_RTOL` of the reference."""

    name: str = "envelope"
    tolerance: Tolerance = Tolerance(rtol=ENGINE_RTOL)
    is_scan: bool = False

    @property
    def priority(self) -> int:
        return 30

    def supports(self, table: ScheduleTable, costs: Costs, mode: str, noise: Any, *, cap: int,
                 worker_node: tuple[int, ...] | None = None) -> str | None:
        return self._refusal(table, costs, mode, noise, cap, worker_node, None)

    def auto_refusal(self, table: ScheduleTable, costs: Costs, mode: str, noise: Any, *, cap: int,
                     worker_node: tuple[int, ...] | None = None) -> str | None:
        """Why ``auto`` should scan instead: :meth:`supports`' reasons, or a programme whose work passes
        :func:`envelope_budget` (a budget per operation and point of the grid, chosen from measured runs)."""
        budget = envelope_budget(compiled_for(table).program, int(np.prod(costs.batch, dtype=np.int64)))
        return self._refusal(table, costs, mode, noise, cap, worker_node, budget)

    def _refusal(self, table: ScheduleTable, costs: Costs, mode: str, noise: Any, cap: int,
                 worker_node: tuple[int, ...] | None, budget: int | None) -> str | None:
        if noise is not None:
            return "per-operation noise needs a scan"
        refused = _compile_refusal(table, mode)
        if refused is not None:
            return refused
        built = self._built(table, costs, mode, cap, worker_node, budget)
        if isinstance(built[1], _envelope.EnvelopeOverBudget):
            return f"its programme passes auto's budget of work for this grid ({built[1]})"
        if isinstance(built[1], _envelope.EnvelopeTooLarge):
            return f"needs more than cap={cap} vectors"
        return None

    def prepare(self, table: ScheduleTable, mode: str, costs: Costs, *, cap: int,
                worker_node: tuple[int, ...] | None = None) -> _Prepared:
        return _prepare_compiled(table, worker_node, self._built(table, costs, mode, cap, worker_node))

    def run(self, prepared: _Prepared, costs: Costs, mode: str, *, dtype: np.dtype, chunk: int, finish: bool,
            noise: Any) -> SimResult:
        feats, env = prepared.built
        return _simulate_envelope(compiled_for(prepared.table), costs, feats, env, mode, dtype, chunk, finish, prepared.tiers)

    def _built(self, table: ScheduleTable, costs: Costs, mode: str, cap: int, worker_node: tuple[int, ...] | None,
               budget: int | None = None) -> tuple[Any, Any]:
        """The features of ``costs`` (messages on the tiers of ``worker_node``) and the envelope they
        compile to within ``budget`` (or its EnvelopeTooLarge): the last ones asked for on this
        thread are kept, so that auto_refusal or supports, then prepare, build them once (an
        envelope built within a budget serves any budget)."""
        compiled = compiled_for(table)
        tiers = compiled.tiers(worker_node)
        key = (mode, cap, tiers.worker_node)
        last = _ENVELOPE_MEMO.get((table, costs), key)  # (budget, built)
        if last is not None and (last[0] == budget or not isinstance(last[1][1], _envelope.EnvelopeOverBudget)):
            return last[1]
        feats = _features(compiled, costs, tiers)
        built = (feats, compiled.envelope(mode, feats.weights, feats.comm, feats.key(), cap, tiers, budget))
        return _ENVELOPE_MEMO.put((table, costs), key, (budget, built))[1]


#: One-entry memo of :meth:`EnvelopeBackend._built` per thread: the budget it was built within, and it.
_ENVELOPE_MEMO = LastValue()


def _features(compiled: CompiledTable, costs: Costs, tiers: Tiers) -> "_envelope.Features":
    """The envelope features of ``costs`` for ``compiled``'s program with messages on ``tiers``: the
    same in every mode, so the last ones asked for on this thread are kept (a sweep asks for each
    mode of a table in turn)."""
    feats = _FEATURES_MEMO.get((compiled, costs), tiers.worker_node)
    if feats is None:
        feats = _envelope.features(compiled.program, costs.stages(), costs.alpha, costs.beta, costs.msg_bytes, costs.t_opt,
                                   ndim=len(costs.batch), tiers=tiers, alpha_intra=costs.alpha_intra, beta_intra=costs.beta_intra)
        _FEATURES_MEMO.put((compiled, costs), tiers.worker_node, feats)
    return feats


#: One-entry memo of :func:`_features` per thread.
_FEATURES_MEMO = LastValue()

#: Work of the envelope's programme (:func:`ppsweep.engine.native_envelope.run_waves`) that ``auto``
#: allows per operation of the table and point of the grid before it scans instead. Chosen from
#: whole ``+sweep=design`` runs (docs/performance.md, "Issue 30, ninth stop"): since the walk
#: drops vectors that a mix of two others covers, most walks fit the cap, and a walk costs a cold
#: run more than the periodic scan of its 256 points. Between 0.2 and 0.5 the cold run no longer
#: moved within the noise while a warm run stayed 6-8 s inside its target; 2.0 cost cold 15 s,
#: 0.1 gave the warm gain back (measured beside it). Measured again at the tenth stop, with the walk
#: 1.23x faster: 0.4 and 0.6 still cost cold time (docs/performance.md, "Issue 30, tenth stop").
ENVELOPE_WORK_PER_OP_POINT = 0.25

#: Work ``auto`` allows the envelope's programme whatever the grid (about a millisecond): below
#: it the choice costs nothing worth a changed last bit.
ENVELOPE_MIN_WORK = 1_000_000


def envelope_budget(program: Program, points: int) -> int:
    """Most work ``auto`` lets the envelope's programme do for ``program`` over ``points`` points:
    :data:`ENVELOPE_WORK_PER_OP_POINT` per operation and point, at least :data:`ENVELOPE_MIN_WORK`."""
    return max(ENVELOPE_MIN_WORK, int(ENVELOPE_WORK_PER_OP_POINT * program.n_ops * points))


@dataclass(frozen=True)
class ReferenceBackend:
    """The reference simulator (:func:`ppsweep.engine.reference.reference_simulate`), point by point
    and sample by sample with the engine's own draws (:func:`ppsweep.engine.noise.reference_inputs`);
    float64 whatever ``dtype``. Never chosen by ``auto``: it is what the others are held against."""

    name: str = "reference"
    tolerance: Tolerance = Tolerance()
    is_scan: bool = False

    @property
    def priority(self) -> None:
        return None

    def supports(self, table: ScheduleTable, costs: Costs, mode: str, noise: Any, *, cap: int,
                 worker_node: tuple[int, ...] | None = None) -> str | None:
        return None

    def prepare(self, table: ScheduleTable, mode: str, costs: Costs, *, cap: int,
                worker_node: tuple[int, ...] | None = None) -> _Prepared:
        return _Prepared(table, check_worker_node(worker_node, table.p))

    def run(self, prepared: _Prepared, costs: Costs, mode: str, *, dtype: np.dtype, chunk: int, finish: bool,
            noise: Any) -> SimResult:
        table = prepared.table
        batch = costs.batch
        n = int(np.prod(batch, dtype=np.int64))
        k = 0 if noise is None else noise.samples
        flat = costs.at(np.unravel_index(np.arange(n), batch or (1,)), table.n_stages)
        wire, wire_intra = flat.tier_wire()[INTER], flat.tier_wire()[INTRA]
        nodes = prepared.worker_node
        factors = None if noise is None else op_factors(noise, op_identities(table), table.p, np.arange(k))
        times = np.zeros((3, n, max(k, 1)))  # t_sim, comm_time, compute_time
        finishes = np.zeros((n, max(k, 1), table.p))
        for i in range(n):
            stage = {name: np.asarray(getattr(flat, name)[i], float) for name in ("t_f", "t_b", "t_i", "t_w", "grad_bytes")}
            alpha, beta, msg, t_opt, alpha_intra, beta_intra = (
                float(getattr(flat, name)[i]) for name in ("alpha", "beta", "msg_bytes", "t_opt", "alpha_intra", "beta_intra"))
            durations = {Kind.F: stage["t_f"], Kind.B: stage["t_b"], Kind.I: stage["t_i"], Kind.W: stage["t_w"]}
            for j in range(max(k, 1)):
                drawn = {}
                if factors is not None:
                    ops, msgs = reference_inputs(table, factors, j, durations, alpha, float(wire[i]),
                                                 intra=(alpha_intra, float(wire_intra[i])), worker_node=nodes)
                    drawn = {"op_durations": ops, "message_times": msgs}
                r = _reference.reference_simulate(
                    table, stage["t_f"], stage["t_b"], alpha, beta, msg, mode, t_i=stage["t_i"], t_w=stage["t_w"],
                    grad_bytes=stage["grad_bytes"], t_opt=t_opt, fb_overlap=float(flat.fb_overlap[i]), alpha_intra=alpha_intra,
                    beta_intra=beta_intra, worker_node=nodes, **drawn)
                # the engine's compute_time counts every worker's optimizer update; the reference's does not
                times[:, i, j] = r.t_sim, r.comm_time, r.compute_time + table.p * t_opt
                finishes[i, j] = r.worker_finish
        shape = batch + ((k,) if k else ())
        return SimResult(
            t_sim=times[0].reshape(shape),
            worker_finish=finishes.reshape(shape + (table.p,)) if finish else np.zeros(shape + (0,)),
            comm_time=times[1].reshape(shape),
            compute_time=times[2].reshape(shape),
        )


for _backend in (ReferenceBackend(), JaxScan(), NativeScan(), PeriodicScan(), PiecewiseScan(), EnvelopeBackend()):
    register(_backend)
