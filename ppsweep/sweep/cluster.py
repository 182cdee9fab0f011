"""Units of work as tasks of a dask.distributed cluster (``engine.cluster=dask://HOST:PORT``).

The same contract as :func:`ppsweep.sweep.parallel.evaluate_units`: units are taken from the caller
one at a time (the caller locks each as it hands it out), evaluated elsewhere, and their results
come back here, where the caller writes them; the store, its locks, its checksums and resume work
exactly as on one machine. A unit's results depend on its inputs alone, so the store is the same
to the bit whichever worker computes a unit, or how often: a worker that dies mid-unit loses
nothing written, and the scheduler runs its unit again on another worker (dask's own rule: a task
whose worker dies is rescheduled, up to ``distributed.scheduler.allowed-failures`` times).

Workers need ppsweep importable at the same version (the store's identity holds the code that
computed it); JAX is imported in the worker processes, never forked (dask's workers are spawned).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Iterator

from ppsweep.sweep.config import SweepSpec, scheduler_address
from ppsweep.sweep.parallel import UnitResult, configure_jax, evaluate_one


#: Seconds to wait for the scheduler to answer.
CONNECT_SECONDS = 30
#: Times a unit whose task failed (its worker lost past dask's own retries) is submitted again.
UNIT_RETRIES = 2


class ClusterError(RuntimeError):
    """The cluster cannot be used (not installed, not reachable); the message is one line."""


def _evaluate_on_worker(spec: SweepSpec, i: int, j: int, compilation_cache: str | None) -> UnitResult:
    """A task: one unit, on a dask worker (JAX configured once per worker process)."""
    configure_jax(compilation_cache)
    return evaluate_one(spec, i, j)


def evaluate_units_on_cluster(
    spec: SweepSpec, units: Iterable[tuple[int, int]], cluster: str, compilation_cache: str | None = None
) -> Iterator[UnitResult]:
    """``(i, j, evaluate_unit(spec, i, j), seconds per phase)`` for every unit, as the cluster finishes them.

    Args:
      spec: the sweep.
      units: ``(p index, m index)`` units, taken one at a time as a worker thread frees (at most one
        more in flight than the cluster has threads, so that locks are held only for units being
        computed).
      cluster: ``engine.cluster`` (:func:`scheduler_address`).
      compilation_cache: JAX's persistent compilation cache directory on the workers (None: off).

    Raises:
      ClusterError: dask.distributed is not installed (``pip install 'ppsweep[cluster]'``), or no
        scheduler answers at the address.
    """
    try:
        from distributed import Client, wait
    except ImportError:
        raise ClusterError("engine.cluster: needs dask.distributed (pip install 'ppsweep[cluster]')") from None
    units = iter(units)
    address = scheduler_address(cluster)
    try:
        client = Client(address, set_as_default=False, timeout=CONNECT_SECONDS)
    except (OSError, TimeoutError) as error:
        raise ClusterError(f"engine.cluster: no dask scheduler answered at {address} within {CONNECT_SECONDS} s ({error})") from None
    run = uuid.uuid4().hex[:8]  # keys of this run's tasks: another run on the same cluster has its own
    failures: dict[tuple[int, int], int] = {}
    with client, client.as_current():  # distributed.wait asks for the current client
        slots = max(1, sum(client.nthreads().values())) + 1
        running = {}

        def submit(unit: tuple[int, int]) -> None:
            key = f"ppsweep-{spec.name}-{run}-p{unit[0]}-m{unit[1]}-try{failures.get(unit, 0)}"
            running[client.submit(_evaluate_on_worker, spec, *unit, compilation_cache, pure=False, key=key)] = unit

        for unit in itertools.islice(units, slots):
            submit(unit)
        while running:
            done, _ = wait(list(running), return_when="FIRST_COMPLETED")
            for future in done:
                unit = running.pop(future)
                if future.status != "finished":  # its worker died past dask's own retries, or it raised
                    failures[unit] = failures.get(unit, 0) + 1
                    if failures[unit] > UNIT_RETRIES:
                        raise ClusterError(f"unit p={spec.p[unit[0]]} m={spec.m[unit[1]]} failed {failures[unit]} times on "
                                           f"{address}: {future.exception()!r}")
                    submit(unit)
                    continue
                result = future.result()
                future.release()
                more = next(units, None)
                if more is not None:
                    submit(more)
                yield result
