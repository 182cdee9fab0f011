"""The engine's max-plus scan compiled to machine code for the CPU (numba): the JAX scan's results, to the bit.

:mod:`ppsweep.engine.core` runs a table's waves as a jit-compiled JAX scan: each wave is about a
dozen XLA kernels over the points of a tile (gathers, the step, scatters), so on a CPU the scan is
bound by kernel overhead, and every new table shape costs a compilation (0.3-2.5 s). This module
runs the same recurrence as one compiled loop -- steps of the table, then the points of a tile --
with no per-table compilation: one kernel serves every table, mode and grid.

Every floating-point operation is the JAX scan's, in its order, so the results are its own to the
bit (tests/conformance compares them on every schedule and mode, with and without noise):

- a time and the compute time of the path that set it travel together (README, "Critical path");
  an operation starts at the later of its worker being free and its input's arrival, and ends its
  duration later;
- a join of several times takes their maximum; the path is that of the first candidate, in
  priority order, within the tie band ``top - tol·|top|``, which XLA computes as one fused
  multiply-add (:func:`tie_floor`, the only product of the noise-free scan);
- within a wave every lane reads the registers as the wave found them (a worker has at most one
  lane per wave, so its own time is updated in place); messages that share a resource take it in
  round order (:func:`ppsweep.engine.comm.route`), each resource changing at once; then the
  gradient synchronisations, the optimizer updates and the step's end (``_scan_end`` of
  :mod:`ppsweep.engine.core`).

Speed: a tile's state is one array ``(rows, 2, tile)`` in the core's nearest caches, and every
loop over its points is branch-free over one object, so LLVM vectorizes it (p=8, m=32, one
thread: 2.6-9x the loop over separate time and path arrays with a scratch row per lane).

With noise (``samples = k``) each point is one sample of a group of costs: a step's duration and
its message's times are multiplied by the step's factors of that sample (:func:`step_factors`),
each product rounded on its own before the addition that uses it, as the JAX noisy scan rounds it.

The JAX scan stays the engine on accelerators and with several devices.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from ppsweep.engine.comm import Routing, scan_lanes
from ppsweep.engine.program import Program
from ppsweep.engine.steady_state import PeriodicRuns, no_runs


#: The decorator of the scan's helpers, which only other compiled functions call: numba builds them
#: no wrapper callable from Python or C (each wrapper of a helper that takes the kernel's record
#: unboxed all of its arrays; without them the scan's kernel compiles in about 1.5 s less), and
#: counts no references to their arrays (``_nrt=False``: they allocate nothing). A reference count
#: is an atomic add: the helpers counted the kernel record's arrays at every call and the message's
#: time rows at every step (with the walk's, native_envelope, 5.7 % of a design sub-grid's CPU samples).
_INNER_OPTIONS = dict(cache=True, nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, _nrt=False)
_inner = numba.njit(**_INNER_OPTIONS)

#: The decorator of the helpers that run at every step of a wave (an operation, its message, a copied
#: row): :data:`_inner`, inlined where it is called (numba's ``inline="always"``). Called, each took
#: every field of its arrays as arguments at every step, and LLVM kept the calls (their vectorized
#: loops made them too large to inline). One call of the periodic scan on interleaved 1F1B, p = 64,
#: m = 1,024 (262,144 operations), ``ports``, one thread (``python scripts/bench.py --skip-table
#: --scan-calls``): one point 13.3-14.9 ms called, 6.7-7.2 ms inlined; 24 points 34 and 25-26 ms;
#: 96 points 44-46 and 36-38 ms. The same operations in the same order: the same bits.
_hot = numba.njit(**_INNER_OPTIONS, inline="always")


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def tie_floor(top, tol):
    """The floor of the tie band, ``top - tol·|top|``, contracted into one fused multiply-add as XLA
    contracts it (the product is not rounded on its own)."""
    return top - tol * abs(top)


# State: one array ``st (rows, 2, tile)``; plane ``T`` holds a time, plane ``P`` the compute time of
# the path that set it. Every helper indexes that one array by row (never a view per row), and
# loads each operand before choosing between them, so that LLVM sees one object and no branch and
# vectorizes the loop over the tile's points.
T, P = 0, 1


@_hot
def _compute(st, w, r, dur, d, b, tol):
    """An operation on worker ``w``: it starts at the later of its worker being free and its input
    in register row ``r`` (-1: none; the worker's path within the tie band), ends its duration
    ``dur[d]`` later; worker ``w`` then holds its end (in place)."""
    if r < 0:
        for i in range(b):
            st[w, T, i] = st[w, T, i] + dur[d, i]
            st[w, P, i] = st[w, P, i] + dur[d, i]
        return
    for i in range(b):
        ft, rt, fp, rp, dd = st[w, T, i], st[r, T, i], st[w, P, i], st[r, P, i], dur[d, i]
        top = max(ft, rt)
        path = fp if ft >= tie_floor(top, tol) else rp
        st[w, T, i] = top + dd
        st[w, P, i] = path + dd


@_hot
def _arrive(st, w, o, msg, mm, b):
    """A message sent at the end held by ``w`` arrives its message time (row ``mm`` of ``msg``) later
    in register row ``o`` (communication: the path's compute time is unchanged)."""
    for i in range(b):
        st[o, T, i] = st[w, T, i] + msg[mm, i]
        st[o, P, i] = st[w, P, i]


@_hot
def _send_held_one(st, w, h, o, wire, mw, msg, mm, b, tol):
    """A message holding one resource (row ``h``): it starts at the later of its data (first) and
    the resource being free, holds the resource for its wire time, arrives its message time after
    its start (rows ``mw`` of ``wire`` and ``mm`` of ``msg``)."""
    for i in range(b):
        et, ht, ep, hp = st[w, T, i], st[h, T, i], st[w, P, i], st[h, P, i]
        top = max(et, ht)
        path = ep if et >= tie_floor(top, tol) else hp
        st[h, T, i] = top + wire[mw, i]
        st[h, P, i] = path
        st[o, T, i] = top + msg[mm, i]
        st[o, P, i] = path


@_hot
def _send_held_two(st, w, e, g, o, wire, mw, msg, mm, b, tol):
    """:func:`_send_held_one` with two resources (a sender's egress ``e``, then a receiver's ingress ``g``)."""
    for i in range(b):
        et, xt, gt, ep, xp, gp = st[w, T, i], st[e, T, i], st[g, T, i], st[w, P, i], st[e, P, i], st[g, P, i]
        top = max(max(et, xt), gt)
        floor = tie_floor(top, tol)
        path = ep if et >= floor else (xp if xt >= floor else gp)
        st[e, T, i] = top + wire[mw, i]
        st[g, T, i] = top + wire[mw, i]
        st[e, P, i] = path
        st[g, P, i] = path
        st[o, T, i] = top + msg[mm, i]
        st[o, P, i] = path


@_hot
def _copy_row(st, src, dst, b):
    """Row ``dst`` takes row ``src``'s time and path."""
    for i in range(b):
        st[dst, T, i] = st[src, T, i]
        st[dst, P, i] = st[src, P, i]


@_inner
def _join_rows(st, rows, n_rows, i, tol):
    """Join of rows ``rows[:n_rows]`` of ``st`` at point ``i`` (in that priority order): ``(top, path)``."""
    top = st[rows[0], T, i]
    for r in range(1, n_rows):
        top = max(top, st[rows[r], T, i])
    if n_rows == 1:
        return top, st[rows[0], P, i]
    floor = tie_floor(top, tol)
    for r in range(n_rows - 1):
        if st[rows[r], T, i] >= floor:
            return top, st[rows[r], P, i]
    return top, st[rows[n_rows - 1], P, i]


class _Kernel(NamedTuple):
    """What :func:`_scan_points` runs, as it takes it: the steps (:class:`NativeSteps`, each
    message's tier in place of its link), then the per-point costs and the noise.

    Attributes:
      wave_start, worker, row, dep, out, held, slot, tier, n_regs, n_res, blocks_sender, sync_order,
        sync_holders, sync_held: as in :class:`NativeSteps` (``tier``: each step's message's tier).
      dur_t: ``(n, 5S + 1)`` durations by point; alpha, wire: ``(n_tiers, n)``; sync_dur: ``(n_sync, n)``;
        t_opt: ``(n,)``.
      samples: ``k`` samples per group of costs (0: no noise); step_cf, step_mf: ``(n_steps, k)``
        each step's compute and message factors.
      run_start, run_block, run_end, run_rows_at, run_rows: the runs of waves the periodic scan may
        step over (:class:`ppsweep.engine.steady_state.PeriodicRuns`; empty: every wave is scanned).
    """

    wave_start: np.ndarray
    worker: np.ndarray
    row: np.ndarray
    dep: np.ndarray
    out: np.ndarray
    held: np.ndarray
    slot: np.ndarray
    tier: np.ndarray
    n_regs: int
    n_res: int
    blocks_sender: bool
    sync_order: np.ndarray
    sync_holders: np.ndarray
    sync_held: np.ndarray
    dur_t: np.ndarray
    alpha: np.ndarray
    wire: np.ndarray
    sync_dur: np.ndarray
    t_opt: np.ndarray
    samples: int
    step_cf: np.ndarray
    step_mf: np.ndarray
    run_start: np.ndarray
    run_block: np.ndarray
    run_end: np.ndarray
    run_rows_at: np.ndarray
    run_rows: np.ndarray


@_inner
def _tile_inputs(samples, dur_t, alpha, wire, start, b, src, sample, dur, wire_b, msg):
    """The inputs of points ``start … start+b-1``: the row ``src`` of each one's per-point inputs
    (with noise, its group's) and its ``sample``; its durations ``dur (rows, b)``, and per tier its
    wire and whole message times ``wire_b``, ``msg (n_tiers, b)``."""
    for i in range(b):
        src[i] = (start + i) // samples if samples else start + i
        if samples:
            sample[i] = (start + i) % samples
    for r in range(dur.shape[0]):
        for i in range(b):
            dur[r, i] = dur_t[src[i], r]
    for j in range(alpha.shape[0]):
        for i in range(b):
            wire_b[j, i] = wire[j, src[i]]
            msg[j, i] = alpha[j, src[i]] + wire[j, src[i]]


@_inner
def _waves(k, st, w0, w1, layout, dur, wire_b, msg, sample, noisy, b, tol):
    """Waves ``w0 … w1-1``, each in turn: every lane computes, reading the registers as the wave
    found them (a worker has one lane); then in round order each message (resources change at once),
    readiness, and in ``blocking`` the sender held until its message arrives. ``layout``: the first
    row of the registers, the resources and the readiness slots; ``noisy``: scratch ``(3, b)`` for a
    noisy step's duration, wire and message times."""
    reg, res, ready = layout[0], layout[1], layout[2]
    for wave in range(w0, w1):
        first, last = k.wave_start[wave], k.wave_start[wave + 1]
        for s in range(first, last):
            r = reg + k.dep[s] if k.dep[s] >= 0 else -1
            if k.samples:
                for i in range(b):
                    noisy[0, i] = dur[k.row[s], i] * k.step_cf[s, sample[i]]
                _compute(st, k.worker[s], r, noisy, np.int64(0), b, tol)
            else:
                _compute(st, k.worker[s], r, dur, k.row[s], b, tol)
        for s in range(first, last):
            w = k.worker[s]
            if k.out[s] >= 0:
                o = reg + k.out[s]
                wires, mw, msgs, mm = wire_b, k.tier[s], msg, k.tier[s]
                if k.samples:
                    for i in range(b):
                        noisy[1, i] = wire_b[mw, i] * k.step_mf[s, sample[i]]
                        noisy[2, i] = msg[mm, i] * k.step_mf[s, sample[i]]
                    wires, mw, msgs, mm = noisy, 1, noisy, 2
                if k.held.shape[1] == 0:
                    _arrive(st, w, o, msgs, mm, b)
                elif k.held.shape[1] == 1:
                    _send_held_one(st, w, res + k.held[s, 0], o, wires, mw, msgs, mm, b, tol)
                else:
                    _send_held_two(st, w, res + k.held[s, 0], res + k.held[s, 1], o, wires, mw, msgs, mm, b, tol)
            if k.slot[s] >= 0:
                _copy_row(st, w, ready + k.slot[s], b)
            if k.out[s] >= 0 and k.blocks_sender:  # blocking: the sender is busy until its message arrives
                _copy_row(st, reg + k.out[s], w, b)


#: The periodic scan steps over ``n`` spans of a run (one or two blocks) only where, at every point,
#: ``n`` times the largest spread of the last span's increments (time and path compute, over the rows
#: a block writes) is at most this fraction of the point's latest time; and it keeps the step only
#: where the span after it moves by the same increments within this fraction plus the spread the
#: step took on (``2 · n · spread``; docs/contract.md §4).
PERIOD_RTOL = 1e-13

#: The rounding one wave may add to an increment, as a fraction of the latest time (float64's ε):
#: once the times pass a power of two their additions round twice as coarsely, so a span's
#: increment drifts by up to about its waves × this × the latest time (measured: interleaved ZB,
#: p = 64, ports, spans of 768 waves: 1.1e-13 of the latest time, every row alike); the check after
#: a step allows one span's worth.
WAVE_ROUNDING = 2.0 ** -52

#: Index of a point's slack in the increments ``inc`` (after the time's ``T`` and the path's ``P``):
#: how far the check after a step lets a row's increment stray (the spread the step took on).
SLACK = 2

#: Fewest points of a tile that step over a run on their own, apart from the tile's other points,
#: which scan on (the points of a tile repeat after different numbers of blocks, or not at all).
SPLIT_LEAST = 32

@_inner
def _snapshot(st, rows, snap, b):
    """``snap[j]`` takes row ``rows[j]``'s time and path."""
    for j in range(rows.shape[0]):
        for i in range(b):
            snap[j, T, i] = st[rows[j], T, i]
            snap[j, P, i] = st[rows[j], P, i]


@_inner
def _spread(st, rows, snap, inc, i):
    """At point ``i``: the largest difference between a row's increment since ``snap`` and ``inc``
    (time and path compute), and the latest time of those rows (NaN where any is not finite)."""
    spread, top = 0.0, 0.0
    for j in range(rows.shape[0]):
        t, pc = st[rows[j], T, i], st[rows[j], P, i]
        spread = max(spread, abs(t - snap[j, T, i] - inc[T, i]), abs(pc - snap[j, P, i] - inc[P, i]))
        top = max(top, abs(t))
    return spread, top


@_inner
def _increments(st, rows, snap, inc, n, b, ok):
    """Per point, the first row's increment since ``snap`` (into ``inc``), and whether every row
    moved by it closely enough that ``n`` more of it stay within :data:`PERIOD_RTOL` (into ``ok``).
    A step of ``n`` increments leaves each row up to ``n · spread`` off the rows it repeats, so two
    rows' next increments may differ by twice that: the check after the step allows it
    (``inc[SLACK]``). Returns how many points may step."""
    count = 0
    for i in range(b):
        inc[T, i] = st[rows[0], T, i] - snap[0, T, i]
        inc[P, i] = st[rows[0], P, i] - snap[0, P, i]
        spread, top = _spread(st, rows, snap, inc, i)
        ok[i] = n * spread <= PERIOD_RTOL * (top + n * abs(inc[T, i]))
        inc[SLACK, i] = 2 * n * spread
        count += ok[i]
    return count


@_inner
def _held_step(st, rows, snap, inc, b, span):
    """Whether every point's rows moved by ``inc`` since ``snap`` (``span`` waves), within
    :data:`PERIOD_RTOL` and the span's :data:`WAVE_ROUNDING` of the latest time plus the slack the
    step took on (``inc[SLACK]``)."""
    for i in range(b):
        spread, top = _spread(st, rows, snap, inc, i)
        if not spread <= (PERIOD_RTOL + span * WAVE_ROUNDING) * top + inc[SLACK, i]:
            return False
    return True


@_inner
def _step_over(st, rows, inc, n, b):
    """Rows ``rows`` move ``n`` increments ``inc`` (the spans stepped over)."""
    for j in range(rows.shape[0]):
        for i in range(b):
            st[rows[j], T, i] = st[rows[j], T, i] + n * inc[T, i]
            st[rows[j], P, i] = st[rows[j], P, i] + n * inc[P, i]


#: What :func:`_scan_points` counts (``counts``): waves × points scanned, points that stepped over a
#: run (once per run), points whose step did not hold, tiles parted.
WAVE_POINTS, STEPPED, UNDONE, SPLITS = 0, 1, 2, 3


@_inner
def _clear(st, rows, b):
    """Rows ``0 … rows-1`` of points ``0 … b-1`` start at 0 (time and path)."""
    for r in range(rows):
        for i in range(b):
            st[r, T, i] = 0.0
            st[r, P, i] = 0.0


@_inner
def _copy_rows(src, dst, rows, b):
    """Rows ``0 … rows-1`` of points ``0 … b-1`` of ``dst`` take ``src``'s."""
    for r in range(rows):
        for i in range(b):
            dst[r, T, i] = src[r, T, i]
            dst[r, P, i] = src[r, P, i]


@_inner
def _move_point(g, i, h, j, ends, st2, dur2, wire2, msg2, src2, sample2, pos2, snap2, inc2):
    """Point ``i`` of buffer set ``g`` becomes point ``j`` of set ``h`` (state, inputs, snapshots)."""
    for r in range(ends):
        st2[h, r, T, j], st2[h, r, P, j] = st2[g, r, T, i], st2[g, r, P, i]
    for r in range(dur2.shape[1]):
        dur2[h, r, j] = dur2[g, r, i]
    for r in range(wire2.shape[1]):
        wire2[h, r, j], msg2[h, r, j] = wire2[g, r, i], msg2[g, r, i]
    src2[h, j], sample2[h, j], pos2[h, j] = src2[g, i], sample2[g, i], pos2[g, i]
    for a in range(2):
        for r in range(snap2.shape[2]):
            snap2[h, a, r, T, j], snap2[h, a, r, P, j] = snap2[g, a, r, T, i], snap2[g, a, r, P, i]
    for a in range(inc2.shape[1]):
        inc2[h, a, j] = inc2[g, a, i]


@_inner
def _synchronise(sync_order, sync_holders, sync_held, sync_dur, st, layout, src, rows, b, tol):
    """The gradient synchronisations, in the order they take their resources: each starts at the
    join of its holders' readiness and its resources (that priority), lasts its time, and frees its
    resources at its end (row ``ends + p + q``)."""
    res, ready, ends = layout[1], layout[2], layout[4]
    p, width = layout[3], sync_holders.shape[1]
    for q in sync_order:
        n = np.int64(0)
        for j in range(width):
            if sync_holders[q, j] >= 0:
                rows[n] = ready + q * width + j  # holder j's readiness (NativeSteps.slot)
                n += 1
        for h in sync_held[q]:
            if h >= 0:
                rows[n] = res + h
                n += 1
        for i in range(b):
            top, path = _join_rows(st, rows, n, i, tol)
            st[ends + p + q, T, i] = top + sync_dur[q, src[i]]
            st[ends + p + q, P, i] = path
        for h in sync_held[q]:
            if h >= 0:
                _copy_row(st, ends + p + q, res + h, b)


@_inner
def _worker_ends(sync_order, sync_holders, t_opt, st, layout, src, mine, b, tol):
    """Each worker's end (row ``ends + w``): the later of its last operation and the synchronisations
    it holds a replica of (that priority), then its optimizer update where ``t_opt > 0``."""
    p, ends = layout[3], layout[4]
    for w in range(p):
        n = 0
        for q in range(sync_order.shape[0]):
            for h in sync_holders[q]:
                if h == w:
                    mine[n] = ends + p + q
                    n += 1
        for i in range(b):
            top, path = st[w, T, i], st[w, P, i]
            if n:
                for r in range(n):
                    top = max(top, st[mine[r], T, i])
                floor = tie_floor(top, tol)
                if not st[w, T, i] >= floor:
                    path = st[mine[n - 1], P, i]
                    for r in range(n - 1):
                        if st[mine[r], T, i] >= floor:
                            path = st[mine[r], P, i]
                            break
            if t_opt[src[i]] > 0:
                st[ends + w, T, i] = top + t_opt[src[i]]
                st[ends + w, P, i] = path + t_opt[src[i]]
            else:
                st[ends + w, T, i] = st[w, T, i]
                st[ends + w, P, i] = st[w, P, i]


@numba.njit(cache=True, nogil=True)
def _scan_points(k, tol, lo, hi, tile, t_out, fin_out, pc_out, counts):
    """Points ``lo … hi-1`` of kernel ``k`` (:class:`_Kernel`) through every step of the table, then
    its step's end, ``tile`` points at a time.

    Steps are in wave order, within a wave by round then worker; ``dep``, ``out``, ``slot``, ``held``
    are -1 where a step reads no register, sends no message, frees no synchronised stage, holds no
    resource; a step's message takes tier ``tier[s]``'s row of ``alpha`` and ``wire``. The outputs
    ``t_out (n,)``, ``fin_out (p, n)`` and ``pc_out (n,)`` (the step time, each worker's finish and
    the critical path's compute time) are indexed by the point.

    With ``samples > 0``, point ``j`` is sample ``j % samples`` of group ``j // samples``: the per-point
    inputs are the group's, and each step's duration and message times are multiplied by its factors
    of that sample, each product rounded on its own (as the JAX noisy scan rounds them: the same bits).

    Where ``k`` has periodic runs (``run_*``; none with noise), the walk steps over each once its
    state repeats (the periodic scan: comments below, docs/contract.md §4); a point that steps over
    nothing takes every wave as above, to the bit. ``counts`` (int64, 4) accumulates the waves ×
    points scanned, the points that stepped over a run, those whose step did not hold, and the
    tiles that parted (:data:`WAVE_POINTS`, :data:`STEPPED`, :data:`UNDONE`, :data:`SPLITS`).
    """
    p = fin_out.shape[0]
    n_sync = k.sync_order.shape[0]
    n_waves = k.wave_start.shape[0] - 1
    dtype = k.dur_t.dtype
    # Rows of the state: workers, registers, resources, synchronisation readiness (one row per
    # holder of each synchronisation), then each worker's end and the synchronisations' ends.
    reg, res, ready = p, p + k.n_regs, p + k.n_regs + k.n_res
    ends = ready + n_sync * k.sync_holders.shape[1]
    layout = (reg, res, ready, p, ends)
    # Two sets of a tile's buffers: where the points of a tile part, those that step over a run
    # finish in one set while the others wait in the other.
    sets = 2 if k.run_start.shape[0] else 1
    st2 = np.empty((sets, ends + p + n_sync, 2, tile), dtype)
    dur2 = np.empty((sets, k.dur_t.shape[1], tile), dtype)
    wire2 = np.empty((sets, k.alpha.shape[0], tile), dtype)
    msg2 = np.empty((sets, k.alpha.shape[0], tile), dtype)
    src2 = np.empty((sets, tile), dtype=np.int64)  # the row of the per-point inputs of each point
    sample2 = np.zeros((sets, tile), dtype=np.int64)
    pos2 = np.empty((sets, tile), dtype=np.int64)  # each point's place in the outputs
    longest = 0  # the most rows a block of a periodic run writes
    for q in range(k.run_start.shape[0]):
        longest = max(longest, k.run_rows_at[q + 1] - k.run_rows_at[q])
    snap2 = np.empty((sets, 2, longest, 2, tile), dtype)  # those rows at the last two block boundaries
    inc2 = np.empty((sets, 3, tile), dtype)  # their increment over a span (T, P) and the step's SLACK, by point
    ok = np.empty(tile, dtype=np.bool_)
    saved = np.empty((ends if k.run_start.shape[0] else 0, 2, tile), dtype)  # the state before a step, while it is checked
    n_runs = k.run_start.shape[0]
    saved_t = 0
    noisy = np.empty((3, tile), dtype)  # a noisy step's duration, wire and message times
    rows = np.empty(max(k.sync_holders.shape[1] + k.sync_held.shape[1], p + n_sync), dtype=np.int64)
    mine = np.empty(max(n_sync, 1), dtype=np.int64)  # the synchronisations a worker holds a replica of
    for start in range(lo, hi, tile):
        g, n = np.int64(0), min(tile, hi - start)  # the buffer set and the points walking in it
        _tile_inputs(k.samples, k.dur_t, k.alpha, k.wire, start, n, src2[g], sample2[g], dur2[g], wire2[g], msg2[g])
        for i in range(n):
            pos2[g, i] = start + i
        _clear(st2[g], ends, n)
        waiting = np.int64(0)  # points parted from the walking ones, in the other set, and where they resume
        t, q, history, newest, pending, span, least, may_split = 0, 0, 0, 0, np.int64(0), np.int64(0), 1, True
        resume = (0, 0, 0, 0, 1)
        while n > 0:
            st, snaps, inc, dur, wire_b, msg, sample = st2[g], snap2[g], inc2[g], dur2[g], wire2[g], msg2[g], sample2[g]
            # The walk through the waves from wave t. Each run of k (run_*) from run q on is scanned a
            # block at a time until the rows a block writes moved by one increment over the last c
            # blocks (c = least, then 2: a span); then `pending` spans are stepped over (up to the
            # run's last whole span), and that span is scanned and checked. Where it did not move by
            # the same increment, the state before the step comes back and the run goes on with
            # spans longer than the failed one. `snaps` keeps the rows at the last two block
            # boundaries (`history` of them valid, `newest` the later). The walk ends at the last wave, or where at least
            # SPLIT_LEAST points but not all may step (`ok` says which): those go on alone.
            # It is written out here, not called: a compiled loop is compiled again at every level
            # that calls it, and the waves' loop is most of the compile time.
            verifying, split = False, False
            while True:
                first, block, end = n_waves, 1, n_waves
                run_rows = k.run_rows[0:0]
                if q < n_runs:
                    first, block, end = k.run_start[q], k.run_block[q], k.run_end[q]
                    run_rows = k.run_rows[k.run_rows_at[q]:k.run_rows_at[q + 1]]
                if pending > 0:  # keep the state, step over, then scan one span to check the step
                    _copy_rows(st, saved, ends, n)
                    saved_t = t
                    _step_over(st, run_rows, inc, pending, n)
                    t, pending, verifying = t + pending * span, 0, True
                if q < n_runs and t >= first and (verifying or end - t >= 3 * block):
                    # the rows at this boundary, over the older of the two kept (after a step: what
                    # the check compares with); none where no later boundary could step
                    newest = 1 - newest
                    _snapshot(st, run_rows, snaps[newest], n)
                    history = min(history + 1, 2)
                if q >= n_runs:
                    target = n_waves
                elif verifying:
                    target = t + span
                elif t < first:
                    target = first
                elif t + block <= end:
                    target = t + block
                else:
                    q, history, least = q + 1, 0, 1
                    continue
                _waves(k, st, t, target, layout, dur, wire_b, msg, sample, noisy, n, tol)
                counts[WAVE_POINTS] += (target - t) * n
                t = target
                if q >= n_runs:
                    break
                if verifying:
                    verifying = False
                    if _held_step(st, run_rows, snaps[newest], inc, n, span):
                        q, history, least = q + 1, 0, 1
                        counts[STEPPED] += n
                    else:  # the step did not hold: back to the state before it, scanning on
                        counts[UNDONE] += n
                        _copy_rows(saved, st, ends, n)
                        t, history, least = saved_t, 0, span // block + 1
                    continue
                if t == first:
                    continue
                for c in range(least, 3):  # one block, then two
                    spans = (end - t) // (c * block) - 1  # to step over, leaving the last to check the step
                    if spans < 1 or history < c:
                        break
                    count = _increments(st, run_rows, snaps[newest if c == 1 else 1 - newest], inc, spans, n, ok)
                    if count == n:
                        pending, span = spans, c * block
                        break
                    if c == 2 and may_split and count >= SPLIT_LEAST:
                        pending, span, split = spans, c * block, True
                        break
                if split:
                    break
            if split:  # the points that may step go on alone; the others wait in the other set
                walking = np.int64(0)
                for i in range(n):
                    if ok[i]:
                        _move_point(g, i, g, walking, ends, st2, dur2, wire2, msg2, src2, sample2, pos2, snap2, inc2)
                        walking += 1
                    else:
                        _move_point(g, i, 1 - g, waiting, ends, st2, dur2, wire2, msg2, src2, sample2, pos2, snap2, inc2)
                        waiting += 1
                n, resume, may_split = walking, (t, q, history, newest, least), False
                counts[SPLITS] += 1
                continue
            src, pos = src2[g], pos2[g]
            _synchronise(k.sync_order, k.sync_holders, k.sync_held, k.sync_dur, st, layout, src, rows, n, tol)
            for w in range(p):
                for i in range(n):
                    fin_out[w, pos[i]] = st[w, T, i]
            _worker_ends(k.sync_order, k.sync_holders, k.t_opt, st, layout, src, mine, n, tol)
            for r in range(p + n_sync):  # the step: the latest of the workers' and the synchronisations' ends
                rows[r] = ends + r
            for i in range(n):
                t_out[pos[i]], pc_out[pos[i]] = _join_rows(st, rows, p + n_sync, i, tol)
            g, n, waiting = 1 - g, waiting, np.int64(0)
            t, q, history, newest, least = resume
            pending, may_split = np.int64(0), True


class NativeSteps(NamedTuple):
    """A compiled table's steps for :func:`run`, in one mode (module docstring).

    Attributes:
      wave_start: ``(n_waves + 1,)`` first step of each wave.
      worker, row, dep, out, slot, link: per step, its worker, duration row, register read, register
        written, readiness slot and the directed link of its message (-1: none; the link gives its
        tier, :meth:`ppsweep.engine.tiers.Tiers.lane_tier`). A readiness slot is ``q·H + j`` for holder
        ``j`` of synchronisation ``q`` (``H``: the width of ``sync_holders``), one row per holder
        where the program keeps ``p`` per synchronisation.
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
    link: np.ndarray
    n_regs: int
    n_res: int
    blocks_sender: bool
    sync_order: np.ndarray
    sync_holders: np.ndarray
    sync_held: np.ndarray


class OrderedSteps(NamedTuple):
    """What a program's steps are in one order of its lanes, whatever the mode's resources
    (:func:`ordered_steps`): :class:`NativeSteps`' fields of the same names."""

    wave_start: np.ndarray
    worker: np.ndarray
    row: np.ndarray
    dep: np.ndarray
    out: np.ndarray
    slot: np.ndarray
    link: np.ndarray

    def lanes(self, p: int) -> np.ndarray:
        """Each step's lane ``wave·p + worker`` (not kept: in the steps' order the lanes are
        increasing numbers, which compress about 3:1 where the steps' own arrays compress 25:1)."""
        wave = np.repeat(np.arange(self.wave_start.shape[0] - 1, dtype=np.int64), np.diff(self.wave_start))
        return wave * p + self.worker


def ordered_steps(program: Program, lane: np.ndarray) -> OrderedSteps:
    """The steps of ``program`` taken in the order ``lane`` (:func:`ppsweep.engine.comm.scan_lanes`).
    Every mode whose routing has one round per wave takes the lanes in the same order, so their
    steps share these arrays and differ only in the resources their messages hold (:func:`native_steps`)."""
    t, w = np.divmod(lane, program.p)

    def steps(lanes: np.ndarray, none: int) -> np.ndarray:
        values = lanes.reshape(-1)[lane].astype(np.int64, copy=False)  # a new array: changed in place
        values[values == none] = -1
        return values

    holders = _sync_holders(program)
    # the program's readiness slot q·p + w as holder j of q: q·H + j (a slot no holder reads is dropped)
    compact = np.full(program.n_sync * program.p + 1, -1, dtype=np.int64)
    q, j = np.nonzero(holders >= 0)
    compact[q * program.p + holders[q, j]] = q * holders.shape[1] + j
    slot = steps(program.sync_slot, program.trash_sync)
    return OrderedSteps(
        wave_start=np.searchsorted(t, np.arange(program.n_waves + 1)).astype(np.int64),
        worker=w.astype(np.int64),
        row=program.cost_row.reshape(-1)[lane].astype(np.int64),
        dep=steps(program.dep_reg, program.zero_reg),
        out=steps(program.out_reg, program.trash_reg),
        slot=np.where(slot >= 0, compact[slot], -1),
        link=steps(program.link, program.trash_link),
    )


def _sync_holders(program: Program) -> np.ndarray:
    """``(n_sync, H)`` holders of each synchronised stage, -1 padded (``(0, 1)`` without any)."""
    return (np.ascontiguousarray(program.sync_holders, dtype=np.int64).reshape(program.n_sync, -1) if program.n_sync
            else np.full((0, 1), -1, dtype=np.int64))


def native_steps(program: Program, routing: Routing, ordered: OrderedSteps | None = None) -> NativeSteps:
    """The steps of ``program`` in ``routing``'s mode, in the order :func:`run` takes them.

    Args:
      program: the compiled table; routing: its resources in the mode.
      ordered: :func:`ordered_steps` in ``routing``'s lane order, where the caller has them (another
        mode's, in the same order); None: built here.
    """
    lane = None
    if ordered is None:
        lane = scan_lanes(program, routing)
        ordered = ordered_steps(program, lane)
    width = max([len(r) for r in routing.sync_resources], default=0)
    sync_held = np.full((program.n_sync, max(width, 1)), -1, dtype=np.int64)
    for q, resources in enumerate(routing.sync_resources):
        sync_held[q, : len(resources)] = resources
    waves, p, per_lane = routing.lane_resources.shape
    if per_lane == 0:  # a mode whose messages hold nothing
        held = np.empty((ordered.worker.shape[0], 0), dtype=np.int64)
    else:  # np.take of whole rows: 1.5 ms against 8.8 ms for lane_resources[lane] at half a million steps
        lane = ordered.lanes(p) if lane is None else lane
        held = np.take(routing.lane_resources.reshape(waves * p, per_lane), lane, axis=0)
    return NativeSteps(
        **ordered._asdict(),
        held=np.ascontiguousarray(held, dtype=np.int64),  # -1: no resource (route's)
        n_regs=program.n_regs,
        n_res=routing.n_resources,
        blocks_sender=routing.mode.blocks_sender,
        sync_order=program.sync_order.astype(np.int64),
        sync_holders=_sync_holders(program),
        sync_held=sync_held,
    )


def run_points(steps: NativeSteps, step_tier: np.ndarray, dur_t: np.ndarray, alpha: np.ndarray, wire: np.ndarray,
               sync_dur: np.ndarray, t_opt: np.ndarray, tol: float, tile: int, out: tuple[np.ndarray, np.ndarray, np.ndarray],
               lo: int, hi: int, factors: tuple[np.ndarray, np.ndarray] | None = None, runs: PeriodicRuns | None = None) -> np.ndarray:
    """The scan over points ``lo … hi-1``, ``tile`` points at a time, in the inputs' float dtype
    (float64 or float32, every input the same).

    Args:
      steps: the table's steps (:func:`native_steps`).
      step_tier: ``(n_steps,)`` the tier of each step's message (:meth:`ppsweep.engine.tiers.Tiers.lane_tier`
        of ``steps.link``).
      dur_t: ``(n, 5S + 1)`` durations by point; alpha, wire: ``(n_tiers, n)`` (:mod:`ppsweep.engine.tiers`);
        t_opt: ``(n,)``; sync_dur: ``(n_sync, n)``.
      tol: the tie tolerance of a join (:data:`ppsweep.engine.core.TIE_TOLERANCE`).
      tile: most points whose state is carried at once (any size gives the same results).
      out: ``t_sim (n,)``, ``finish (p, n)`` and the critical path's compute time ``(n,)``, float64:
        written at ``lo … hi-1`` (threads may fill disjoint ranges of the same arrays).
      factors: with noise, each step's compute and message factors ``(n_steps, k)`` (:func:`step_factors`);
        the points are then ``groups × k`` (sample last) and the per-point inputs the groups'.
      runs: the runs of waves to step over once they repeat (:func:`ppsweep.engine.steady_state.periodic_runs`;
        the periodic scan), or None: every wave (the JAX scan's results to the bit). Not with noise.

    Returns:
      What the walk counted (:func:`_scan_points`' ``counts``: waves × points scanned, points that
      stepped over a run, points whose step did not hold, tiles that parted).
    """
    t_out, fin_out, pc_out = out
    if runs is None:
        runs = no_runs()
    elif factors is not None:
        raise ValueError("run_points: a periodic scan takes no noise (each step's factors differ)")
    k = 0 if factors is None else factors[0].shape[1]
    cf, mf = (np.ones((1, 1), dur_t.dtype),) * 2 if factors is None else factors
    costs = (_read_only(a) for a in (dur_t, alpha, wire, sync_dur, t_opt))
    kernel = _Kernel(steps.wave_start, steps.worker, steps.row, steps.dep, steps.out, steps.held, steps.slot,
                     np.ascontiguousarray(step_tier, dtype=np.int64), steps.n_regs, steps.n_res, steps.blocks_sender,
                     steps.sync_order, steps.sync_holders, steps.sync_held, *costs, k, _read_only(cf), _read_only(mf),
                     *runs)
    counts = np.zeros(4, dtype=np.int64)
    _scan_points(kernel, dur_t.dtype.type(tol), lo, hi, tile, t_out, fin_out, pc_out, counts)
    return counts


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``: numba types a read-only array apart from a writable one, so the
    kernel's inputs are always read-only views (a cost that repeats arrives as one, and each
    distinct type would compile the whole kernel again, about 12 s)."""
    view = a.view()
    view.flags.writeable = False
    return view


def step_factors(steps: NativeSteps, compute: np.ndarray, message: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Each step's compute and message factors ``(n_steps, k)`` from the lanes' ``(waves, p, k)``
    (:class:`ppsweep.engine.core._LaneFactors`), in ``dtype``."""
    wave = np.repeat(np.arange(steps.wave_start.shape[0] - 1), np.diff(steps.wave_start))
    return tuple(np.ascontiguousarray(a[wave, steps.worker], dtype=dtype) for a in (compute, message))
