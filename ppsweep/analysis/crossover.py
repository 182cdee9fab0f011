"""Crossovers: where along the bandwidth axis two schedules swap places.

For every ordered pair of schedules ``(schedule, other)`` and every series of points that differ
only in bandwidth (each ``p, m, [comm], [compute], latency``), the sign of
``d = ln(t_sim[schedule] / t_sim[other])`` is followed along increasing bandwidth. Values within
the ranking tolerance (a relative 1e-9, :data:`ppsweep.sweep.ranking.RANK_TOLERANCE`) tie (sign 0).

A **crossover** is where the sign goes from one strict side to the other:

- between two neighbouring grid points, ``d`` is interpolated linearly in ``log10(bandwidth)``
  and the crossover is where it reaches 0;
- across a run of tied grid points, it is the midpoint (in log bandwidth) of the tied run.

Going from a strict order into a tie (or out of one) without changing sides is no crossover; a
masked point (not written, schedule invalid) ends the series there. A series can cross several
times; crossovers are listed by increasing bandwidth along a ``crossing`` dimension.
``direction`` is +1 where ``schedule`` is the faster one above the crossover (at higher
bandwidth), -1 where it is faster below. The pair matrix is symmetric (``other``/``schedule``
has the same crossovers with opposite directions); the diagonal has none.

Any other numeric axis can be followed instead (``along="latency"``, ``"compute"``); the axis
is interpolated in log space when all its values are > 0, else linearly.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ppsweep.analysis.load import AnalysisError, inner_dims, masked, schedules, whole_along
from ppsweep.sweep.ranking import RANK_TOLERANCE


def _signs(t: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """Sign of ``t[a] - t[b]`` with ties (0) for every pair, and ``ln(t[a]/t[b])``; shapes ``(S, S, ...)``."""
    a, b = t[:, None], t[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = a < b - rtol * np.abs(b)
        higher = b < a - rtol * np.abs(a)
        sign = np.where(lower, -1.0, np.where(higher, 1.0, 0.0))
        sign = np.where(np.isnan(a) | np.isnan(b), np.nan, sign)
        d = np.log(a / b)
    return sign, d


def series_crossings(sign: np.ndarray, d: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Crossovers of many series along their last axis.

    Args:
      sign: ``(..., n)`` -1 / 0 / +1 / NaN (masked).
      d: ``(..., n)`` the quantity whose zero is interpolated (same sign as ``sign`` off ties).
      x: ``(n,)`` increasing positions (already log-transformed where wanted).

    Returns:
      ``position`` ``(..., n-1)`` (NaN where no crossover ends at that grid step) and
      ``direction`` ``(..., n-1)`` (the new sign of ``d`` after the crossover, 0 where none).
    """
    n = sign.shape[-1]
    batch = sign.shape[:-1]
    position = np.full(batch + (max(n - 1, 0),), np.nan)
    new_sign = np.zeros(batch + (max(n - 1, 0),))
    last_sign = np.zeros(batch)  # sign of the last strict point, 0 where none (or after a mask)
    last_index = np.full(batch, -1)
    for i in range(n):
        s = sign[..., i]
        masked = np.isnan(s)
        strict = ~masked & (s != 0)
        cross = strict & (last_sign != 0) & (s != last_sign)
        if i > 0 and np.any(cross):
            adjacent = last_index == i - 1
            prev_d = np.take_along_axis(d, np.clip(last_index, 0, n - 1)[..., None], axis=-1)[..., 0]
            with np.errstate(invalid="ignore", divide="ignore"):
                frac = prev_d / (prev_d - d[..., i])
            interpolated = x[i - 1] + (x[i] - x[i - 1]) * frac
            tie_start = x[np.clip(last_index + 1, 0, n - 1)]
            midpoint = (tie_start + x[i - 1]) / 2
            position[..., i - 1] = np.where(cross, np.where(adjacent, interpolated, midpoint), np.nan)
            new_sign[..., i - 1] = np.where(cross, s, 0.0)
        last_sign = np.where(masked, 0.0, np.where(strict, s, last_sign))
        last_index = np.where(masked, -1, np.where(strict, i, last_index))
    return position, new_sign


