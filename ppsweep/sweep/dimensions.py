"""The sweep's dimensions in store order, and the point dimensions' registry (one record each).

:data:`DIMENSIONS` fixes every dimension a results store can have, in store order, with its units.
Its numeric per-point part comes from :data:`POINT_DIMENSIONS`: each :class:`PointDimension` is a
top-level config key that stands in for one :class:`~ppsweep.cost_model.SystemConfig` field (``null``:
the system's value; a list: a dimension) and says, once, everything the sweep needs of it: units,
accepted range, coordinate dtype, its place in store order (its place in the registry), the cost
argument it sets, and what a profile or a layout sweep makes of it. Everything else -- the config
path (:mod:`ppsweep.sweep.config`), the point grid of the evaluation (:func:`grid_arguments`, used by
:mod:`ppsweep.sweep.evaluate` and :mod:`ppsweep.sweep.layout_eval`), the store's coordinates and
units, the displays and the analyses -- loops over the registry. Adding a dimension is one entry in
:data:`POINT_DIMENSIONS` (plus, where it needs new cost plumbing, the function that applies it).
Modelled on :mod:`ppsweep.engine.comm` (a frozen record, a registry, the rules written once).

This module imports nothing heavy (the displays read :data:`DIMENSIONS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def _never(profile: Any) -> str | None:
    return None


@dataclass(frozen=True)
class PointDimension:
    """One numeric dimension of every per-point variable.

    Attributes:
      name: the dimension, its top-level config key and its :class:`~ppsweep.sweep.config.SweepSpec` field.
      units: the coordinate's ``units`` attribute.
      system_field: the :class:`~ppsweep.cost_model.SystemConfig` field whose value a ``null`` key takes
        (``system.<field>`` given a list is refused, naming this key).
      reaches: the cost argument it sets: a keyword of :func:`ppsweep.cost_model.stage_costs` when
        ``stage``, else of :func:`ppsweep.cost_model.engine_costs` (a :class:`ppsweep.engine.cost_grid.Costs`
        point field), :func:`ppsweep.cost_profile.engine_costs_from_profile` and, with ``layouts``,
        :func:`ppsweep.layout.layout_costs`.
      positive: values must be > ``bounds[0]`` (else >=).
      bounds: accepted values ``(low, high)``; outside them a value is refused.
      meaning: one line (errors, docs).
      bounds_note: what the bounds are, in an error (``physical range``: outside it a value is a unit slip).
      always: a dimension even when ``null`` (one value: the system's, or the profile's network).
      stage: reaches the per-stage costs (their leading axis, so it must come first in the registry).
      layouts: layout sweeps take it as an axis (else they refuse it: each system has its own).
      refused_by: ``profile -> reason`` when a profile gives the quantity itself (then the key must
        be null and the profile's value is used), else None.
      dtype: the coordinate's dtype.
    """

    name: str
    units: str
    system_field: str
    reaches: str
    positive: bool
    bounds: tuple[float, float]
    meaning: str
    bounds_note: str = "the accepted range"
    always: bool = False
    stage: bool = False
    layouts: bool = False
    refused_by: Callable[[Any], str | None] = _never
    dtype: type = float

    @property
    def accepted(self) -> str:
        """The accepted values, in words: ``0 … 1 share``, ``> 0 FLOP/s``."""
        low, high = self.bounds
        if high == np.inf:
            return f"{'>' if self.positive else '>='} {low:g} {self.units}"
        return f"{low:g} … {high:g} {self.units}{' (not 0)' if self.positive and low == 0 else ''}"

    def check(self, values: np.ndarray) -> np.ndarray:
        """``values``, or a one-line ValueError naming the key and the accepted range."""
        low, high = self.bounds
        bad = values[(values < low) | (values > high)]
        if bad.size:
            slip = ' (a unit slip?); see README, "Accepted values"' if self.bounds_note == "the physical range" else ""
            raise ValueError(f"{self.name}: {bad[0]:g} {self.units} is outside {self.bounds_note} {low:g} … {high:g} {self.units}{slip}")
        return values


def _message_time(profile: Any) -> str | None:
    if profile.message_is_time:
        return ("the profile gives the message time (message.time), so bandwidth and latency cannot be swept; "
                "set bandwidth=null latency=null, or give the profile's message as {alpha, beta, bytes}")
    return None


#: The point dimensions, in store order (each after ``comm``, before ``sample``).
POINT_DIMENSIONS: tuple[PointDimension, ...] = (
    PointDimension(
        "compute", "FLOP/s", "peak_flops", "peak_flops", positive=True, bounds=(0.0, np.inf), stage=True,
        meaning="peak FLOP/s of every GPU; memory bandwidth scales with it (the system's bytes per FLOP)",
        refused_by=lambda profile: "scales the cost model's roofline; with costs=profile the times are measured: set compute=null",
    ),
    PointDimension(
        "bandwidth", "bytes/s", "bandwidth", "beta", positive=True, bounds=(1.0e6, 1.0e15), always=True, layouts=True,
        bounds_note="the physical range", refused_by=_message_time,
        meaning="bandwidth of the tier between nodes (a link from 1 MB/s to 1 PB/s)",
    ),
    PointDimension(
        "latency", "s", "latency", "alpha", positive=False, bounds=(0.0, 1.0), always=True, layouts=True,
        bounds_note="the physical range", refused_by=_message_time,
        meaning="latency of one message on the tier between nodes",
    ),
    PointDimension(
        "fb_overlap", "share", "fb_overlap", "fb_overlap", positive=False, bounds=(0.0, 1.0),
        meaning="share of an overlapped F&B pair's forward hidden under its backward (DualPipe's pairs; 0: none)",
        refused_by=lambda profile: None if profile.t_fb is None else "the profile gives t_fb (the pair's measured time); set fb_overlap=null",
    ),
)
#: Names of the point dimensions, in store order.
POINT_DIMENSION_NAMES = tuple(d.name for d in POINT_DIMENSIONS)
assert all(d.stage <= (i == 0) for i, d in enumerate(POINT_DIMENSIONS)), "a stage-cost dimension must come first"

#: Every dimension a results store can have, in store order, with its ``units`` attribute (None:
#: no units). ``schedule``, ``p``, ``m`` and the ``always`` point dimensions are always present.
DIMENSIONS: dict[str, str | None] = {
    "schedule": None,
    "p": "workers",
    "m": "microbatches",
    "gpus": "GPUs",
    "tp": "GPUs",
    "dp": "replicas",
    "cp": "GPUs",
    "recompute": None,
    "memory_capacity": "bytes",
    "system": None,
    "comm": None,
    **{d.name: d.units for d in POINT_DIMENSIONS},
    "sample": None,
}


def grid_arguments(dims: Sequence[PointDimension], values: Mapping[str, Any], system: Any) -> dict[str, Any]:
    """The cost arguments that put each of ``dims`` on its own axis of a ``len(dims)``-axis point grid.

    Args:
      dims: the grid's dimensions, in order.
      values: ``name -> values`` (None: the system's value, one point).
      system: the :class:`~ppsweep.cost_model.SystemConfig` a None takes its value from.

    Returns:
      ``keyword -> value`` (:attr:`PointDimension.reaches`): a stage-cost dimension's values as
      they are (None: the system's), the leading axis of the per-stage costs; any other's shaped
      ``(1, …, n, …, 1)`` at its position.
    """
    out: dict[str, Any] = {}
    for axis, dim in enumerate(dims):
        value = values.get(dim.name)
        if dim.stage:
            out[dim.reaches] = value
            continue
        array = np.atleast_1d(np.asarray(getattr(system, dim.system_field) if value is None else value, dtype=float))
        out[dim.reaches] = array.reshape((1,) * axis + (array.size,) + (1,) * (len(dims) - axis - 1))
    return out


__all__ = ["DIMENSIONS", "POINT_DIMENSIONS", "POINT_DIMENSION_NAMES", "PointDimension", "grid_arguments"]
