"""What a sweep will cost, before any work: tables, operations, points, store size, memory, time.

:func:`estimate` extrapolates from one tiny table per schedule (its operations per microbatch
and stage, and its stages per worker); nothing large is built and JAX is not imported. The
figures are rough (within a small factor): they are there to stop a runaway grid
(``p=[100000]``, ``m=[1000000]``) before it starts, not to plan a cluster budget.

:func:`check_limits` refuses a sweep whose estimate exceeds this machine's memory, the free disk
space, or a configured ``limits.*`` value, naming the key that overrides it; ``dry_run=true``
prints the estimate and stops (:mod:`ppsweep.cli.main`).

Constants (measured on the development machine, 2 shared cores; a faster machine is faster):
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ppsweep.schedules import SCHEDULES
from ppsweep.schedules.variants import split_label
from ppsweep.small_inputs import as_python
from ppsweep.tables.build import UnsupportedPointError, build_schedule
from ppsweep.sweep.config import SweepSpec
from ppsweep.store.schema import VARIABLES

#: Bytes of memory per operation while a table is built and compiled (Python objects, program).
BYTES_PER_OPERATION = 1024
#: Bytes per cell of a table's integer arrays (kind, microbatch, stage, replica, duration).
BYTES_PER_CELL = 40
#: Operations per second of building and compiling a table (``+sweep=million``: 120,960
#: operations in 0.8 s on a quiet machine).
BUILD_OPERATIONS_PER_S = 1.5e5
#: Operation-points per second of the engine (one operation simulated at one point;
#: ``+sweep=million``: 3.0e9 in 28 s of "evaluate" on a quiet machine).
SIM_OPERATION_POINTS_PER_S = 1.0e8
#: Seconds of fixed cost per table (compilation, dispatch).
SECONDS_PER_TABLE = 0.1
#: Seconds of one engine call of a layout sweep (one table under one layout, recomputation mode
#: and system: its costs, memory and dispatch; ``+sweep=layout``: 3,456 calls, half of them
#: invalid layouts, in 33 s of "evaluate" on a busy 2-core machine).
SECONDS_PER_LAYOUT_CALL = 0.005


@dataclass(frozen=True)
class Estimate:
    """A sweep's (or one job's) cost.

    Attributes:
      tables: schedule tables to build (one per schedule per unit).
      operations: operations in those tables.
      points: grid points to evaluate.
      store_bytes: the whole store's disk space (:func:`store_bytes`).
      memory_bytes: peak memory of one process (the largest table plus the engine's working set).
      seconds: time of the work.
      largest: the unit ``(p, m)`` with the largest table.
    """

    tables: int
    operations: int
    points: int
    store_bytes: int
    memory_bytes: int
    seconds: float
    largest: tuple[int, int]

    def line(self) -> str:
        """``"estimate: 24 tables, 6,720 operations, 7,680 points, store 0.6 MB, memory 0.1 GB, time 14 s"``."""
        return (
            f"estimate: {self.tables:,} tables, {self.operations:,} operations, {self.points:,} points, "
            f"store {_size(self.store_bytes)}, memory {_size(self.memory_bytes)}, time {_duration(self.seconds)} "
            f"(largest table at p={self.largest[0]}, m={self.largest[1]})"
        )


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1e6:.2f} MB"


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:,.0f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _shape_of(spec: SweepSpec, name: str) -> tuple[float, float]:
    """``(stages per worker, operations per microbatch and stage)`` of schedule ``name``, from a tiny table."""
    return _shape(name, spec.f_slots, spec.b_slots, spec.options_for(name))


def _shape(name: str, f_slots: int, b_slots: int, options: dict) -> tuple[float, float]:
    """As :func:`_shape_of`. The tiny table is bounded: every option that sizes a table is bounded
    (:data:`ppsweep.tables.build.MAX_OPTION_VALUE`, ``slots`` by :data:`ppsweep.sweep.config.MAX_SLOTS`).
    Its small kernels run as Python (:func:`ppsweep.small_inputs.as_python`): the estimate comes
    before a run starts its evaluators, which compile them."""
    for p, m in ((4, 8), (8, 16), (2, 4), (6, 12), (16, 32)):
        try:
            with as_python():
                table = build_schedule(name, p, m, f_slots, b_slots, **options)
        except UnsupportedPointError:
            continue
        except ValueError:
            if split_label(name)[0] not in SCHEDULES:
                raise  # a user schedule that fails (raises, returns garbage): its one line, before any store
            continue
        operations = len(table.placed_ops())
        return table.n_stages / p, operations / (m * table.n_stages)
    return 2.0, 3.0  # no tiny point runs this schedule: assume two stages per worker, split backward


def _table_size(shape: tuple[float, float], p: int, m: int, slots: int) -> tuple[int, float]:
    """``(operations, bytes to build it)`` of a table of ``shape`` (:func:`_shape`) at ``(p, m)``."""
    stages_per_worker, ops_per_micro_stage = shape
    stages = max(1.0, stages_per_worker * p)
    ops = int(ops_per_micro_stage * m * stages)
    length = slots * stages_per_worker * (m + p)
    return ops, ops * BYTES_PER_OPERATION + p * length * BYTES_PER_CELL


def check_table(name: str, p: int, m: int, f_slots: int = 1, b_slots: int = 2, **options) -> None:
    """Refuse, before building it, a table that would not fit in this machine's memory
    (``python -m ppsweep.show`` / ``trace``; a sweep's tables pass through :func:`check_limits`).

    Raises:
      ValueError: one line with the table's estimated size and this machine's memory.
    """
    from ppsweep.tables.build import check_positive_int

    p, m = check_positive_int("p", p, 2), check_positive_int("m", m, 1)
    _, need = _table_size(_shape(name, f_slots, b_slots, options), p, m, f_slots + b_slots)
    need += 300e6  # the interpreter and its libraries
    memory = machine_memory_bytes()
    if need > memory:
        raise ValueError(
            f"p={p}, m={m}: the {name} table needs about {_size(need)}, over this machine's memory ({_size(memory)}); "
            "choose a smaller p or m"
        )


def estimate(spec: SweepSpec, units: Sequence[tuple[int, int]] | None = None) -> Estimate:
    """Estimate the cost of ``units`` of ``spec`` (None: every unit).

    Args:
      spec: the sweep.
      units: the ``(p index, m index)`` units one job runs.

    Returns:
      The :class:`Estimate`; the store size is the whole grid's.
    """
    units = spec.units() if units is None else list(units)
    shapes = {name: _shape_of(spec, name) for name in spec.schedules}
    n_units = len(spec.units())
    points_per_table = spec.n_points // (n_units * len(spec.schedules))
    tables = operations = 0
    op_points = 0.0
    largest_bytes, largest = 0, (spec.p[0], spec.m[0])
    slots = spec.f_slots + spec.b_slots
    for i, j in units:
        p, m = spec.p[i], spec.m[j]
        for shape in shapes.values():
            ops, table_bytes = _table_size(shape, p, m, slots)
            if table_bytes > largest_bytes:
                largest_bytes, largest = int(table_bytes), (p, m)
            tables += 1
            operations += ops
            op_points += ops * points_per_table
    n_point_vars = sum(1 for kind, _, _ in VARIABLES.values() if kind == "point")
    store = store_bytes(spec)
    unit_bytes = len(spec.schedules) * points_per_table * n_point_vars * 8 * 4  # results, arranging, writing
    engine_bytes = min(points_per_table, spec.chunk) * max(spec.p) * 8 * 64
    memory = largest_bytes + engine_bytes + 2 * unit_bytes + 300e6  # + the interpreter, JAX, xarray
    seconds = operations / BUILD_OPERATIONS_PER_S + op_points / SIM_OPERATION_POINTS_PER_S + tables * SECONDS_PER_TABLE
    if spec.has_layout:  # one engine call per layout, recomputation mode and system of every table
        calls = spec.shape(spec.layout_dims + ("recompute", "system"))
        seconds += tables * float(np.prod(calls)) * SECONDS_PER_LAYOUT_CALL
    return Estimate(tables, operations, len(units) * (spec.n_points // n_units), int(store), int(memory), seconds, largest)


#: Disk allocation unit (bytes): every file and directory of a store takes at least one block.
BLOCK_BYTES = 4096
#: Compressed size of a float chunk over its raw size (blosc lz4 with shuffle: 2.1-2.8x on step
#: times, more where a schedule is invalid and its values NaN).
FLOAT_COMPRESSION = 0.45


def store_bytes(spec: SweepSpec) -> int:
    """The disk space of ``spec``'s finished store: every array's chunks (one per unit, compressed,
    each a file of whole blocks) and the directories zarr nests them in (``c/0/i/j/...``), its
    metadata files, and the coordinates. Within 2x of ``du`` on the sweeps of conf/sweep/.
    """
    from ppsweep.store.schema import booleans, variables

    def blocks(n: float) -> int:
        return max(1, -(-int(n) // BLOCK_BYTES))

    total = 0
    arrays = {**{name: kind for name, (kind, _, _) in variables(spec).items()}, **{name: kind for name, (kind, _, _) in booleans(spec).items()}}
    for name, kind in {**arrays, "done": "unit", "checksum": "unit"}.items():
        dims = ("p", "m") if kind == "unit" else spec.dims_of(kind)
        shape = spec.shape(dims)
        grid = [n if d in ("p", "m") else 1 for d, n in zip(dims, shape)]
        chunk_raw = math.prod(n for d, n in zip(dims, shape) if d not in ("p", "m")) * (8 if name not in booleans(spec) and kind != "unit" else 1)
        chunk = blocks(chunk_raw * (FLOAT_COMPRESSION if chunk_raw > 64 else 1.0))
        directories = 2 + sum(math.prod(grid[: k + 1]) for k in range(len(grid) - 1))
        total += (math.prod(grid) * chunk + directories + 1) * BLOCK_BYTES
    for values in spec.coords().values():
        total += (3 + blocks(values.size * 8)) * BLOCK_BYTES  # directory, c/, zarr.json, chunk
    return total + 2 * BLOCK_BYTES  # the root directory and zarr.json


def machine_memory_bytes() -> int:
    """Physical memory of this machine."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def free_disk_bytes(path: str | os.PathLike) -> int:
    """Free space of the filesystem that holds ``path`` (or its nearest existing parent)."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    return shutil.disk_usage(where).free


def check_limits(figures: Estimate, limits: dict[str, float | None], path: str | os.PathLike) -> None:
    """Refuse ``figures`` over a limit, naming the limit and the key that overrides it.

    Args:
      figures: the estimate.
      limits: ``memory_gb``, ``store_gb``, ``hours`` (None: this machine's memory, the free disk
        space where the store goes, no limit).
      path: the store (for the free disk space).

    Raises:
      ValueError: one line with the estimate, what it exceeds, and the override
        (``limits.memory_gb=...``), or advice to shrink the grid.
    """
    checks = [
        ("memory_gb", figures.memory_bytes / 1e9, limits.get("memory_gb"), machine_memory_bytes() / 1e9, "this machine's memory"),
        ("store_gb", figures.store_bytes / 1e9, limits.get("store_gb"), free_disk_bytes(path) / 1e9, "the free disk space"),
        ("hours", figures.seconds / 3600, limits.get("hours"), None, ""),
    ]
    for key, value, limit, default, what in checks:
        bound = limit if limit is not None else default
        if bound is not None and value > bound:
            source = f"limits.{key}={limit:g}" if limit is not None else f"{what} ({bound:,.1f})"
            unit = "hours" if key == "hours" else "GB"
            shrink = "split it (shards=N) or shrink the grid" if key == "hours" else "shrink the grid (fewer or smaller p, m)"
            raise ValueError(
                f"limits.{key}: this sweep needs about {value:,.1f} {unit}, over {source}; {figures.line()}; "
                f"{shrink}, or raise the limit with limits.{key}=N (dry_run=true shows the estimate only)"
            )
