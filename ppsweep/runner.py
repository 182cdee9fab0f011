"""Run a sweep into its store: units of work evaluated, written as they finish.

Units are evaluated in this process or, for larger sweeps, in worker processes on every core
(:mod:`ppsweep.parallel`); writing overlaps computing (one writer thread), and memory stays
bounded by a few units whatever the grid's size. The run ends with its time split (build,
compile, evaluate, write: :mod:`ppsweep.timing`).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ppsweep.config import SweepSpec
from ppsweep.progress import Progress
from ppsweep.store import done_units, finish_store, open_for_sweep, write_unit
from ppsweep.parallel import default_workers, evaluate_units
from ppsweep.timing import describe, phase, take

_JAX_CONFIGURED = False


def configure_jax(compilation_cache: str | None) -> None:
    """Apply process-wide JAX settings once per process (launchers may reuse processes).

    Args:
      compilation_cache: directory of JAX's persistent compilation cache, or None for none.
    """
    global _JAX_CONFIGURED
    if _JAX_CONFIGURED:
        return
    import jax

    if compilation_cache:
        jax.config.update("jax_compilation_cache_dir", os.path.expanduser(compilation_cache))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    _JAX_CONFIGURED = True


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

    @property
    def points_per_second(self) -> float:
        """End-to-end points per second of this run (engine, reductions and writes)."""
        return self.points_run / self.seconds if self.seconds > 0 else float("nan")


def _write(group, spec: SweepSpec, i: int, j: int, results) -> None:
    with phase("write"):
        write_unit(group, spec, i, j, results)


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
) -> SweepReport:
    """Evaluate every pending unit of ``spec`` (or of ``units``) and write it to the store at ``path``.

    Args:
      spec: the validated sweep.
      path: the ``.zarr`` store (created, resumed, or left alone when complete).
      config_yaml: the resolved config for the store's attributes.
      overwrite: recompute from scratch (replaces the whole store: never with a shard's ``units``
        while other shards may be writing).
      progress: show progress on stderr (:mod:`ppsweep.progress`: a bar with ETA on a terminal,
        a line per unit otherwise).
      units: the ``(p index, m index)`` units to run (one shard's, :func:`ppsweep.shards.shard_units`);
        None: all. Units already done are skipped either way.
      say: called with one line when the run resumes a store that has some of its units done
        (``"resuming: 3 of 9 units already done"``), and with the run's time split; None: silent.
      workers: processes evaluating units (:func:`ppsweep.parallel.default_workers` when None).
      compilation_cache: JAX's persistent compilation cache for worker processes (None: off).

    Returns:
      A :class:`SweepReport`. When every unit of the store is done (this run's and other
      shards'), the store is marked complete.
    """
    path = Path(path)
    asked = spec.units() if units is None else list(units)
    group, pending = open_for_sweep(path, spec, config_yaml, overwrite, units=asked)
    if say is not None and pending and len(pending) < len(asked):
        say(f"resuming: {len(asked) - len(pending)} of {len(asked)} units already done")
    total = len(spec.units())
    points_per_unit = spec.n_points // total
    start = time.perf_counter()
    writing: Future | None = None
    split: Counter = Counter()
    take()
    if pending:
        n_workers = default_workers(len(pending)) if workers is None else workers
        bar = Progress(len(pending), points_per_unit) if progress else None
        with ThreadPoolExecutor(max_workers=1) as writer:
            for i, j, results, seconds in evaluate_units(spec, pending, n_workers, compilation_cache):
                split.update(seconds)
                if writing is not None:
                    writing.result()
                writing = writer.submit(_write, group, spec, i, j, results)
                if bar is not None:
                    bar.advance(f"p={spec.p[i]} m={spec.m[j]}")
            if writing is not None:
                writing.result()
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start if pending else 0.0
    split.update(take())  # this process: writes (and units evaluated here)
    if say is not None and pending:
        say(describe(split))
    complete = finish_store(group, path)
    missing = 0 if complete else int((~done_units(group)).sum())
    return SweepReport(path, len(pending), total, len(pending) * points_per_unit, seconds, complete, missing)
