"""The engine's max-plus scan compiled to machine code for the CPU (numba): the JAX scan's results, to the bit.

:mod:`ppsweep.engine.core` runs a table's waves as a jit-compiled JAX scan: each wave is about a
dozen XLA kernels over the points of a tile (gathers, the step, scatters), so on a CPU the scan is
bound by kernel overhead, and every new table shape costs a compilation (0.3-2.5 s). This module
runs the same recurrence as one compiled loop -- steps of the table, then the points of a tile --
with no per-table compilation: one kernel serves every table, mode and grid.

Every floating-point operation is the JAX scan's, in its order, so the results are its own to the
bit (tests/test_native_scan.py compares them on every schedule and mode):

- a time and the compute time of the path that set it travel together (README, "Critical path");
  an operation starts at the later of its worker being free and its input's arrival, and ends its
  duration later;
- a join of several times takes their maximum; the path is that of the first candidate, in
  priority order, within the tie band ``top - tol·|top|``, which XLA computes as one fused
  multiply-add (:func:`tie_floor`, the only product of the noise-free scan);
- within a wave every lane reads the registers as the wave found them; messages that share a
  resource take it in round order (:func:`ppsweep.engine.comm.route`), each resource changing at
  once; then the gradient synchronisations, the optimizer updates and the step's end
  (``_scan_end`` of :mod:`ppsweep.engine.core`).

The JAX scan stays the engine on accelerators, with several devices, and with noise.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from ppsweep.engine.comm import Routing
from ppsweep.engine.program import Program


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def tie_floor(top, tol):
    """The floor of the tie band, ``top - tol·|top|``, contracted into one fused multiply-add as XLA
    contracts it (the product is not rounded on its own)."""
    return top - tol * abs(top)


@numba.njit(cache=True, nogil=True)
def _start_end(free_t, free_p, reg_t, reg_p, d, end_t, end_p, tol):
    """An operation with an input from another worker: it starts at the later of its worker being
    free and the input's arrival (the worker's path within the tie band), ends ``d`` later."""
    for i in range(free_t.shape[0]):
        top = max(free_t[i], reg_t[i])
        path = free_p[i] if free_t[i] >= tie_floor(top, tol) else reg_p[i]
        end_t[i] = top + d[i]
        end_p[i] = path + d[i]


@numba.njit(cache=True, nogil=True)
def _plus(src_t, src_p, d, dst_t, dst_p):
    """``dst = src + d`` for a time and its path's compute time (a duration of compute)."""
    for i in range(src_t.shape[0]):
        dst_t[i] = src_t[i] + d[i]
        dst_p[i] = src_p[i] + d[i]


@numba.njit(cache=True, nogil=True)
def _copy(src_t, src_p, dst_t, dst_p):
    """``dst = src`` for a time and its path's compute time."""
    for i in range(src_t.shape[0]):
        dst_t[i] = src_t[i]
        dst_p[i] = src_p[i]


@numba.njit(cache=True, nogil=True)
def _arrive(go_t, go_p, msg, arr_t, arr_p):
    """A message that starts at ``go`` arrives its message time later (communication: the path's
    compute time is unchanged)."""
    for i in range(go_t.shape[0]):
        arr_t[i] = go_t[i] + msg[i]
        arr_p[i] = go_p[i]


@numba.njit(cache=True, nogil=True)
def _send_held_one(end_t, end_p, h_t, h_p, wire, msg, arr_t, arr_p, tol):
    """A message holding one resource: it starts at the later of its data (first) and the resource
    being free, holds the resource for its wire time, arrives its message time after its start."""
    for i in range(end_t.shape[0]):
        top = max(end_t[i], h_t[i])
        path = end_p[i] if end_t[i] >= tie_floor(top, tol) else h_p[i]
        h_t[i] = top + wire[i]
        h_p[i] = path
        arr_t[i] = top + msg[i]
        arr_p[i] = path


@numba.njit(cache=True, nogil=True)
def _send_held_two(end_t, end_p, e_t, e_p, g_t, g_p, wire, msg, arr_t, arr_p, tol):
    """:func:`_send_held_one` with two resources (a sender's egress, then a receiver's ingress port)."""
    for i in range(end_t.shape[0]):
        top = max(max(end_t[i], e_t[i]), g_t[i])
        floor = tie_floor(top, tol)
        if end_t[i] >= floor:
            path = end_p[i]
        elif e_t[i] >= floor:
            path = e_p[i]
        else:
            path = g_p[i]
        e_t[i] = g_t[i] = top + wire[i]
        e_p[i] = g_p[i] = path
        arr_t[i] = top + msg[i]
        arr_p[i] = path


@numba.njit(cache=True, nogil=True)
def _join_rows(times, paths, rows, n_rows, i, tol):
    """Join of ``times[rows[:n_rows], i]`` (in that priority order): ``(top, path)``."""
    top = times[rows[0], i]
    for r in range(1, n_rows):
        top = max(top, times[rows[r], i])
    if n_rows == 1:
        return top, paths[rows[0], i]
    floor = tie_floor(top, tol)
    for r in range(n_rows - 1):
        if times[rows[r], i] >= floor:
            return top, paths[rows[r], i]
    return top, paths[rows[n_rows - 1], i]


