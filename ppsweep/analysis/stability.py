"""Ranking stability: where the communication-aware ranking (sim) departs from the bubble-based ones.

At every point of the grid (every ``p, m, [comm], [compute], bandwidth, latency``), the sim
ranking is compared with the formula ranking and with the table ranking (see
:mod:`ppsweep.analysis.ranks` for ranks, ties and winners). Per point, for ``X`` in formula, table:

- ``disagree_X`` — **the winner flips**: the sim winners and the X winners are *disjoint* sets,
  so no schedule that X calls best is best once communication is modelled. A tie on one side that
  includes the other side's winner is not a flip (X cannot tell GPipe from 1F1B; the sim picking
  either one is consistent with X). This is the headline figure.
- ``differ_X`` — the stricter test: the two winner *sets* are not equal (a tie broken, or a
  winner added or lost, counts).
- ``reordered_X`` — the full orders differ: some pair of schedules ranked by both is ordered
  differently (one ahead, the other ahead or tied).
- ``tau_X`` — Kendall's tau-b (:func:`scipy.stats.kendalltau`, which accounts for ties) between the
  sim ranks and the X ranks of the schedules ranked by both; NaN with fewer than two such
  schedules or where either ranking is all ties (tau-b is undefined there).
- ``tau_formula_table`` — the same between formula and table.

Flags are 1.0 / 0.0, NaN where a point cannot be compared (not written, or no ranked schedule on
one side), so xarray's NaN-skipping ``mean`` gives shares of comparable points. Kendall's tau is
computed once per distinct pair of rank vectors (a grid has few), not once per point.
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from ppsweep.analysis.load import grid_dims, masked, schedules, whole_along
from ppsweep.analysis.ranks import ABSTRACTIONS, _winner_attrs, unit_ranks, winner_labels, winner_mask

#: The bubble-based abstractions compared with the simulation.
COMPARED = ("formula", "table")
#: Per-point flags (1.0 / 0.0 / NaN) and their meaning.
FLAGS = {
    "disagree": "sim winners and {x} winners are disjoint (the winner flips)",
    "differ": "sim winner set differs from the {x} winner set",
    "reordered": "sim order of the schedules differs from the {x} order",
}
TAUS = {
    "tau_formula": ("sim", "formula"),
    "tau_table": ("sim", "table"),
    "tau_formula_table": ("formula", "table"),
}


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b between two rank vectors over the entries ranked in both (NaN: unranked).

    NaN when fewer than two entries are ranked by both or either side is all ties.
    """
    both = ~(np.isnan(a) | np.isnan(b))
    x, y = a[both], b[both]
    if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.kendalltau(x, y, variant="b").statistic)


class _TauCache:
    """Kendall's tau per distinct pair of rank vectors."""

    def __init__(self) -> None:
        self.known: dict[bytes, float] = {}

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Tau along axis 0 of two ``(S, *shape)`` rank arrays, shape ``shape``."""
        S = a.shape[0]
        shape = a.shape[1:]
        rows = np.concatenate([a.reshape(S, -1), b.reshape(S, -1)]).T  # (N, 2S)
        rows = np.nan_to_num(rows, nan=0.0)  # ranks are >= 1, so 0 marks "unranked"
        unique, inverse = np.unique(rows, axis=0, return_inverse=True)
        taus = np.empty(len(unique))
        for k, row in enumerate(unique):
            key = row.tobytes()
            if key not in self.known:
                x = np.where(row[:S] > 0, row[:S], np.nan)
                y = np.where(row[S:] > 0, row[S:], np.nan)
                self.known[key] = kendall_tau(x, y)
            taus[k] = self.known[key]
        return taus[inverse.reshape(-1)].reshape(shape)


def _reordered(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1.0 where some pair ranked by both is ordered differently, 0.0 where none, NaN with no such pair."""
    both = ~(np.isnan(a) | np.isnan(b))
    sa = np.sign(a[:, None] - a[None, :])
    sb = np.sign(b[:, None] - b[None, :])
    pair = both[:, None] & both[None, :]
    differs = np.any(pair & (sa != sb), axis=(0, 1))
    return np.where(np.any(both, axis=0), differs, np.nan)


def _flag_names() -> list[str]:
    return [f"{flag}_{x}" for flag in FLAGS for x in COMPARED]


def _stability_block(t_sim: np.ndarray, bubble_formula: np.ndarray, bubble_table: np.ndarray) -> tuple[np.ndarray, ...]:
    """Winners, flags and taus of a block of points; inputs have the schedules on the last axis.

    Returns:
      One array per output of :func:`stability` (winners, then :func:`_flag_names`, then
      :data:`TAUS`), each of the block's point shape.
    """
    values = {
        "t_sim": np.moveaxis(t_sim, -1, 0),
        "bubble_formula": np.moveaxis(bubble_formula, -1, 0),
        "bubble_table": np.moveaxis(bubble_table, -1, 0),
    }
    shape = np.broadcast_shapes(*(v.shape for v in values.values()))[1:]
    r = unit_ranks(values, shape)
    w = {a: winner_mask(r[a]) for a in ABSTRACTIONS}
    flags = {}
    for x in COMPARED:
        comparable = (w["sim"] >= 0) & (w[x] >= 0)
        flags[f"disagree_{x}"] = np.where(comparable, (w["sim"] & w[x]) == 0, np.nan)
        flags[f"differ_{x}"] = np.where(comparable, w["sim"] != w[x], np.nan)
        flags[f"reordered_{x}"] = np.where(comparable, _reordered(r["sim"], r[x]), np.nan)
    tau = _TauCache()
    return (
        *(w[a].astype(np.int64) for a in ABSTRACTIONS),
        *(flags[name].astype(np.float32) for name in _flag_names()),
        *(tau(r[a], r[b]).astype(np.float32) for a, b in TAUS.values()),
    )


