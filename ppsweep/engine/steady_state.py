"""Where a table's steps repeat: the steady state that the periodic scan runs once and then steps over.

A pipeline schedule's middle is the same few waves over and over, each time for the next
microbatches (1F1B: a forward and a backward per worker, on the same registers). Over such a run of
waves the scan's state after each block of waves is the same max-plus map of the state before it.
Once one block moves every row it writes by the same time ``λ`` (and the same path compute ``μ``),
every later block does too (the map commutes with adding a constant to every row it reads), so
``n`` blocks can be replaced by adding ``n·λ`` and ``n·μ`` (:mod:`ppsweep.engine.native_scan`; the
rule and its bounds are in docs/contract.md §4, "The periodic scan").

This module finds those runs from the steps alone (:func:`periodic_runs`): which waves repeat with
which period, how many waves make one block, and which state rows a block writes. It does not look
at times; the compiled scan decides point by point whether the state has become periodic.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

#: Fewest blocks a run must span to be worth stepping over: two to see the state repeat over a span
#: of two blocks, two to check it after the step, and two stepped over (measured: at p = 64,
#: m = 256, runs of four or five blocks cost their checks and gained nothing).
MIN_BLOCKS = 6

#: Fewest steps a block holds for each row it writes (else its blocks are doubled): the checks at a
#: block's end read and copy those rows for every point (measured: at p = 8, m = 32, 65,536 points,
#: blocks of 4 steps a row spent a third of the scan on their checks).
STEPS_PER_ROW = 8

#: Candidate periods tried from each probed wave (the shifts to the next waves with its key).
CANDIDATE_PERIODS = 16


class PeriodicRuns(NamedTuple):
    """Runs of waves that repeat, for the compiled scan (empty arrays: none).

    Attributes:
      start, block, end: per run, its first wave, the waves of one block and the wave it ends at
        (``start + j·block`` are the block boundaries up to ``end``).
      rows_at: ``(n_runs + 1,)`` where each run's rows begin in ``rows``.
      rows: the state rows a block of the run writes (``native_scan`` numbering: workers, registers,
        resources, readiness rows).
    """

    start: np.ndarray
    block: np.ndarray
    end: np.ndarray
    rows_at: np.ndarray
    rows: np.ndarray


def no_runs() -> PeriodicRuns:
    """No periodic run: the scan takes every wave."""
    empty = np.zeros(0, dtype=np.int64)
    return PeriodicRuns(empty, empty, empty, np.zeros(1, dtype=np.int64), empty)


def _step_fields(steps) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Everything that makes a step what it is: per step its worker, duration row, registers,
    readiness slot and link, and ``(n_steps, k)`` its resources."""
    return (steps.worker, steps.row, steps.dep, steps.out, steps.slot, steps.link), steps.held


@numba.njit(cache=True, nogil=True)
def _hash_waves(columns, held, wave_start, mix):
    """:func:`wave_keys` as one compiled pass (numpy's passes over every step cost as much as a short scan)."""
    n_waves = wave_start.shape[0] - 1
    keys = np.empty(n_waves, dtype=np.uint64)
    for t in range(n_waves):
        key = np.uint64(wave_start[t + 1] - wave_start[t]) * mix[0]
        for s in range(wave_start[t], wave_start[t + 1]):
            step = np.uint64(s - wave_start[t] + 1) * mix[1]
            for column in columns:
                step = (step ^ np.uint64(column[s])) * mix[2]
            for h in range(held.shape[1]):
                step = (step ^ np.uint64(held[s, h])) * mix[3]
            key += step
        keys[t] = key
    return keys


#: The odd multipliers of :func:`_hash_waves`, drawn once (a generator made per table cost 46 µs,
#: 0.2 CPU s of a cold design run).
_MIX = np.random.default_rng(0).integers(1, 2**63, size=4, dtype=np.uint64) | np.uint64(1)


def wave_keys(steps) -> np.ndarray:
    """One integer per wave, a hash of its steps in order: two waves with the same steps have the
    same key (two with different steps almost never do; :func:`_repeats` checks the steps themselves)."""
    columns, held = _step_fields(steps)
    return _hash_waves(columns, held, steps.wave_start, _MIX)


def _repeats(steps, first: int, last: int, period: int) -> bool:
    """Whether waves ``first … last-1`` are, step for step, the waves ``period`` before them."""
    ws = steps.wave_start
    sizes = np.diff(ws)
    if not np.array_equal(sizes[first:last], sizes[first - period:last - period]):
        return False
    shift = ws[first] - ws[first - period]
    columns, held = _step_fields(steps)
    return all(np.array_equal(a[ws[first]:ws[last]], a[ws[first] - shift:ws[last] - shift]) for a in columns + (held,))