@numba.njit(cache=True, nogil=True)
def _scan_tile(wave_start, worker, row, dep, out, held, slot, n_regs, n_res, blocks_sender,
               sync_order, sync_holders, sync_held, dur, alpha, wire, sync_dur, t_opt, tol, t_out, fin_out, pc_out):
    """One tile of points through every step of the table, then its step's end (module docstring).

    Steps are in wave order, within a wave by round then worker; ``dep``, ``out``, ``slot``, ``held``
    are -1 where a step reads no register, sends no message, frees no synchronised stage, holds no
    resource. Writes ``t_out (n,)``, ``fin_out (p, n)`` and ``pc_out (n,)``: the step time, each
    worker's finish and the critical path's compute time.
    """
    p, n = fin_out.shape
    n_sync = sync_order.shape[0]
    k_held = held.shape[1]
    dtype = dur.dtype
    # State: times and, beside each, its path's compute time. Rows of the joined-time scratch:
    # workers, registers, resources, synchronisation readiness (the layout the end phase joins over).
    n_rows = p + n_regs + n_res + n_sync * p
    times = np.zeros((n_rows, n), dtype)
    paths = np.zeros((n_rows, n), dtype)
    reg, res, ready = p, p + n_regs, p + n_regs + n_res
    end_t = np.empty((p, n), dtype)  # this wave's operation ends, one row per lane
    end_p = np.empty((p, n), dtype)
    msg = np.empty(n, dtype)
    for i in range(n):
        msg[i] = alpha[i] + wire[i]
    for t in range(wave_start.shape[0] - 1):
        first = wave_start[t]
        # Every lane of the wave: start and end (registers as the wave found them).
        for s in range(first, wave_start[t + 1]):
            w, lane = worker[s], s - first
            if dep[s] >= 0:
                r = reg + dep[s]
                _start_end(times[w], paths[w], times[r], paths[r], dur[row[s]], end_t[lane], end_p[lane], tol)
            else:  # the zero register: the worker's own time
                _plus(times[w], paths[w], dur[row[s]], end_t[lane], end_p[lane])
        # Then in round order: messages (resources change at once), registers, workers, readiness.
        for s in range(first, wave_start[t + 1]):
            w, lane = worker[s], s - first
            if out[s] >= 0:
                o = reg + out[s]
                if k_held == 0:
                    _arrive(end_t[lane], end_p[lane], msg, times[o], paths[o])
                elif k_held == 1:
                    h = res + held[s, 0]
                    _send_held_one(end_t[lane], end_p[lane], times[h], paths[h], wire, msg, times[o], paths[o], tol)
                else:
                    e, g = res + held[s, 0], res + held[s, 1]
                    _send_held_two(end_t[lane], end_p[lane], times[e], paths[e], times[g], paths[g], wire, msg,
                                   times[o], paths[o], tol)
            if out[s] >= 0 and blocks_sender:  # blocking: the sender is busy until its message arrives
                _copy(times[reg + out[s]], paths[reg + out[s]], times[w], paths[w])
            else:
                _copy(end_t[lane], end_p[lane], times[w], paths[w])
            if slot[s] >= 0:
                _copy(end_t[lane], end_p[lane], times[ready + slot[s]], paths[ready + slot[s]])
    # The step's end: synchronisations in the order they take their resources, each worker's
    # optimizer update, then the latest of the workers and the synchronisations.
    sync_t = np.zeros((max(n_sync, 1), n), dtype)
    sync_p = np.zeros((max(n_sync, 1), n), dtype)
    rows = np.empty(sync_holders.shape[1] + sync_held.shape[1], dtype=np.int64)
    for q in sync_order:
        k = 0
        for h in sync_holders[q]:
            if h >= 0:
                rows[k] = ready + q * p + h
                k += 1
        for h in sync_held[q]:
            if h >= 0:
                rows[k] = res + h
                k += 1
        for i in range(n):
            top, path = _join_rows(times, paths, rows, k, i, tol)
            sync_t[q, i] = top + sync_dur[q, i]
            sync_p[q, i] = path
        for h in sync_held[q]:
            if h >= 0:
                for i in range(n):
                    times[res + h, i] = sync_t[q, i]
                    paths[res + h, i] = sync_p[q, i]
    for w in range(p):
        for i in range(n):
            fin_out[w, i] = times[w, i]
    # Each worker's end (with its optimizer update) and each synchronisation's end, joined.
    ends_t = np.empty((p + n_sync, n), dtype)
    ends_p = np.empty((p + n_sync, n), dtype)
    mine = np.empty(max(n_sync, 1), dtype=np.int64)  # the synchronisations a worker holds a replica of
    for w in range(p):
        k = 0
        for q in range(n_sync):
            for h in sync_holders[q]:
                if h == w:
                    mine[k] = q
                    k += 1
        for i in range(n):
            top, path = times[w, i], paths[w, i]
            if k:  # the later of the worker's last operation and its synchronisations (that priority)
                for r in range(k):
                    top = max(top, sync_t[mine[r], i])
                floor = tie_floor(top, tol)
                if not times[w, i] >= floor:
                    path = sync_p[mine[k - 1], i]
                    for r in range(k - 1):
                        if sync_t[mine[r], i] >= floor:
                            path = sync_p[mine[r], i]
                            break
            if t_opt[i] > 0:
                ends_t[w, i] = top + t_opt[i]
                ends_p[w, i] = path + t_opt[i]
            else:
                ends_t[w, i] = times[w, i]
                ends_p[w, i] = paths[w, i]
    for q in range(n_sync):
        for i in range(n):
            ends_t[p + q, i] = sync_t[q, i]
            ends_p[p + q, i] = sync_p[q, i]
    every = np.arange(p + n_sync)
    for i in range(n):
        t_out[i], pc_out[i] = _join_rows(ends_t, ends_p, every, p + n_sync, i, tol)


