"""The envelope's max-plus programme compiled to machine code (numba): the same vectors, to the bit.

:func:`ppsweep.engine.envelope.build_envelope` walks a table's waves and, within a wave, its lanes,
joining small sets of path vectors at every node (:func:`ppsweep.engine.envelope.prune`). Written
in numpy, that is tens of numpy calls per operation: seconds for a large table, and most of a
design-space sweep. :func:`run_waves` runs the same walk as one compiled loop.

It keeps the reference's arithmetic exactly, so every vector it keeps is the reference's, in the
reference's order, to the bit:

- a join concatenates its sets in argument order and sorts the rows by decreasing sum, stably;
  a row's sum is numpy's (:func:`row_sum`: in order below 8 components, numpy's pairwise
  blocks of 8 up to 128; wider vectors take the reference);
- the rounding tolerance of each component is ``_SAME`` times its largest magnitude in the join;
  a row is dropped where an earlier row (kept or not) is at least as large in every component,
  less that tolerance; then, in the kept order, a kept row is dropped where a mix of two other
  rows still kept covers it (:func:`hull_rows`); more than ``cap`` rows left is the reference's
  :class:`EnvelopeTooLarge`;
- lanes run in the reference's order (by round, then worker); a wave's register writes land after
  its last lane (every lane reads the registers as the wave found them); resources change at once.

Sets live in one pool ``(nodes, cap, J)``: workers ``0 … p-1``, then registers, resources and
synchronisation-readiness slots, each node with its count of rows.

The walk is compiled once per width ``J`` of its vectors (:func:`widths`): with the count of
components fixed, numba's loops over a vector are unrolled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from ppsweep.engine.comm import Routing
from ppsweep.engine.program import Program

#: Widest vectors :func:`row_sum` adds as numpy does (numpy's pairwise block).
MAX_COMPONENTS = 128

#: A programme with a budget ``B`` stops early once its projected work passes
#: ``PACE_FLOOR + (PACE_NUM / PACE_DEN) · B``: after each step, its work so far plus the steps left
#: at the rate of its last :data:`PACE_WINDOW`-th of the steps (compared in integers, so that a
#: cached walk answers a budget exactly as a new one would). A walk's sets grow as a pipeline
#: fills and then keep their size, so a walk that would pass its budget shows it long before it
#: has spent it; the budget alone let every such walk spend its whole budget first (on the design
#: sweep, those doomed walks were 28 % of a cold run). The factor, 1/2, was chosen from whole design
#: runs (docs/performance.md, "Issue 30, fourteenth stop"): against 3/2 it refuses 63 more of the
#: sweep's 7,368 table × mode pairs, which the scan then computes (their last bits move, within
#: 2e-13 of ``t_sim``), and stops the doomed walks sooner: a cold run 5–9 s shorter, a warm one no
#: longer (1/4 made warm runs 2 s longer). The floor leaves room for the first steps.
PACE_NUM, PACE_DEN = 1, 2
PACE_FLOOR = 1_000_000
PACE_WINDOW = 16

#: Work each step of the walk counts besides its joins: what a step costs whatever its sets (loading,
#: adding and storing them: about 0.1-0.2 µs a step on the design sweep's large tables, where a unit of
#: a join's work costs about a nanosecond), so that the walk of a large table with small sets no longer
#: looks almost free beside the scan of a few hundred points. Whole cold design runs (256 points a
#: table and mode), one evaluator each side by side: 5.7-7.1 % less CPU with 128 than without, and 18 %
#: more in a warm run (the tables it scans are scanned again there, where an envelope is read back); 32
#: and 64 cost 4-7 % more cold CPU than 128; 256 1.5 % less, but a warm design run took 41.9 s, past
#: issue 30's 40 s (docs/performance.md, "Issue 30, twenty-second stop"). With 128, ``auto``'s budget
#: (1/4 unit per operation and point, at least 10⁶) refuses, before any walk, tables above 7,812 steps
#: on grids below 512 points (:func:`least_work`), and keeps them on larger grids.
STEP_WORK = 128


def least_work(program: Program) -> int:
    """The least work :func:`run_waves` counts for ``program``, whatever its sets: :data:`STEP_WORK` a step."""
    return STEP_WORK * int(np.count_nonzero(program.active))


@numba.njit(cache=True, nogil=True, inline="always")
def row_sum(v: np.ndarray, i: int, n: int) -> float:
    """``v[i, :n].sum()`` of one row as numpy adds it (rows of at most 128 values).

    Below 8 values in order; from 8 to 128 numpy's pairwise block: eight running sums over
    strides of 8, combined as a tree, then the rest in order.
    """
    if n < 8:
        res = -0.0
        for c in range(n):
            res += v[i, c]
        return 0.0 + res
    r0, r1, r2, r3, r4, r5, r6, r7 = v[i, 0], v[i, 1], v[i, 2], v[i, 3], v[i, 4], v[i, 5], v[i, 6], v[i, 7]
    c = 8
    while c < n - (n % 8):
        r0 += v[i, c]
        r1 += v[i, c + 1]
        r2 += v[i, c + 2]
        r3 += v[i, c + 3]
        r4 += v[i, c + 4]
        r5 += v[i, c + 5]
        r6 += v[i, c + 6]
        r7 += v[i, c + 7]
        c += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while c < n:
        res += v[i, c]
        c += 1
    return 0.0 + res


# Not inlined into the walk by numba: the walk calls it twice, and two copies of its loops cost
# about 1.7 s of compiling the walk's kernel for no faster walk.
@numba.njit(cache=True, nogil=True)
def prune_rows(rows: np.ndarray, n: int, same: float, out: np.ndarray, keys: np.ndarray, order: np.ndarray,
               tol: np.ndarray, width: tuple) -> int:
    """The Pareto step of :func:`ppsweep.engine.envelope.prune` of ``rows[:n]`` into ``out`` (then
    :func:`hull_rows`), without the cap check.

    Args:
      rows: ``(>= n, J)`` the joined sets' rows, in argument order.
      n: rows to prune.
      same: the relative rounding tolerance (``_SAME``).
      out: ``(>= n, J)`` receives the kept rows, in the reference's order.
      keys, order: scratch, ``(>= n,)`` floats and integers.
      tol: ``(J,)`` receives the join's rounding tolerance (:func:`hull_rows` reads it).
      width: the vectors' width ``J`` (:func:`widths`).

    Returns:
      The number of kept rows.
    """
    J = len(width)
    for i in range(n):
        keys[i] = -row_sum(rows, i, J)
        order[i] = i
    for i in range(1, n):  # stable insertion sort by key (numpy's stable argsort)
        item = order[i]
        key = keys[item]
        j = i - 1
        while j >= 0 and keys[order[j]] > key:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = item
    for c in range(J):
        top = 0.0
        for i in range(n):
            top = max(top, abs(rows[i, c]))
        tol[c] = same * top
    kept = 0
    for jj in range(n):
        j = order[jj]
        dominated = False
        for ii in range(jj):
            i = order[ii]
            at_least = True
            for c in range(J):
                if not rows[i, c] >= rows[j, c] - tol[c]:
                    at_least = False
                    break
            if at_least:
                dominated = True
                break
        if not dominated:
            for c in range(J):
                out[kept, c] = rows[j, c]
            kept += 1
    return kept


@numba.njit(cache=True, nogil=True, _nrt=False)  # no reference counts (below, "_copier")
def hull_rows(rows: np.ndarray, n: int, tol: np.ndarray, alive: np.ndarray, width: tuple) -> tuple[int, int]:
    """Drop, in place and in order, each row of ``rows[:n]`` that a mix of two other rows covers.

    Row ``j`` is covered where, for two rows ``a``, ``b`` still kept, some ``λ`` in ``[0, 1]`` has
    ``λ·a + (1-λ)·b >= j - tol`` in every component: ``j·y <= max(a·y, b·y)`` for every ``y >= 0``
    (within the rounding tolerance), so ``j`` is never the strict maximum
    (:func:`ppsweep.engine.envelope.prune`, the reference). The rows are taken in order, so a row
    dropped no longer covers later ones. Each component bounds ``λ``: ``λ·d >= r`` with
    ``d = a - b`` and ``r = j - tol - b``.

    Args:
      rows: ``(>= n, J)`` the Pareto-maximal rows (:func:`prune_rows`' output).
      n: rows.
      tol: ``(J,)`` the join's rounding tolerance (:func:`prune_rows`' ``tol``).
      alive: scratch, ``(>= n,)`` booleans.
      width: the vectors' width ``J`` (:func:`widths`).

    Returns:
      ``(kept, tests)``: the rows kept (first in ``rows``), and the pairs tested (the walk's work).
    """
    J = len(width)
    tests = 0
    if n <= 2:
        return n, tests
    alive[:n] = True
    for j in range(n):
        covered = False
        for a in range(n):
            if a == j or not alive[a]:
                continue
            for b in range(a + 1, n):
                if b == j or not alive[b]:
                    continue
                tests += 1
                lo, hi = 0.0, 1.0
                for c in range(J):
                    d = rows[a, c] - rows[b, c]
                    r = rows[j, c] - tol[c] - rows[b, c]
                    if d > 0.0:
                        lo = max(lo, r / d)
                    elif d < 0.0:
                        hi = min(hi, r / d)
                    elif r > 0.0:
                        hi = -1.0
                    if lo > hi:
                        break
                if lo <= hi:
                    covered = True
                    break
            if covered:
                break
        alive[j] = not covered
    kept = 0
    for j in range(n):
        if alive[j]:
            for c in range(J):
                rows[kept, c] = rows[j, c]
            kept += 1
    return kept, tests


#: The decorator of the walk's helpers, called once or more a step: numba counts no references to
#: their arrays (``_nrt=False``; they allocate nothing). A reference count is an atomic add, and a
#: helper inlined by numba binds its arrays to new names, each counted: the counts of the copies
#: below and of :func:`hull_rows`' arguments were about 45 % of the walk's time.
_copier = numba.njit(cache=True, nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, _nrt=False)


@_copier
def _load(pool: np.ndarray, node: int, k: int, dst: np.ndarray, at: int, width: tuple) -> int:
    """Copy node ``node``'s ``k`` rows into ``dst`` from row ``at``; the row after them."""
    for i in range(k):
        for c in range(len(width)):
            dst[at + i, c] = pool[node, i, c]
    return at + k


@_copier
def _store(src: np.ndarray, k: int, pool: np.ndarray, node: int, width: tuple) -> int:
    """Copy ``k`` rows of ``src`` into node ``node``; ``k``."""
    for i in range(k):
        for c in range(len(width)):
            pool[node, i, c] = src[i, c]
    return k


@_copier
def _plus(src: np.ndarray, k: int, vecs: np.ndarray, r: int, dst: np.ndarray, node: int, width: tuple) -> int:
    """``dst[node, :k] = src[:k] + vecs[r]`` (a set of times plus a duration); ``k``."""
    for i in range(k):
        for c in range(len(width)):
            dst[node, i, c] = src[i, c] + vecs[r, c]
    return k


@numba.njit(cache=True, nogil=True)
def _waves(active, rounds, n_rounds, n_steps, dep_reg, zero_reg, out_reg, trash_reg, sync_slot, trash_sync, cost_row, held,
           tier, n_nodes, reg_base, res_base, ready_base, blocks_sender, vecs, n_tiers, cap, same, budget, width):
    """The wave loop over steps in the reference's order; ``(pool, count, largest, too_many, work, need)``
    (``too_many``: rows kept by the first join past the cap, 0 if none, -1 where the work passed
    ``budget`` first or ran ahead of its pace (:data:`PACE_NUM`; 0: no budget); ``work``: :func:`run_waves`'s
    count; ``need``: the least budget the walk passes, pace included). The steps are the ``active``
    lanes ``wave·p + worker`` (``n_steps`` of them), each wave's by round (``rounds``, below
    ``n_rounds``) and then worker (:func:`ppsweep.engine.comm.scan_lanes`' order); a step reads the
    program's arrays at its lane (flat: ``dep_reg``, ``out_reg``, ``sync_slot``, ``cost_row``,
    ``tier``, and ``held``'s rows) where it is taken, so a walk that stops early reads few.
    ``vecs``: the duration rows, then per tier the wire and the message time (the last
    ``2·n_tiers`` rows); a step's message takes its ``tier``'s. ``width``: the vectors' width (:func:`widths`)."""
    J = len(width)
    p = reg_base
    k_held = held.shape[1]
    comm_base = vecs.shape[0] - 2 * n_tiers
    pool = np.zeros((n_nodes, cap, J))
    count = np.ones(n_nodes, dtype=np.int64)
    widest = max(2, 1 + k_held) * cap  # a join of two sets, or of a message and its resources
    joined = np.empty((widest, J))  # a join's rows
    kept = np.empty((widest, J))  # and the rows it keeps
    keys, order, tol = np.empty(widest), np.empty(widest, dtype=np.int64), np.empty(J)
    alive = np.empty(widest, dtype=np.bool_)
    end = np.empty((1, cap, J))
    arrival = np.empty((p, cap, J))  # this wave's register writes, applied after its last lane
    n_arrival = np.zeros(p, dtype=np.int64)
    target = np.zeros(p, dtype=np.int64)
    largest = 1
    work = 0
    need = 0  # the least budget this walk passes so far (its pace included)
    steps = max(n_steps, 1)
    window = max(1, steps // PACE_WINDOW)
    past = np.zeros(steps + 1, dtype=np.int64)  # the work after each step (past[s + 1])
    s = 0
    for wave_lane in range(0, active.shape[0], p):  # a wave (its first lane): its steps, then its register writes
        n_writes = 0
        for q in range(n_rounds * p):  # round q // p, worker q % p
            w = q % p
            at = wave_lane + w  # the step's lane
            if not active[at] or (n_rounds > 1 and rounds[at] != q // p):
                continue
            dep = -1 if dep_reg[at] == zero_reg else dep_reg[at]
            out = -1 if out_reg[at] == trash_reg else out_reg[at]
            slot = -1 if sync_slot[at] == trash_sync else sync_slot[at]
            # start: the later of the worker being free and its input's arrival; end: plus its duration
            if dep >= 0:
                n = _load(pool, w, count[w], joined, np.int64(0), width)
                n = _load(pool, reg_base + dep, count[reg_base + dep], joined, n, width)
                k = prune_rows(joined, n, same, kept, keys, order, tol, width)
                k, tests = hull_rows(kept, k, tol, alive, width)
                work += n * n + tests
                if k > cap:
                    return pool, count, largest, k, work, need
                largest = max(largest, k)
            else:
                k = _load(pool, w, count[w], kept, np.int64(0), width)
            n_end = _plus(kept, k, vecs, cost_row[at], end, np.int64(0), width)
            work += n_end + STEP_WORK
            # projected work past the pace of a budget b: PACE_DEN·(projection - floor) > PACE_NUM·b,
            # the projection (times its window L): work·L + (work of the last L steps)·(steps left)
            past[s + 1] = work
            span = min(window, s + 1)
            ahead = PACE_DEN * (work * span + (work - past[s + 1 - span]) * (steps - s - 1) - PACE_FLOOR * span)
            need = max(need, work, -(-ahead // (PACE_NUM * span)))
            if budget > 0 and (work > budget or ahead > PACE_NUM * budget * span):
                return pool, count, largest, -1, work, need
            if out >= 0:  # it sends: the message starts once its data and its resources are ready
                wire = comm_base + 2 * tier[at]
                msg = wire + 1
                k = _load(end, np.int64(0), n_end, kept, np.int64(0), width)
                if k_held > 0:
                    n = _load(end, np.int64(0), n_end, joined, np.int64(0), width)
                    for j in range(k_held):
                        node = res_base + held[at, j]
                        n = _load(pool, node, count[node], joined, n, width)
                    k = prune_rows(joined, n, same, kept, keys, order, tol, width)
                    k, tests = hull_rows(kept, k, tol, alive, width)
                    work += n * n + tests
                    if k > cap:
                        return pool, count, largest, k, work, need
                    largest = max(largest, k)
                for j in range(k_held):  # the resources it holds, free again after its wire time
                    node = res_base + held[at, j]
                    count[node] = _plus(kept, k, vecs, wire, pool, node, width)
                n_arrival[n_writes] = _plus(kept, k, vecs, msg, arrival, n_writes, width)
                target[n_writes] = reg_base + out
                n_writes += 1
            if out >= 0 and blocks_sender:  # blocking: the sender is busy until its message arrives
                kw = _load(arrival, n_writes - 1, n_arrival[n_writes - 1], kept, np.int64(0), width)
                count[w] = _store(kept, kw, pool, w, width)
            else:
                k = _load(end, np.int64(0), n_end, kept, np.int64(0), width)
                count[w] = _store(kept, k, pool, w, width)
            if slot >= 0:
                k = _load(end, np.int64(0), n_end, kept, np.int64(0), width)
                count[ready_base + slot] = _store(kept, k, pool, ready_base + slot, width)
            s += 1
        for i in range(n_writes):
            k = _load(arrival, i, n_arrival[i], kept, np.int64(0), width)
            count[target[i]] = _store(kept, k, pool, target[i], width)
    return pool, count, largest, 0, work, max(need, work)


def widths(n_components: int) -> tuple[int, ...]:
    """The vectors' width as the compiled walk takes it: a tuple of ``n_components`` zeros, whose
    length numba knows when it compiles (one compile per width), so that every loop over a
    vector's components has a fixed count and is unrolled (the design sweep's walks, 3 components:
    1.23x faster than with the count read from the arrays)."""
    return (0,) * n_components


def supports(n_components: int) -> bool:
    """Whether :func:`run_waves` adds vectors of ``n_components`` the way numpy does."""
    return n_components <= MAX_COMPONENTS


def run_waves(program: Program, routing: Routing, rows: np.ndarray, wire: np.ndarray, msg: np.ndarray, cap: int,
              same: float, lane_tier: np.ndarray | None = None, budget: int = 0
              ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], Sequence[np.ndarray], int, int, int, int]:
    """The wave loop of :func:`ppsweep.engine.envelope.build_envelope`, compiled.

    Args:
      program: the compiled table; routing: its resources in the mode.
      rows: ``(5S + 1, J)`` duration vector of each cost row.
      wire, msg: ``(J,)`` vectors of a message's wire time and of its whole time, or ``(n_tiers, J)``
        one per tier (:mod:`ppsweep.engine.tiers`).
      cap: largest set kept at a node.
      same: the relative rounding tolerance of a join.
      lane_tier: ``(n_waves, p)`` the tier of each lane's message (default: all 0).
      budget: most work (below) the walk may do before it stops (0: no limit); it also stops once
        its projected work runs past the budget's pace (:data:`PACE_NUM`).

    Returns:
      ``(free, reg, resources, ready, largest, too_many, work, need)``: the sets after the last wave, one
      ``(k, J)`` array per node as the reference keeps them (the workers' their own, the others
      views of the walk's pool; ``ready`` a :class:`PoolSets`), the largest set kept by a join, the
      rows kept by the first join past ``cap`` (0 if none, -1 where the work passed ``budget``, or
      its pace, first; where not 0 the walk stopped and the sets are empty lists), and the walk's
      work: the square of the rows entering each join, plus the pairs its hull step tests
      (:func:`hull_rows`), plus the rows of each operation's end and :data:`STEP_WORK` a step, a
      deterministic count that follows its time;
      and the least budget under which the walk runs to its end (its work, or more where it runs
      ahead of its pace; :data:`PACE_NUM`).
    """
    p, n_regs = program.p, program.n_regs + 2
    n_ready = program.n_sync * p + 1
    reg_base, res_base = p, p + n_regs
    ready_base = res_base + routing.n_resources
    wire, msg = np.atleast_2d(wire), np.atleast_2d(msg)
    n_lanes = program.link.size
    tier = np.zeros(n_lanes, dtype=np.int64) if lane_tier is None else lane_tier
    held = routing.lane_resources.reshape(n_lanes, routing.lane_resources.shape[-1])
    active = np.ascontiguousarray(program.active, dtype=np.bool_).reshape(n_lanes)
    active.flags.writeable = False
    flat = (_flat(a, n_lanes) for a in (routing.rounds, program.dep_reg, program.out_reg, program.sync_slot, program.cost_row, tier))
    rounds, dep_reg, out_reg, sync_slot, cost_row, tier = flat
    pool, count, largest, too_many, work, need = _waves(
        active, rounds, routing.n_rounds, int(np.count_nonzero(active)), dep_reg, program.zero_reg, out_reg,
        program.trash_reg, sync_slot, program.trash_sync, cost_row, _flat(held, held.shape), tier, ready_base + n_ready,
        reg_base, res_base, ready_base, routing.mode.blocks_sender,
        np.concatenate([rows, np.stack([wire, msg], axis=1).reshape(-1, rows.shape[1])]).astype(np.float64),  # wire, msg per tier
        int(wire.shape[0]), int(cap), float(same), int(budget), widths(rows.shape[1]),
    )
    if too_many:  # the walk stopped: its sets are meaningless
        return [], [], [], [], int(largest), int(too_many), int(work), int(need)
    counts = count.tolist()
    free = [pool[i, :counts[i]].copy() for i in range(p)]  # their own: an envelope keeps them (each worker's finish)
    # views: the registers are not read after the walk, the resources and readiness slots only by the
    # synchronisations that follow it (whose ends are new arrays); the readiness slots, one per
    # synchronisation and worker, made only where one is read
    registers = [pool[i, :counts[i]] for i in range(reg_base, res_base)]
    resources = [pool[i, :counts[i]] for i in range(res_base, ready_base)]
    return (free, registers, resources, PoolSets(pool, counts, ready_base), int(largest), int(too_many), int(work), int(need))


class PoolSets(Sequence):
    """The sets of the walk's pool from node ``base`` on, as a read-only list: item ``i`` is node
    ``base + i``'s rows, a view made when it is read."""

    def __init__(self, pool: np.ndarray, counts: list[int], base: int) -> None:
        self._pool, self._counts, self._base = pool, counts, base

    def __len__(self) -> int:
        return len(self._counts) - self._base

    def __getitem__(self, i: int) -> np.ndarray:  # type: ignore[override]  (no slices: the walk's callers index)
        if not 0 <= i < len(self):
            raise IndexError(i)
        node = self._base + i
        return self._pool[node, :self._counts[node]]


def _flat(a: np.ndarray, shape: int | tuple[int, ...]) -> np.ndarray:
    """``a`` as a read-only int64 C-ordered array of ``shape`` (a view where it already is int64 and
    contiguous): :func:`_waves` reads the program's arrays in place, and one type of input keeps
    numba to one compile of it."""
    view = np.ascontiguousarray(a, dtype=np.int64).reshape(shape)
    view.flags.writeable = False
    return view


def prune(vectors: np.ndarray, same: float) -> np.ndarray:
    """:func:`ppsweep.engine.envelope.prune` without the cap check, compiled (``vectors (n, J)``, ``n >= 2``)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float64)
    n = vectors.shape[0]
    out = np.empty_like(vectors)
    tol = np.empty(vectors.shape[1])
    width = widths(vectors.shape[1])
    kept = prune_rows(vectors, n, same, out, np.empty(n), np.empty(n, dtype=np.int64), tol, width)
    kept, _ = hull_rows(out, kept, tol, np.empty(n, dtype=np.bool_), width)
    return out[:kept]
