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

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ppsweep.tables.build import UnsupportedPointError, build_schedule
from ppsweep.sweep.config import SweepSpec
from ppsweep.store.results import VARIABLES

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
      store_bytes: the whole store's size, uncompressed (an upper bound on disk).
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
    for p, m in ((4, 8), (8, 16), (2, 4), (6, 12), (16, 32)):
        try:
            table = build_schedule(name, p, m, spec.f_slots, spec.b_slots, **spec.options_for(name))
        except (UnsupportedPointError, ValueError):
            continue
        operations = len(table.placed_ops())
        return table.n_stages / p, operations / (m * table.n_stages)
    return 2.0, 3.0  # no tiny point runs this schedule: assume two stages per worker, split backward


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
        for stages_per_worker, ops_per_micro_stage in shapes.values():
            stages = max(1.0, stages_per_worker * p)
            ops = int(ops_per_micro_stage * m * stages)
            length = slots * stages_per_worker * (m + p)
            table_bytes = ops * BYTES_PER_OPERATION + p * length * BYTES_PER_CELL
            if table_bytes > largest_bytes:
                largest_bytes, largest = int(table_bytes), (p, m)
            tables += 1
            operations += ops
            op_points += ops * points_per_table
    n_point_vars = sum(1 for kind, _, _ in VARIABLES.values() if kind == "point")
    n_table_vars = len(VARIABLES) - n_point_vars
    n_tables_all = n_units * len(spec.schedules)
    store = spec.n_points * n_point_vars * 8 + n_tables_all * (n_table_vars * 8 + 1) + n_units * 9
    unit_bytes = len(spec.schedules) * points_per_table * n_point_vars * 8 * 4  # results, arranging, writing
    engine_bytes = min(points_per_table, spec.chunk) * max(spec.p) * 8 * 64
    memory = largest_bytes + engine_bytes + 2 * unit_bytes + 300e6  # + the interpreter, JAX, xarray
    seconds = operations / BUILD_OPERATIONS_PER_S + op_points / SIM_OPERATION_POINTS_PER_S + tables * SECONDS_PER_TABLE
    if spec.has_layout:  # one engine call per layout, recomputation mode and system of every table
        calls = spec.shape(spec.layout_dims + ("recompute", "system"))
        seconds += tables * float(np.prod(calls)) * SECONDS_PER_LAYOUT_CALL
    return Estimate(tables, operations, len(units) * (spec.n_points // n_units), int(store), int(memory), seconds, largest)


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
