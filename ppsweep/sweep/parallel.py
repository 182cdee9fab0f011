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

Each evaluator's first task compiles the engine's numba kernels (:func:`ppsweep.engine.kernels.compile_kernels`):
this process's thread starts with the scan, the spawned processes with the envelope's walk, each
under a lock the run's evaluators share, so that after an upgrade each kernel is compiled once and
two at a time (the others wait for it and load it from numba's cache).

The spawned processes can be started before the run knows its units (:func:`start_evaluators`,
which the command line calls as soon as the config is valid): each spends a second or two
importing JAX and the engine, which then overlaps this process's own imports and the store's
creation. This module imports neither JAX nor the engine itself until a unit is evaluated here.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait

import numpy as np

from ppsweep import share_cores, usable_cores
from ppsweep.sweep.config import SweepSpec
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


def evaluator_count(spec: SweepSpec, units: Sequence[tuple[int, int]], workers: int | None) -> int:
    """Evaluators a run of ``units`` uses: ``workers`` (at most one per unit, at least 1), or
    :func:`default_workers` where ``workers`` is None (``engine.workers: auto``).

    Args:
      spec: the sweep.
      units: the ``(p index, m index)`` units the run will evaluate.
      workers: the configured number, or None.

    Returns:
      At least 1, at most ``max(1, len(units))``.
    """
    if workers is None:
        return default_workers(spec, units)
    return max(1, min(workers, len(units)))


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


_JAX_CONFIGURED = False


def configure_jax(compilation_cache: str | None) -> None:
    """Apply process-wide JAX settings once per process (launchers may reuse processes), without
    importing JAX: where it is not imported yet they go into the environment, which JAX reads when
    (and if) it is imported -- a sweep whose tables take the compiled CPU loop or the envelope
    never imports it (:mod:`ppsweep.engine.jax_scan`).

    Args:
      compilation_cache: directory of JAX's persistent compilation cache, or None for none.
    """
    global _JAX_CONFIGURED
    if _JAX_CONFIGURED:
        return
    settings: dict[str, object] = {}
    if compilation_cache:
        settings["jax_compilation_cache_dir"] = os.path.expanduser(compilation_cache)
        # Every compile, even a quick one: a sweep compiles hundreds of small kernels (a scan
        # block and an end per table shape), each of which the next run or shard, and the other
        # evaluators, would otherwise compile again.
        settings["jax_persistent_cache_min_compile_time_secs"] = 0.0
    jax = sys.modules.get("jax")
    for name, value in settings.items():
        if jax is None:
            os.environ[name.upper()] = str(value)
        else:
            jax.config.update(name, value)
    _JAX_CONFIGURED = True


def _init_worker(compilation_cache: str | None, workers: int = 1, kernel_locks: str | None = None) -> None:
    _exit_with_parent()

    configure_jax(compilation_cache)
    share_cores(workers)  # each evaluator's scans take its share of the cores (one each on a machine of `workers` cores)
    if multiprocessing.parent_process() is not None:  # a spawned worker: import the engine now, before its first unit
        import ppsweep.sweep.evaluate  # noqa: F401
        from ppsweep.engine.kernels import compile_kernels

        compile_kernels(kernel_locks, first=1)  # this process's thread starts with the first (evaluate_units)


def _ready() -> None:
    """A spawned worker's first task: nothing (its initializer has imported what units need)."""


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


def evaluate_one(spec: SweepSpec, i: int, j: int) -> UnitResult:
    """One unit evaluated in this process, with the seconds this process spent since its last unit."""
    from ppsweep.sweep.evaluate import evaluate_unit

    results = evaluate_unit(spec, i, j)
    return i, j, results, take()  # the seconds this process spent since its last unit


class Evaluators:
    """Spawned evaluator processes, started ahead of a run (:func:`start_evaluators`) and handed to
    :func:`evaluate_units`; a context manager that shuts them down when it ends (whether or not a
    run used them).

    Attributes:
      workers: the evaluators they make with this process's thread (the processes are ``workers - 1``).
      compilation_cache: the JAX compilation cache the processes were started with.
      kernel_locks: the directory of the locks under which the evaluators compile the engine's
        kernels (:func:`ppsweep.engine.kernels.compile_kernels`), removed at shutdown.
    """

    def __init__(self, workers: int, compilation_cache: str | None) -> None:
        self.workers = workers
        self.compilation_cache = compilation_cache
        self.kernel_locks = tempfile.mkdtemp(prefix="ppsweep-kernels-")
        self._closing: threading.Thread | None = None
        self.pool = ProcessPoolExecutor(workers - 1, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_init_worker, initargs=(compilation_cache, workers, self.kernel_locks))
        for _ in range(workers - 1):  # a task per process: each starts (and imports the engine) now
            self.pool.submit(_ready)

    def fits(self, workers: int, compilation_cache: str | None) -> bool:
        """Whether these processes are those a run of ``workers`` evaluators with ``compilation_cache`` needs."""
        return workers == self.workers and compilation_cache == self.compilation_cache

    def shutdown(self, wait: bool = False) -> None:
        """End the processes (queued units are cancelled); may be called again, e.g. to wait.

        Args:
          wait: wait until they have ended; else they wind down (each interpreter's teardown)
            while this process goes on. A process that leaves with ``os._exit`` waits
            first, or Python's resource tracker reports the pool's semaphores as leaked.
        """
        if self._closing is None:  # the pool's own shutdown, waiting for the processes, in a thread
            self._closing = threading.Thread(target=self._close, name="ppsweep-evaluators-shutdown", daemon=True)
            self._closing.start()
        if wait:
            self._closing.join()

    def _close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.kernel_locks, ignore_errors=True)

    def __enter__(self) -> "Evaluators":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def evaluators_for(workers: int, compilation_cache: str | None, evaluators: Evaluators | None = None) -> Evaluators | None:
    """The processes for ``workers`` evaluators: ``evaluators`` where they fit, else new ones (those
    shut down); None for one evaluator (this process alone).

    Args:
      workers: evaluators of the run.
      compilation_cache: JAX's persistent compilation cache directory (None: off).
      evaluators: processes started ahead (:func:`start_evaluators`), or None.

    Returns:
      The :class:`Evaluators` to use, or None.
    """
    if evaluators is not None and (workers <= 1 or not evaluators.fits(workers, compilation_cache)):
        evaluators.shutdown()
        evaluators = None
    if evaluators is None and workers > 1:
        evaluators = Evaluators(workers, compilation_cache)
    return evaluators


