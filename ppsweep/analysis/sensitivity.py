"""Sensitivity: how far one parameter must move before the sim winner changes.

For every grid point and every numeric axis (``p``, ``m``, ``compute``, ``bandwidth``,
``latency``; those with more than one value), look along that axis only (all other coordinates
fixed) for the nearest grid point, in either direction, whose sim winner set is a different set
(:mod:`ppsweep.analysis.ranks`; a tie becoming a single winner counts as a change). Points
without a sim winner (not written, nothing valid) are skipped, neither a change nor a stop.

- ``steps_<axis>``: grid steps to that point, counted in increasing order of the axis's values
  (1 = the next grid value already changes the winner); NaN where the winner is the same along the whole axis within the grid.
- ``factor_<axis>``: ``max(x'/x, x/x')`` between the two coordinates (how many times larger or
  smaller the parameter must get); where both directions are equally many steps away, the
  smaller factor. ``inf`` where one of them is 0.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import xarray as xr

from ppsweep.analysis.load import AnalysisError, whole_along
from ppsweep.sweep.dimensions import POINT_DIMENSION_NAMES

#: Axes the sensitivity looks along, when present with more than one value.
NUMERIC_AXES = ("p", "m", *POINT_DIMENSION_NAMES)


def steps_to_change(codes: np.ndarray, coord: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid steps and factor to the nearest different winner along ``axis``.

    Args:
      codes: integer winner masks, ``-1`` where unknown.
      coord: the axis's coordinate values.
      axis: the axis of ``codes``.

    Returns:
      ``steps`` and ``factor`` arrays of ``codes``'s shape (NaN where no change).
    """
    order = np.argsort(np.asarray(coord, dtype=float), kind="stable")  # grid steps in value order
    c = np.moveaxis(codes, axis, -1)[..., order]
    n = c.shape[-1]
    x = np.asarray(coord, dtype=float)[order]
    steps = np.full(c.shape, np.nan)
    factor = np.full(c.shape, np.nan)
    known = c >= 0
    for k in range(1, n):
        for sign in (1, -1):
            src = slice(0, n - k) if sign == 1 else slice(k, n)
            dst = slice(k, n) if sign == 1 else slice(0, n - k)
            changed = known[..., src] & known[..., dst] & (c[..., src] != c[..., dst])
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = x[dst] / x[src]
                f = np.where(ratio >= 1, ratio, 1 / ratio)
            f = np.where((x[dst] == 0) | (x[src] == 0), np.inf, f)
            here_steps = steps[..., src]
            here_factor = factor[..., src]
            new = changed & (np.isnan(here_steps) | (here_steps == k))
            here_factor[...] = np.where(new, np.fmin(here_factor, np.broadcast_to(f, here_factor.shape)), here_factor)
            here_steps[...] = np.where(new, k, here_steps)
    back = np.argsort(order)
    return np.moveaxis(steps[..., back], -1, axis), np.moveaxis(factor[..., back], -1, axis)


def sensitivity(result: xr.Dataset, axes: Sequence[str] | None = None) -> xr.Dataset:
    """Steps and factors before the sim winner changes, along each axis.

    Args:
      result: :func:`ppsweep.analysis.stability`'s dataset (it holds ``winner_sim``).
      axes: axes to look along; default every numeric axis with more than one value.

    Returns:
      Dataset over the grid with ``steps_<axis>`` and ``factor_<axis>`` for each axis.
    """
    winner = result["winner_sim"]
    if axes is None:
        axes = [d for d in NUMERIC_AXES if d in winner.dims and winner.sizes[d] > 1]
    out = {}
    for axis in axes:
        if axis not in winner.dims:
            raise AnalysisError(f"axes: {axis!r} is not a dimension of the grid ({', '.join(winner.dims)})")
        steps, factor = xr.apply_ufunc(
            steps_to_change, whole_along(winner, [axis]),
            input_core_dims=[[axis]], output_core_dims=[[axis], [axis]],
            kwargs={"coord": result[axis].values, "axis": -1}, dask="parallelized", output_dtypes=[float, float],
        )
        steps, factor = steps.transpose(*winner.dims).data, factor.transpose(*winner.dims).data
        out[f"steps_{axis}"] = xr.DataArray(steps, dims=winner.dims, attrs={"units": "grid steps", "long_name": f"grid steps along {axis} before the sim winner changes"})
        out[f"factor_{axis}"] = xr.DataArray(factor, dims=winner.dims, attrs={"units": "1", "long_name": f"factor {axis} must change by before the sim winner changes"})
    return xr.Dataset(out, coords={d: result[d].values for d in winner.dims})


__all__ = ["NUMERIC_AXES", "sensitivity", "steps_to_change"]
