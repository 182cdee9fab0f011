"""Run a sweep into its store: units of work evaluated, written as they finish.

Units are evaluated in this process or, with ``engine.workers > 1``, also in spawned worker
processes (:mod:`ppsweep.sweep.parallel`: one pool for the whole run, largest units first); writing
overlaps computing (one writer thread), and memory stays bounded by a few units whatever the
grid's size. The run ends with its time split (build,
compile, evaluate, write: :mod:`ppsweep.sweep.timing`).

Several runs of the same sweep may write one store at once (README, "Resume and integrity"):
each registers as a writer (so ``overwrite=true`` elsewhere refuses), takes a unit's lock before
computing it and skips units another run holds, re-checks the unit on disk once it has the lock,
and checks the store's generation before every write. Two identical runs split the units.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import filelock
import numpy as np

from ppsweep.sweep.config import SweepSpec
from ppsweep.sweep.parallel import Evaluators, configure_jax, evaluate_units, evaluator_count, evaluators_for, largest_first  # noqa: F401 - configure_jax: public here too
from ppsweep.sweep.progress import Progress
from ppsweep.store.layout import finish_store
from ppsweep.store.locks import registered_writer, unit_lock
from ppsweep.store.open import open_for_sweep, pending_units
from ppsweep.store.units import UnitWriter, done_units
from ppsweep.sweep.timing import describe, phase, take

@dataclass(frozen=True)
class SweepReport:
    """What a run did: units computed, points in them, seconds, and whether the store is complete.

    ``units_total`` counts the whole grid; ``units_missing`` the units of the whole store still
    not done after this run (other shards' included).
    """

    path: Path
    units_run: int
    units_total: int
    points_run: int
    seconds: float
    complete: bool
    units_missing: int = 0
    longest_step: float = float("nan")  # the largest t_sim this run computed, s (NaN: none)

    @property
    def points_per_second(self) -> float:
        """End-to-end points per second of this run (engine, reductions and writes)."""
        return self.points_run / self.seconds if self.seconds > 0 else float("nan")


def run_sweep(
    spec: SweepSpec,
    path: str | os.PathLike,
    config_yaml: str,
    overwrite: bool = False,
    progress: bool = True,
    units: Sequence[tuple[int, int]] | None = None,
    say: Callable[[str], None] | None = None,
    workers: int | None = None,
    compilation_cache: str | None = None,
    evaluators: Evaluators | None = None,
    cluster: str | None = None,
) -> SweepReport:
    """Evaluate every pending unit of ``spec`` (or of ``units``) and write it to the store at ``path``.

    Args:
      spec: the validated sweep.
      path: the ``.zarr`` store (created, resumed, or left alone when complete).
      config_yaml: the resolved config for the store's attributes.
      overwrite: recompute from scratch (replaces the whole store: never with a shard's ``units``
        while other shards may be writing).
      progress: show progress on stderr (:mod:`ppsweep.sweep.progress`: a bar with ETA on a terminal,
        a line per unit otherwise).
      units: the ``(p index, m index)`` units to run (one shard's, :func:`ppsweep.sweep.shards.shard_units`);
        None: all. Units already done are skipped either way.
      say: called with one line when the run resumes a store that has some of its units done
        (``"resuming: 3 of 9 units already done"``), and with the run's time split; None: silent.
      workers: evaluators: this process and ``workers - 1`` spawned ones (:mod:`ppsweep.sweep.parallel`);
        None: :func:`ppsweep.sweep.parallel.default_workers`.
      compilation_cache: JAX's persistent compilation cache for worker processes (None: off).
      evaluators: worker processes started ahead for this run (:func:`ppsweep.sweep.parallel.start_evaluators`);
        used if they match the run's evaluators, shut down once the units are done either way.
      cluster: a dask.distributed scheduler (``dask://HOST:PORT``) whose workers evaluate the units
        instead (:mod:`ppsweep.sweep.cluster`); this process still claims and writes them.

    Returns:
      A :class:`SweepReport`. When every unit of the store is done (this run's and other
      shards'), the store is marked complete.
    """
    path = Path(path)
    asked = spec.units() if units is None else list(units)
    group, pending = open_for_sweep(path, spec, config_yaml, overwrite, units=asked, say=say)
    if say is not None and pending and len(pending) < len(asked):
        say(f"resuming: {len(asked) - len(pending)} of {len(asked)} units already done")
    total = len(spec.units())
    points_per_unit = spec.n_points // total
    start = time.perf_counter()
    split: Counter = Counter()
    take()
    computed = 0
    longest = float("nan")
    if pending:
        n_workers = 1 if cluster else evaluator_count(spec, pending, workers)
        evaluators = evaluators_for(n_workers, compilation_cache, evaluators)
        bar = Progress(len(pending), points_per_unit) if progress else None
        generation = (path, str(group.attrs["generation"]))
        mine: dict[tuple[int, int], filelock.BaseFileLock] = {}  # units this run holds, not yet written
        order = largest_first(spec, pending) if n_workers > 1 else pending  # several evaluators: end together
        claimed = _claim(path, group, order, mine)
        unit_writer = UnitWriter(group)
        with registered_writer(path), ThreadPoolExecutor(max_workers=1) as writer:
            writing: Future | None = None
            try:
                if cluster:
                    from ppsweep.sweep.cluster import evaluate_units_on_cluster

                    results_stream = evaluate_units_on_cluster(spec, claimed, cluster, compilation_cache)
                else:
                    results_stream = evaluate_units(spec, claimed, n_workers, compilation_cache, evaluators)
                for i, j, results, unit_seconds in results_stream:
                    split.update(unit_seconds)
                    longest = np.fmax(longest, _longest_step(results))
                    if writing is not None:
                        writing.result()
                    writing = writer.submit(_write_and_release, unit_writer, i, j, results, generation, mine.pop((i, j)))
                    computed += 1
                    if bar is not None:
                        bar.advance(f"p={spec.p[i]} m={spec.m[j]}")
            except BaseException:
                for lock in mine.values():
                    lock.release()
                raise
            if writing is not None:
                writing.result()
        if bar is not None:
            bar.close()
    elif evaluators is not None:
        evaluators.shutdown()
    seconds = time.perf_counter() - start if computed else 0.0
    split.update(take())  # this process: writes (and units evaluated here)
    if say is not None and computed:
        say(describe(split))
    complete = finish_store(group, path)
    missing = 0 if complete else int((~done_units(group)).sum())
    if evaluators is not None:  # they have been winding down meanwhile: join them
        evaluators.shutdown(wait=True)
    return SweepReport(path, computed, total, computed * points_per_unit, seconds, complete, missing, float(longest))


def _longest_step(results: dict) -> float:
    """The largest finite ``t_sim`` of a unit's results (NaN where it has none)."""
    t = np.asarray(results.get("t_sim", np.nan), dtype=float)
    finite = t[np.isfinite(t)]
    return float(finite.max()) if finite.size else float("nan")


def _claim(path: Path, group, units: list[tuple[int, int]], mine: dict) -> Iterator[tuple[int, int]]:
    """The units of ``units`` this run computes, each locked (and put in ``mine``) as it is handed out.

    A unit another run holds is passed over and waited for after the others; one that another
    run finished meanwhile is skipped.
    """
    queue, wait = units, False
    while queue:
        busy = []  # units another run is computing now: waited for after the others
        for i, j in queue:
            lock = unit_lock(path, i, j)
            try:
                lock.acquire(timeout=-1 if wait else 0)
            except filelock.Timeout:
                busy.append((i, j))
                continue
            if not pending_units(group, [(i, j)]):  # another run wrote it meanwhile
                lock.release()
                continue
            mine[(i, j)] = lock
            yield i, j
        queue, wait = busy, True


def _write_and_release(unit_writer: UnitWriter, i: int, j: int, results: dict, generation: tuple, lock) -> None:
    """Write one unit (:class:`ppsweep.store.results.UnitWriter`), then release its lock, whatever happens."""
    try:
        with phase("write"):
            unit_writer.write(i, j, results, generation)
    finally:
        lock.release()
