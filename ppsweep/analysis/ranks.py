"""Ranks of the schedules at every point, under each abstraction, and the winners they imply.

Rule (the sweep's own, :func:`ppsweep.sweep.ranking.rank_lower_better`): at each point a schedule's
rank is one plus the number of schedules whose value is lower by more than a relative 1e-9, so
ties share the best rank (1, 1, 3: "competition" ranking, as ``scipy.stats.rankdata(method="min")``
with a tolerance). Schedules that cannot run (``valid`` False), units not yet written (``done``
False) and schedules without a value (e.g. no closed-form bubble) get no rank (NaN) and take
none. The values ranked, lower being better:

- ``formula``: ``bubble_formula`` (a table-level quantity: the same at every point of a ``(p, m)``);
- ``table``: ``bubble_table`` (likewise);
- ``sim``: ``t_sim``.

The **winners** of an abstraction at a point are the *set* of its rank-1 schedules (several on a
tie). A set is kept as an integer bit mask, bit ``k`` for the ``k``-th schedule of the store's
``schedule`` coordinate; ``-1`` means no schedule has a rank there. :func:`winner_label` turns a
mask into text (``"gpipe=1f1b"`` for a tie).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import xarray as xr

from ppsweep.analysis.load import grid_dims, masked, point_dims, schedules, whole_along
from ppsweep.sweep.ranking import rank_lower_better

#: The abstractions and the variable each is ranked by.
RANKED_BY = {"formula": "bubble_formula", "table": "bubble_table", "sim": "t_sim"}
ABSTRACTIONS = tuple(RANKED_BY)
#: Winner mask where no schedule has a rank.
NO_WINNER = -1


def unit_ranks(values: dict[str, np.ndarray], inner_shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Ranks of one unit under each abstraction, broadcast to ``(S, *inner_shape)``.

    Args:
      values: masked ``t_sim`` ``(S, *inner)`` and ``bubble_formula``, ``bubble_table`` ``(S,)``
        (as :func:`ppsweep.analysis.load.iter_units` yields them).
      inner_shape: the unit's point shape without the schedule.
    """
    out = {}
    for abstraction, name in RANKED_BY.items():
        v = values[name]
        v = v.reshape(v.shape + (1,) * (1 + len(inner_shape) - v.ndim))
        out[abstraction] = np.broadcast_to(rank_lower_better(v, axis=0), (v.shape[0],) + inner_shape)
    return out


def winner_mask(ranks: np.ndarray) -> np.ndarray:
    """Bit mask of the rank-1 schedules along axis 0 (``-1`` where none is ranked)."""
    bits = (np.int64(1) << np.arange(ranks.shape[0], dtype=np.int64)).reshape((-1,) + (1,) * (ranks.ndim - 1))
    code = np.sum(np.where(ranks == 1, bits, 0), axis=0, dtype=np.int64)
    return np.where(np.all(np.isnan(ranks), axis=0), NO_WINNER, code)


def winner_label(code: int, names: Sequence[str], sep: str = "=") -> str:
    """Text of a winner mask: the winning schedules joined by ``sep`` (``"none"`` for ``-1``)."""
    code = int(code)
    if code < 0:
        return "none"
    return sep.join(name for k, name in enumerate(names) if code >> k & 1)


def winner_labels(codes: xr.DataArray | np.ndarray, names: Sequence[str]) -> np.ndarray:
    """:func:`winner_label` of every element (object array of the same shape)."""
    arr = np.asarray(codes)
    unique, inverse = np.unique(arr, return_inverse=True)
    labels = np.array([winner_label(c, names) for c in unique], dtype=object)
    return labels[inverse].reshape(arr.shape)


def winner_members(code: int, names: Sequence[str]) -> list[str]:
    """The schedules in a winner mask."""
    code = int(code)
    return [] if code < 0 else [name for k, name in enumerate(names) if code >> k & 1]


def _ranks_last(values: np.ndarray) -> np.ndarray:
    return rank_lower_better(values, axis=-1)


def _winner_mask_last(ranks: np.ndarray) -> np.ndarray:
    return winner_mask(np.moveaxis(ranks, -1, 0))


def rank_schedules(values: xr.DataArray) -> xr.DataArray:
    """Competition ranks along ``schedule`` at every point (lower value = better), lazily under dask.

    Args:
      values: a masked variable with a ``schedule`` dimension (:func:`ppsweep.analysis.load.masked`).

    Returns:
      Float ranks of the same dimensions (NaN where the value is NaN).
    """
    dims = values.dims
    out = xr.apply_ufunc(
        _ranks_last, whole_along(values, ["schedule"]),
        input_core_dims=[["schedule"]], output_core_dims=[["schedule"]], dask="parallelized", output_dtypes=[float],
    )
    return out.transpose(*dims)


def winners(ranks: xr.DataArray) -> xr.DataArray:
    """Winner masks (:func:`winner_mask`) of ranks along ``schedule``, lazily under dask."""
    return xr.apply_ufunc(
        _winner_mask_last, whole_along(ranks, ["schedule"]),
        input_core_dims=[["schedule"]], dask="parallelized", output_dtypes=[np.int64],
    )


def ranks(dataset: xr.Dataset) -> xr.Dataset:
    """Ranks of every schedule at every point under each abstraction.

    Computed chunk by chunk with :func:`xarray.apply_ufunc`: lazy (dask-backed) when the
    dataset is, so ``.compute()`` or ``.sel(...)`` first decides what is read; the full result
    holds three float arrays of the size of ``t_sim``.

    Returns:
      Dataset with ``rank_formula``, ``rank_table``, ``rank_sim`` over the point dimensions
      (NaN where the schedule has no rank) and ``winner_<abstraction>`` masks over the grid.
    """
    dims = point_dims(dataset)
    t_sim = masked(dataset, "t_sim")
    names = schedules(dataset)
    variables = {}
    for abstraction, name in RANKED_BY.items():
        rank = rank_schedules(masked(dataset, name)).broadcast_like(t_sim).transpose(*dims)
        rank.attrs = {"units": "1", "long_name": f"rank by {RANKED_BY[abstraction]} among valid schedules (1 = best)"}
        variables[f"rank_{abstraction}"] = rank
        winner = winners(rank).transpose(*grid_dims(dataset))
        winner.attrs = _winner_attrs(abstraction, names)
        variables[f"winner_{abstraction}"] = winner
    return xr.Dataset(variables)


def _winner_attrs(abstraction: str, names: Sequence[str]) -> dict:
    return {
        "long_name": f"rank-1 schedules by {abstraction} (bit k = schedule k; -1: none)",
        "schedules": list(names),
    }


__all__ = [
    "ABSTRACTIONS",
    "NO_WINNER",
    "RANKED_BY",
    "rank_schedules",
    "ranks",
    "unit_ranks",
    "winner_label",
    "winner_labels",
    "winner_mask",
    "winner_members",
    "winners",
]