def _block_crossings(t: np.ndarray, x: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`series_crossings` of every pair for a block ``(..., schedule, along)`` of step times.

    Returns:
      ``position`` and ``direction``, each ``(..., schedule, other, step)``.
    """
    sign, d = _signs(np.moveaxis(t, -2, 0), rtol)  # (S, S, ..., n)
    position, direction = series_crossings(sign, d, x)
    return np.moveaxis(position, (0, 1), (-3, -2)), np.moveaxis(direction, (0, 1), (-3, -2))


def crossovers(dataset: xr.Dataset, along: str = "bandwidth", rtol: float = RANK_TOLERANCE) -> xr.Dataset:
    """Where each pair of schedules changes order along ``along`` (default the bandwidth).

    Args:
      dataset: an opened results dataset (dask-backed: computed chunk by chunk, in parallel).
      along: the axis followed: ``bandwidth`` (default), ``latency`` or ``compute``.
      rtol: relative tie tolerance.

    Returns:
      Dataset over ``schedule, other, p, m, [comm], [compute], latency`` (the point dimensions
      with ``along`` replaced by the pair) and ``crossing`` (at least 1), with

      - ``crossover``: the value of ``along`` at each crossover (NaN past the last one);
      - ``direction``: +1 where ``schedule`` is faster above the crossover, -1 below;
      - ``n_crossings``: crossovers of each series.
    """
    inner = inner_dims(dataset)
    if along not in inner:
        raise AnalysisError(f"along: {along!r} is not an axis within a unit; choose one of {', '.join(inner)}")
    coord = np.asarray(dataset[along].values, dtype=float)
    order = np.argsort(coord, kind="stable")
    coord = coord[order]
    logarithmic = bool(np.all(coord > 0))
    x = np.log10(coord) if logarithmic else coord
    n = len(coord)
    rest = [d for d in inner if d != along]
    t_sim = masked(dataset, "t_sim").isel({along: order})
    lead = ["p", "m", *rest]
    if n < 2:  # no grid step to cross
        S = dataset.sizes["schedule"]
        positions = np.full((S, S) + tuple(dataset.sizes[d] for d in lead) + (0,), np.nan)
        directions = np.zeros_like(positions)
    else:
        found_at, new_sign = xr.apply_ufunc(
            _block_crossings, whole_along(t_sim, ["schedule", along]),
            input_core_dims=[["schedule", along]], output_core_dims=[["schedule", "other", "step"]] * 2,
            kwargs={"x": x, "rtol": rtol}, dask="parallelized", output_dtypes=[float, float],
            dask_gufunc_kwargs={"output_sizes": {"other": dataset.sizes["schedule"], "step": n - 1}},
        )
        both = xr.Dataset({"position": found_at, "direction": new_sign}).transpose("schedule", "other", *lead, "step").compute()
        positions, directions = both["position"].values, both["direction"].values
    found = ~np.isnan(positions)
    counts = found.sum(axis=-1)
    k = max(int(counts.max(initial=0)), 1)
    first = np.argsort(~found, axis=-1, kind="stable")[..., :k]  # crossover steps first, in order
    pos = np.take_along_axis(positions, first, axis=-1)
    direction = -np.take_along_axis(directions, first, axis=-1)  # new sign of ln(t_a/t_b) < 0: a faster above
    if logarithmic:
        pos = 10.0**pos
    if k > positions.shape[-1]:  # no grid steps at all (a single value of `along`)
        pos = np.full(pos.shape[:-1] + (k,), np.nan)
        direction = np.zeros(pos.shape)
    dims = ("schedule", "other", "p", "m") + tuple(rest) + ("crossing",)
    names = schedules(dataset)
    coords = {
        "schedule": np.array(names, dtype=object),
        "other": np.array(names, dtype=object),
        "p": dataset["p"].values,
        "m": dataset["m"].values,
        **{d: dataset[d].values for d in rest},
        "crossing": np.arange(k),
    }
    units = dataset[along].attrs.get("units", "")
    return xr.Dataset(
        {
            "crossover": (dims, pos, {"units": units, "long_name": f"{along} at which the pair changes order"}),
            "direction": (dims, direction.astype(np.int8), {"long_name": f"+1: schedule faster above the crossover (higher {along}); -1: below"}),
            "n_crossings": (dims[:-1], counts.astype(np.int64), {"long_name": f"crossovers along {along}"}),
        },
        coords=coords,
        attrs={"along": along, "interpolation": "log10" if logarithmic else "linear"},
    )


__all__ = ["crossovers", "series_crossings"]
