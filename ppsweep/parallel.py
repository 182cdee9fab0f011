"""Units of work evaluated in parallel processes, so that one run uses every core.

Per-table work (building a table, compiling it, the envelope's programme) is Python and numpy
that one process runs on one core at a time; the engine's evaluation is multithreaded already.
:func:`evaluate_units` runs :func:`ppsweep.sweep.evaluate_unit` in ``workers`` processes started
with ``spawn`` (JAX is multithreaded: a forked copy of a process that imported it may hang),
each with the same JAX settings as the parent. A unit's results depend on its inputs alone, so
they are the same to the bit whichever process computes them; the caller writes them as they
come.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

import numpy as np

from ppsweep.config import SweepSpec
from ppsweep.sweep import evaluate_unit
from ppsweep.timing import take

#: Fewest pending units worth starting worker processes for (each imports JAX and compiles).
MIN_UNITS = 4


def default_workers(n_units: int) -> int:
    """Processes for ``n_units`` pending units: every core the process may use, 1 for few units."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 1 if n_units < MIN_UNITS else max(1, min(cores, n_units))


def _init_worker(compilation_cache: str | None) -> None:
    from ppsweep.runner import configure_jax

    configure_jax(compilation_cache)
    if compilation_cache:  # every worker compiles the same kernels: share even the quick ones
        import jax

        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def _evaluate(spec: SweepSpec, i: int, j: int) -> tuple[int, int, dict[str, np.ndarray], dict[str, float]]:
    results = evaluate_unit(spec, i, j)
    return i, j, results, take()  # the seconds this process spent since its last unit


def evaluate_units(
    spec: SweepSpec, units: Sequence[tuple[int, int]], workers: int, compilation_cache: str | None = None
) -> Iterator[tuple[int, int, dict[str, np.ndarray], dict[str, float]]]:
    """``(i, j, evaluate_unit(spec, i, j), seconds per phase)`` for every unit, as they finish.

    Args:
      spec: the sweep.
      units: ``(p index, m index)`` units to evaluate.
      workers: processes; 1 evaluates in this process, in order.
      compilation_cache: JAX's persistent compilation cache directory for the workers (None: off).

    Yields:
      One tuple per unit; with several workers, in the order they finish, at most ``2·workers``
      units in flight (memory stays bounded).
    """
    if workers <= 1 or len(units) <= 1:
        for i, j in units:
            yield _evaluate(spec, i, j)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(compilation_cache,)) as pool:
        todo = list(units)[::-1]
        running: set[Future] = set()
        while todo or running:
            while todo and len(running) < 2 * workers:
                i, j = todo.pop()
                running.add(pool.submit(_evaluate, spec, i, j))
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
