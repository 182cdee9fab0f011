"""Units of work evaluated in parallel, so that one run uses every core.

Per-table work (building a table, compiling it, the envelope's programme) is Python and numpy
that one process runs on one core at a time; the engine's scan is multithreaded already.
:func:`evaluate_units` runs :func:`ppsweep.sweep.evaluate.evaluate_unit` on ``workers`` evaluators: this
process (one thread beside the caller's, so it starts at once, with JAX already imported) and
``workers - 1`` processes started with ``spawn`` (JAX is multithreaded: a forked copy of a
process that imported it may hang), each with the same JAX settings and sharing JAX's persistent
compilation cache, so a kernel compiled by one is loaded by the others. One pool serves the whole
run; units are taken from the caller one at a time as an evaluator frees (the caller locks each
just before it hands it out; :mod:`ppsweep.sweep.runner` hands them largest first, :func:`largest_first`,
so that the evaluators end together). A unit's results depend on its inputs alone, so they are the same to the bit whichever
evaluator computes them; the caller writes them as they come.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait

import numpy as np

from ppsweep import usable_cores
from ppsweep.sweep.config import SweepSpec
from ppsweep.sweep.evaluate import evaluate_unit
from ppsweep.sweep.timing import take

#: Fewest estimated seconds of work (:func:`ppsweep.sweep.estimate.estimate`) worth starting worker
#: processes for: each imports JAX and loads its kernels, a few CPU seconds.
MIN_SECONDS = 20.0

#: A unit's result: ``(p index, m index, evaluate_unit's arrays, seconds per phase)``.
UnitResult = tuple[int, int, dict[str, np.ndarray], dict[str, float]]


def default_workers(spec: SweepSpec, units: Sequence[tuple[int, int]]) -> int:
    """Evaluators for ``units`` of ``spec`` (``engine.workers: auto``): every core the process may
    use, or 1 where the estimated work is under :data:`MIN_SECONDS` (a worker would not pay for its start).

    Args:
      spec: the sweep.
      units: the ``(p index, m index)`` units the run will evaluate.

    Returns:
      At least 1, at most ``len(units)``.
    """
    from ppsweep.sweep.estimate import estimate

    if len(units) < 2 or estimate(spec, units).seconds < MIN_SECONDS:
        return 1
    return max(1, min(usable_cores(), len(units)))


def largest_first(spec: SweepSpec, units: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``units`` ordered by decreasing ``p·m`` (ties in the given order).

    A unit's work grows with its tables' operations, about ``p·m`` per schedule; starting the
    largest first leaves small units for the end, so no evaluator waits long for the last one.

    Args:
      spec: the sweep.
      units: ``(p index, m index)`` units.

    Returns:
      The same units, largest first.
    """
    return sorted(units, key=lambda unit: -spec.p[unit[0]] * spec.m[unit[1]])


def _init_worker(compilation_cache: str | None) -> None:
    from ppsweep.sweep.runner import configure_jax

    _exit_with_parent()

    configure_jax(compilation_cache)
    if compilation_cache:  # every evaluator compiles the same kernels: share even the quick ones
        import jax

        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def _exit_with_parent() -> None:
    """In a spawned worker: end the process when its parent ends (a Ctrl-C ends the parent at once,
    ``kill`` may end it alone); its unit's results could go nowhere."""
    parent = multiprocessing.parent_process()
    if parent is None:  # not a spawned worker: this process evaluates in a thread
        return

    def watch() -> None:
        parent.join()  # returns when the parent's end of the pipe closes
        os._exit(1)

    threading.Thread(target=watch, name="ppsweep-parent-watch", daemon=True).start()


def _evaluate(spec: SweepSpec, i: int, j: int) -> UnitResult:
    results = evaluate_unit(spec, i, j)
    return i, j, results, take()  # the seconds this process spent since its last unit


def evaluate_units(
    spec: SweepSpec, units: Iterable[tuple[int, int]], workers: int, compilation_cache: str | None = None
) -> Iterator[UnitResult]:
    """``(i, j, evaluate_unit(spec, i, j), seconds per phase)`` for every unit, as they finish.

    Args:
      spec: the sweep.
      units: ``(p index, m index)`` units to evaluate, taken one at a time when an evaluator can
        start it (an iterator may lock each unit as it hands it out).
      workers: evaluators; 1 evaluates in this process's thread, in order; ``n > 1``: one thread of
        this process and ``n - 1`` spawned processes.
      compilation_cache: JAX's persistent compilation cache directory (None: off).

    Yields:
      One tuple per unit; with several workers, in the order they finish, at most ``workers + 1``
      units in flight (one queued for the spawned processes, so that none waits; memory stays
      bounded).
    """
    units = iter(units)
    if workers <= 1:
        for i, j in units:
            yield _evaluate(spec, i, j)
        return
    _init_worker(compilation_cache)  # this process evaluates too
    here = ThreadPoolExecutor(1, thread_name_prefix="ppsweep-unit")
    spawned = ProcessPoolExecutor(workers - 1, mp_context=multiprocessing.get_context("spawn"),
                                  initializer=_init_worker, initargs=(compilation_cache,))
    limits: dict[Executor, int] = {here: 1, spawned: workers}
    running: dict[Future, Executor] = {}
    try:
        more = True
        while True:
            for pool, limit in limits.items():
                while more and sum(1 for p in running.values() if p is pool) < limit:
                    unit = next(units, None)
                    if unit is None:
                        more = False
                    else:
                        running[pool.submit(_evaluate, spec, *unit)] = pool
            if not running:
                return
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                del running[future]
                yield future.result()
    finally:
        for pool in limits:
            pool.shutdown(wait=not running, cancel_futures=True)