def stability(dataset: xr.Dataset) -> xr.Dataset:
    """Per-point comparison of the sim ranking with the formula and table rankings.

    Computed block by block with :func:`xarray.apply_ufunc` (one dask chunk, i.e. one unit, at a
    time when the dataset is :func:`ppsweep.analysis.load`'s): the result is lazy when the dataset
    is dask-backed (``.compute()`` it once before reading it repeatedly), and has one value per
    grid point (the store's points divided by the number of schedules) per variable.

    Returns:
      Dataset over ``p, m, [comm], [compute], bandwidth, latency`` with ``winner_formula``,
      ``winner_table``, ``winner_sim`` (bit masks, see :mod:`ppsweep.analysis.ranks`),
      ``disagree_X``, ``differ_X``, ``reordered_X`` (X = formula, table) and the Kendall taus.
    """
    dims = grid_dims(dataset)
    inputs = [whole_along(masked(dataset, name), ["schedule"]) for name in ("t_sim", "bubble_formula", "bubble_table")]
    outputs = [f"winner_{a}" for a in ABSTRACTIONS] + _flag_names() + list(TAUS)
    dtypes = [np.int64] * len(ABSTRACTIONS) + [np.float32] * (len(outputs) - len(ABSTRACTIONS))
    arrays = xr.apply_ufunc(
        _stability_block, *inputs,
        input_core_dims=[["schedule"]] * 3, output_core_dims=[[]] * len(outputs),
        dask="parallelized", output_dtypes=dtypes,
    )
    names = schedules(dataset)
    variables: dict[str, xr.DataArray] = {}
    for name, array in zip(outputs, arrays):
        array = array.transpose(*dims)
        if name.startswith("winner_"):
            array.attrs = _winner_attrs(name[len("winner_"):], names)
        elif name in TAUS:
            a, b = TAUS[name]
            array.attrs = {"units": "1", "long_name": f"Kendall tau-b between {a} and {b} ranks"}
        else:
            flag, x = name.split("_", 1)
            array.attrs = {"units": "1", "long_name": FLAGS[flag].format(x=x)}
        variables[name] = array
    return xr.Dataset(variables, attrs={"schedules": names})


def summarize(result: xr.Dataset, by: Sequence[str] = ("p", "m")) -> xr.Dataset:
    """Shares of flips, differing winners and reorderings, and mean Kendall taus, per ``by``.

    Args:
      result: :func:`stability`'s dataset.
      by: dimensions kept (default per ``(p, m)`` slice); ``()`` gives the overall figures.

    Returns:
      Dataset over ``by`` with ``share_<flag>_<X>`` (mean of the flag over the comparable points),
      ``mean_tau_*`` (mean over points where tau is defined) and ``n_points`` (comparable points).
    """
    reduce = [d for d in result["winner_sim"].dims if d not in by]
    out = {}
    for name in _flag_names():
        out[f"share_{name}"] = result[name].astype(float).mean(reduce, skipna=True)
        out[f"share_{name}"].attrs = {"units": "1", "long_name": "share of points: " + result[name].attrs["long_name"]}
    for name in TAUS:
        out[f"mean_{name}"] = result[name].astype(float).mean(reduce, skipna=True)
        out[f"mean_{name}"].attrs = {"units": "1", "long_name": "mean " + result[name].attrs["long_name"]}
    out["n_points"] = (result["winner_sim"] >= 0).sum(reduce)
    out["n_points"].attrs = {"long_name": "points with a sim winner"}
    return xr.Dataset(out)


def flip_points(result: xr.Dataset, against: str = "formula") -> pd.DataFrame:
    """The points where the sim winner flips against ``against`` (``disagree_<against>`` is 1).

    Returns:
      One row per point: its coordinates, and the sim and ``against`` winners as text.
    """
    if against not in COMPARED:
        raise ValueError(f"against: must be one of {', '.join(COMPARED)}, got {against!r}")
    names = list(result.attrs.get("schedules") or result["winner_sim"].attrs["schedules"])
    flag = result[f"disagree_{against}"]
    dims = flag.dims
    index = np.nonzero(np.asarray(flag.values) == 1)
    frame = pd.DataFrame({d: result[d].values[ix] for d, ix in zip(dims, index)})
    frame["winner_sim"] = winner_labels(result["winner_sim"].values[index], names)
    frame[f"winner_{against}"] = winner_labels(result[f"winner_{against}"].values[index], names)
    return frame


__all__ = ["COMPARED", "FLAGS", "TAUS", "flip_points", "kendall_tau", "stability", "summarize"]