def _segments(same: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of True in ``same``."""
    edges = np.diff(np.concatenate([[0], same.astype(np.int8), [0]]))
    starts, stops = np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]
    return starts, stops - starts


def _block_rows(steps, first: int, last: int, p: int) -> np.ndarray | None:
    """The state rows that waves ``first … last-1`` write, or None where they read a row they do not
    write (a row no block moves: the shift rule would not hold)."""
    s0, s1 = steps.wave_start[first], steps.wave_start[last]
    reg, res = p, p + steps.n_regs
    ready = res + steps.n_res
    workers = steps.worker[s0:s1]
    out, dep, slot = steps.out[s0:s1], steps.dep[s0:s1], steps.slot[s0:s1]
    held = steps.held[s0:s1].reshape(-1)
    # a mask over the rows, not np.unique (a sort) of each list: the rows are few, the steps many
    writes = np.zeros(ready + 1 + int(slot.max(initial=-1)), dtype=bool)
    for rows in (workers, reg + out[out >= 0], res + held[held >= 0], ready + slot[slot >= 0]):
        writes[rows] = True
    if not writes[reg + dep[dep >= 0]].all():  # the workers' and resources' rows it reads, it writes
        return None
    return np.flatnonzero(writes).astype(np.int64)


def periodic_runs(steps, p: int, m: int) -> PeriodicRuns:
    """The runs of ``steps`` (:class:`ppsweep.engine.native_scan.NativeSteps`) that repeat, with
    blocks of about ``p/2`` microbatches (of ``m``): in a pipeline the state's increments repeat
    after a trip through every stage (about ``p`` microbatches: a span of two blocks), or after
    fewer where compute bounds the step (one block).

    The period is the shift of the waves, among the first :data:`CANDIDATE_PERIODS` that repeat the
    wave a quarter, a half and three quarters in, whose stretches of equal waves cover the most (the
    shortest that covers half the table). A run's block is doubled until it holds
    :data:`STEPS_PER_ROW` steps for each row it writes; the run is kept where it spans
    :data:`MIN_BLOCKS` blocks, a block writes every row it reads, and its waves are the same step
    for step (not only by their keys)."""
    ids = wave_keys(steps)
    n = ids.size
    if n < 2 * MIN_BLOCKS:
        return no_runs()
    candidates = np.unique(np.concatenate([np.nonzero(ids[probe + 1:] == ids[probe])[0][:CANDIDATE_PERIODS] + 1
                                           for probe in (n // 4, n // 2, 3 * n // 4)]))
    best, best_cover = None, 0
    waves_per_microbatch = n / max(m, 1)
    for period in candidates:
        period = int(period)
        microbatches = max(1, int(round(period / waves_per_microbatch)))
        block = period * max(1, -(-p // (2 * microbatches)))  # whole periods covering about p/2 microbatches
        starts, lengths = _segments(ids[:-period] == ids[period:])
        keep = lengths + period >= MIN_BLOCKS * block
        cover = int((lengths[keep] + period).sum())
        if cover > best_cover:
            best, best_cover = (period, block, starts[keep], lengths[keep]), cover
        if 2 * cover >= n:  # half the table repeats: its multiples cannot cover more in shorter blocks
            break
    if best is None:
        return no_runs()
    period, block, starts, lengths = best
    runs, rows = [], []
    for start, length in zip(starts.tolist(), lengths.tolist()):
        run_block = block
        written = _block_rows(steps, start, start + run_block, p)
        # a block's checks read and copy its rows: blocks of at least STEPS_PER_ROW steps a row
        while written is not None and steps.wave_start[start + run_block] - steps.wave_start[start] < STEPS_PER_ROW * written.size:
            run_block *= 2
            written = _block_rows(steps, start, start + run_block, p) if start + run_block <= start + length + period else None
        if written is not None and length + period >= MIN_BLOCKS * run_block \
                and _repeats(steps, start + period, start + length + period, period):
            runs.append((start, run_block, start + length + period))
            rows.append(written)
    if not runs:
        return no_runs()
    start, block_, end = (np.array(column, dtype=np.int64) for column in zip(*runs))
    rows_at = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int64)
    return PeriodicRuns(start, block_, end, rows_at, np.concatenate(rows))