class NativeSteps(NamedTuple):
    """A compiled table's steps for :func:`run`, in one mode (module docstring).

    Attributes:
      wave_start: ``(n_waves + 1,)`` first step of each wave.
      worker, row, dep, out, slot: per step, its worker, duration row, register read, register
        written and readiness slot (-1: none).
      held: ``(n_steps, k)`` the resources its message holds (-1: none).
      n_regs, n_res: registers and resources.
      blocks_sender: the sender is busy until its message arrives.
      sync_order: synchronisations in the order they take their resources.
      sync_holders: ``(n_sync, H)`` holders of each synchronised stage (-1 padded).
      sync_held: ``(n_sync, M)`` resources of its ring hops (-1 padded).
    """

    wave_start: np.ndarray
    worker: np.ndarray
    row: np.ndarray
    dep: np.ndarray
    out: np.ndarray
    held: np.ndarray
    slot: np.ndarray
    n_regs: int
    n_res: int
    blocks_sender: bool
    sync_order: np.ndarray
    sync_holders: np.ndarray
    sync_held: np.ndarray


def native_steps(program: Program, routing: Routing) -> NativeSteps:
    """The steps of ``program`` in ``routing``'s mode, in the order :func:`run` takes them."""
    t, w = np.nonzero(program.active)  # by wave, then worker
    if routing.n_rounds > 1:  # within a wave by round, then worker (the scan's round loop)
        order = np.lexsort((w, routing.rounds[t, w], t))
        t, w = t[order], w[order]

    def steps(lanes: np.ndarray, none: int) -> np.ndarray:
        values = lanes[t, w]
        return np.where(values == none, -1, values).astype(np.int64)

    width = max([len(r) for r in routing.sync_resources], default=0)
    sync_held = np.full((program.n_sync, max(width, 1)), -1, dtype=np.int64)
    for q, resources in enumerate(routing.sync_resources):
        sync_held[q, : len(resources)] = resources
    held = routing.lane_resources[t, w]
    return NativeSteps(
        wave_start=np.searchsorted(t, np.arange(program.n_waves + 1)).astype(np.int64),
        worker=w.astype(np.int64),
        row=program.cost_row[t, w].astype(np.int64),
        dep=steps(program.dep_reg, program.zero_reg),
        out=steps(program.out_reg, program.trash_reg),
        held=np.ascontiguousarray(np.where(held < 0, -1, held), dtype=np.int64),
        slot=steps(program.sync_slot, program.trash_sync),
        n_regs=program.n_regs,
        n_res=routing.n_resources,
        blocks_sender=routing.mode.blocks_sender,
        sync_order=program.sync_order.astype(np.int64),
        sync_holders=np.ascontiguousarray(program.sync_holders, dtype=np.int64).reshape(program.n_sync, -1) if program.n_sync
        else np.full((0, 1), -1, dtype=np.int64),
        sync_held=sync_held,
    )


def run_tile(steps: NativeSteps, dur: np.ndarray, alpha: np.ndarray, wire: np.ndarray, sync_dur: np.ndarray,
             t_opt: np.ndarray, tol: float, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The scan over one tile of points, in the inputs' float dtype (float64 or float32).

    Args:
      steps: the table's steps (:func:`native_steps`).
      dur: ``(5S + 1, n)`` durations; alpha, wire: ``(n,)``; sync_dur: ``(n_sync, n)``; t_opt: ``(n,)``.
      tol: the tie tolerance of a join (:data:`ppsweep.engine.core.TIE_TOLERANCE`).
      p: workers.

    Returns:
      ``t_sim (n,)``, ``finish (p, n)`` and the critical path's compute time ``(n,)``.
    """
    dtype = dur.dtype
    n = dur.shape[1]
    t_out, pc_out = np.empty(n, dtype), np.empty(n, dtype)
    fin_out = np.empty((p, n), dtype)
    _scan_tile(steps.wave_start, steps.worker, steps.row, steps.dep, steps.out, steps.held, steps.slot, steps.n_regs,
               steps.n_res, steps.blocks_sender, steps.sync_order, steps.sync_holders, steps.sync_held, dur, alpha,
               wire, sync_dur.reshape(-1, n), t_opt, dtype.type(tol), t_out, fin_out, pc_out)
    return t_out, fin_out, pc_out