def start_evaluators(
    spec: SweepSpec, units: Sequence[tuple[int, int]], workers: int | None, compilation_cache: str | None = None
) -> Evaluators | None:
    """Start the processes a run of ``units`` will evaluate with (:func:`evaluator_count`), before it
    needs them, so that their start overlaps the caller's own imports and the store's creation.

    Args:
      spec: the sweep.
      units: the units the run will evaluate (if the store turns out to have some done already,
        the run may need fewer evaluators; it then starts its own and these are shut down unused).
      workers: the configured number of evaluators, or None (``auto``).
      compilation_cache: JAX's persistent compilation cache directory (None: off).

    Returns:
      The started :class:`Evaluators` (use it in a ``with``), or None where the run would
      evaluate in this process alone.
    """
    return evaluators_for(evaluator_count(spec, units, workers), compilation_cache)


def evaluate_units(
    spec: SweepSpec,
    units: Iterable[tuple[int, int]],
    workers: int,
    compilation_cache: str | None = None,
    evaluators: Evaluators | None = None,
) -> Iterator[UnitResult]:
    """``(i, j, evaluate_unit(spec, i, j), seconds per phase)`` for every unit, as they finish.

    Args:
      spec: the sweep.
      units: ``(p index, m index)`` units to evaluate, taken one at a time when an evaluator can
        start it (an iterator may lock each unit as it hands it out).
      workers: evaluators; 1 evaluates in this process's thread, in order; ``n > 1``: one thread of
        this process and ``n - 1`` spawned processes.
      compilation_cache: JAX's persistent compilation cache directory (None: off).
      evaluators: processes started ahead (:func:`start_evaluators`), used where they fit
        ``workers`` and ``compilation_cache`` (:func:`evaluators_for`); shut down at the end
        either way, without waiting for them to end.

    Yields:
      One tuple per unit; with several workers, in the order they finish, at most ``workers + 1``
      units in flight (one queued for the spawned processes, so that none waits; memory stays
      bounded).
    """
    units = iter(units)
    evaluators = evaluators_for(workers, compilation_cache, evaluators)
    if evaluators is None:
        for i, j in units:
            yield evaluate_one(spec, i, j)
        return
    _init_worker(compilation_cache, workers)  # this process evaluates too
    here = ThreadPoolExecutor(1, thread_name_prefix="ppsweep-unit")
    from ppsweep.engine.kernels import compile_kernels

    warmed = here.submit(compile_kernels, evaluators.kernel_locks, 0)  # its first task: the first kernel (the processes start with the next)
    spawned = evaluators.pool
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
                        running[pool.submit(evaluate_one, spec, *unit)] = pool
            if not running:
                warmed.result()  # raises what compiling the kernels raised
                return
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                del running[future]
                yield future.result()
            if not more and spawned not in running.values():  # nothing left for the processes: they wind
                evaluators.shutdown()  # down while this process finishes its last unit
    finally:
        # Not waiting for the processes to end: they wind down while the caller writes the last
        # unit and finishes the store (ppsweep.sweep.runner joins them after that).
        here.shutdown(wait=False, cancel_futures=True)
        evaluators.shutdown()
        share_cores(1)
