"""Rankings under noise (SPEC section 4a): win probabilities, rank distributions, quantiles, regret.

A sweep with a ``noise`` block writes ``t_sim`` with a trailing ``sample`` dimension and the
noise-free step time beside it as ``t_sim_nominal`` (README, "Uncertainty"). Per point (every
grid coordinate except ``schedule`` and ``sample``), over the samples:

- **P(win)** (:func:`win_probability`): the fraction of samples in which a schedule is rank 1
  among the valid schedules; a tie of ``k`` schedules gives each ``1/k``, so the probabilities
  of a point sum to 1.
- **rank distribution** (:func:`rank_distribution`): the fraction of samples in which a schedule
  has rank ``r`` (competition ranks, :func:`ppsweep.sweep.ranking.rank_lower_better`).
- **step-time statistics** (:func:`step_time_stats`): mean and the 50th, 95th, 99th
  percentiles of ``t_sim`` (linear interpolation between samples).
- **regret** (:func:`regret`) of choosing a schedule by a criterion instead of by the sample's
  own simulation: ``t_sim(chosen) / t_sim(best) − 1`` in each sample, ``best`` the fastest valid
  schedule of that sample. Criteria: ``formula`` (lowest ``bubble_formula``), ``table`` (lowest
  ``bubble_table``), ``sim`` (lowest noise-free ``t_sim_nominal``). Where the criterion ties
  several schedules, the regret is the mean over them (a uniformly random tie-break). Reported
  as the mean and the 95th percentile over samples. On a store without samples the same rule
  gives the noise-free regret of ``formula`` and ``table`` (``sim`` is 0 by definition there).

Schedules that cannot run (``valid`` False) and units not yet written (``done`` False) take no
part (NaN). The functions take xarray objects and use :func:`xarray.apply_ufunc` with the
``schedule`` (and ``sample``) axes as core dimensions, so a dask-backed dataset (chunked along
any other dimension) is computed chunk by chunk.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import xarray as xr

from ppsweep.analysis.load import AnalysisError
from ppsweep.sweep.ranking import rank_lower_better

#: The criteria a schedule can be chosen by, and the variable each minimizes.
CHOSEN_BY = {"formula": "bubble_formula", "table": "bubble_table", "sim": "t_sim_nominal"}
#: Percentiles reported of the step time.
PERCENTILES = (50, 95, 99)


# --------------------------------------------------------------------------------------------
# numpy kernels: schedules on axis 0, samples on the last axis


def win_share(t: np.ndarray) -> np.ndarray:
    """Each schedule's share of the win in each sample: ``1/k`` for each of ``k`` tied winners.

    Args:
      t: ``(S, ..., K)`` step times, NaN where a schedule does not run.

    Returns:
      Array of the same shape; NaN where no schedule runs.
    """
    winners = rank_lower_better(t, axis=0) == 1
    count = winners.sum(axis=0, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, winners / count, np.nan)


def _p_win_kernel(t: np.ndarray) -> np.ndarray:
    return np.mean(win_share(t), axis=-1)


def _rank_kernel(t: np.ndarray) -> np.ndarray:
    """``(S, ..., K) -> (S, ..., R)``: fraction of samples with rank ``r = 1 … S``."""
    ranks = rank_lower_better(t, axis=0)
    S = t.shape[0]
    out = np.stack([np.mean(ranks == r, axis=-1) for r in range(1, S + 1)], axis=-1)
    return np.where(np.all(np.isnan(t), axis=-1, keepdims=True), np.nan, out)


def sample_regret(t: np.ndarray, criterion: np.ndarray) -> np.ndarray:
    """Regret of choosing by ``criterion`` in each sample.

    Args:
      t: ``(S, ..., K)`` step times per sample, NaN where a schedule does not run.
      criterion: ``(S, ...)`` the value the choice minimizes (NaN: not choosable).

    Returns:
      ``(..., K)``: mean over the criterion's rank-1 schedules of ``t / min_S t − 1``; NaN where
      no schedule is choosable or none runs.
    """
    crit = np.where(np.isnan(t).all(axis=-1), np.nan, criterion)  # only running schedules are choosable
    chosen = rank_lower_better(crit, axis=0) == 1  # (S, ...)
    with np.errstate(invalid="ignore", divide="ignore"):
        best = np.nanmin(np.where(np.isnan(t), np.inf, t), axis=0)
        ratio = t / best - 1.0  # (S, ..., K)
        n = chosen.sum(axis=0)[..., None]
        total = np.sum(np.where(chosen[..., None], ratio, 0.0), axis=0)
        return np.where((n > 0) & np.isfinite(best), total / n, np.nan)


def _regret_kernel(t: np.ndarray, criterion: np.ndarray) -> np.ndarray:
    """``(..., 2)``: mean and 95th percentile over samples of :func:`sample_regret`."""
    r = sample_regret(t, criterion)
    empty = np.all(np.isnan(r), axis=-1)
    safe = np.where(empty[..., None], 0.0, r)
    out = np.stack([np.mean(safe, axis=-1), np.percentile(safe, 95, axis=-1)], axis=-1)
    return np.where(empty[..., None], np.nan, out)


def _stats_kernel(t: np.ndarray) -> np.ndarray:
    """``(..., K) -> (..., 1 + len(PERCENTILES))``: mean, then the percentiles."""
    empty = np.all(np.isnan(t), axis=-1)
    safe = np.where(empty[..., None], 0.0, t)
    out = np.concatenate([np.mean(safe, axis=-1)[..., None], np.moveaxis(np.percentile(safe, PERCENTILES, axis=-1), 0, -1)], axis=-1)
    return np.where(empty[..., None], np.nan, out)


# --------------------------------------------------------------------------------------------
# xarray


def has_samples(dataset: xr.Dataset) -> bool:
    """True when the store's ``t_sim`` has a ``sample`` dimension (a sweep with noise)."""
    return "sample" in dataset["t_sim"].dims


def masked(dataset: xr.Dataset, name: str) -> xr.DataArray:
    """``dataset[name]`` with NaN where the schedule is not ``valid`` or its unit not ``done``."""
    ok = dataset["valid"].astype(bool)
    if "done" in dataset:
        ok = ok & dataset["done"].astype(bool)
    return dataset[name].where(ok)


def _samples(dataset: xr.Dataset) -> xr.DataArray:
    """Masked ``t_sim`` with a ``sample`` dimension (length 1 on a store without noise)."""
    t = masked(dataset, "t_sim")
    return t if "sample" in t.dims else t.expand_dims(sample=[0], axis=-1)


def _apply(func, *arrays, core: Sequence[Sequence[str]], out_core: Sequence[str] = (), sizes: dict | None = None) -> xr.DataArray:
    return xr.apply_ufunc(
        func, *arrays, input_core_dims=[list(c) for c in core], output_core_dims=[list(out_core)],
        dask="parallelized", output_dtypes=[float], dask_gufunc_kwargs={"output_sizes": sizes or {}},
    )


def win_probability(dataset: xr.Dataset) -> xr.DataArray:
    """P(win) of every schedule at every point (module docstring): dims ``schedule`` + grid."""
    t = _samples(dataset)
    p = _apply(lambda a: np.moveaxis(_p_win_kernel(np.moveaxis(a, -2, 0)), 0, -1), t, core=[("schedule", "sample")], out_core=("schedule",), sizes={"schedule": t.sizes["schedule"]})
    return p.transpose("schedule", ...).rename("p_win").assign_attrs(units="1", long_name="probability of being the fastest schedule (ties shared)")


def rank_distribution(dataset: xr.Dataset) -> xr.DataArray:
    """Fraction of samples in which each schedule has each rank: dims ``schedule, rank`` + grid."""
    t = _samples(dataset)
    S = t.sizes["schedule"]
    d = _apply(lambda a: np.moveaxis(_rank_kernel(np.moveaxis(a, -2, 0)), 0, -2), t, core=[("schedule", "sample")], out_core=("schedule", "rank"), sizes={"schedule": S, "rank": S})
    d = d.assign_coords(rank=np.arange(1, S + 1)).transpose("schedule", "rank", ...)
    return d.rename("rank_probability").assign_attrs(units="1", long_name="fraction of samples with this rank (1 = best)")


def step_time_stats(dataset: xr.Dataset) -> xr.Dataset:
    """Mean and 50th/95th/99th percentiles of ``t_sim`` over samples: ``t_mean``, ``t_p50``, … (s)."""
    t = _samples(dataset)
    names = ["t_mean"] + [f"t_p{q}" for q in PERCENTILES]
    s = _apply(_stats_kernel, t, core=[("sample",)], out_core=("stat",), sizes={"stat": len(names)})
    out = xr.Dataset({name: s.isel(stat=k, drop=True) for k, name in enumerate(names)})
    for name in names:
        out[name].attrs = {"units": "s", "long_name": f"{name[2:]} of the step time over samples"}
    return out.transpose("schedule", ...)


def regret(dataset: xr.Dataset, by: Sequence[str] | None = None) -> xr.Dataset:
    """Regret of choosing by each criterion at every point (module docstring).

    Args:
      dataset: a results store (with or without a ``sample`` dimension).
      by: criteria among ``formula``, ``table``, ``sim``; default: every one the store allows
        (``sim`` needs ``t_sim_nominal``, which stores with samples have).

    Returns:
      ``regret_<by>_mean`` and ``regret_<by>_p95`` over the grid (dimensionless; 0.05 = 5 % slower).

    Raises:
      AnalysisError: an unknown criterion, or ``sim`` on a store without ``t_sim_nominal``.
    """
    if by is None:
        by = [c for c, name in CHOSEN_BY.items() if name in dataset]
    t = _samples(dataset)
    out = {}
    for criterion in by:
        if criterion not in CHOSEN_BY:
            raise AnalysisError(f"regret: unknown criterion {criterion!r}; accepted: {', '.join(CHOSEN_BY)}")
        name = CHOSEN_BY[criterion]
        if name not in dataset:
            raise AnalysisError(f"regret: choosing by {criterion!r} needs the variable {name!r}, which this store lacks")
        crit = masked(dataset, name)
        r = _apply(
            lambda a, c: _regret_kernel(np.moveaxis(a, -2, 0), np.moveaxis(c, -1, 0)),
            t, crit, core=[("schedule", "sample"), ("schedule",)], out_core=("stat",), sizes={"stat": 2},
        )
        for k, stat in enumerate(("mean", "p95")):
            out[f"regret_{criterion}_{stat}"] = r.isel(stat=k, drop=True).assign_attrs(
                units="1", long_name=f"{stat} over samples of t_sim(chosen by {criterion}) / t_sim(best) - 1"
            )
    return xr.Dataset(out)


def uncertainty(dataset: xr.Dataset) -> xr.Dataset:
    """Everything of this module at once: ``p_win``, ``rank_probability``, step-time statistics, regret."""
    return xr.merge([win_probability(dataset), rank_distribution(dataset), step_time_stats(dataset), regret(dataset)])


def regret_summary(result: xr.Dataset) -> dict[str, dict[str, float]]:
    """Headline figures of :func:`regret`'s output: per criterion, over the grid's points with a value.

    Returns:
      ``criterion -> {"mean", "p95", "max", "share_positive", "points"}``: the mean over points of
      the per-point mean regret, the mean over points of the per-point 95th percentile, the largest
      per-point mean, the share of points where the mean regret exceeds 0.1 %, and the points counted.
    """
    out = {}
    for name in result.data_vars:
        if not (name.startswith("regret_") and name.endswith("_mean")):
            continue
        criterion = name[len("regret_") : -len("_mean")]
        mean = np.asarray(result[name].values, float).ravel()
        p95 = np.asarray(result[f"regret_{criterion}_p95"].values, float).ravel()
        ok = ~np.isnan(mean)
        out[criterion] = {
            "mean": float(np.mean(mean[ok])) if ok.any() else float("nan"),
            "p95": float(np.mean(p95[ok])) if ok.any() else float("nan"),
            "max": float(np.max(mean[ok])) if ok.any() else float("nan"),
            "share_positive": float(np.mean(mean[ok] > 1e-3)) if ok.any() else float("nan"),
            "points": int(ok.sum()),
        }
    return out


def robustness(dataset: xr.Dataset) -> xr.Dataset:
    """Per schedule, how its standing holds up under noise, over every point where it runs.

    Returns:
      Dataset over ``schedule``: ``p_win_mean`` (mean P(win)), ``flip_share`` (share of the points
      where it is the noise-free winner at which it still wins in fewer than 90 % of samples),
      ``tail95``, ``tail99`` (means of ``t_p95 / t_mean − 1`` and ``t_p99 / t_mean − 1``: how far
      its slow samples lie above its mean), ``slowdown`` (mean of ``t_mean / t_sim_nominal − 1``).
      ``flip_share`` and ``slowdown`` only where the store has ``t_sim_nominal``.
    """
    p_win = win_probability(dataset)
    stats = step_time_stats(dataset)
    grid = [d for d in p_win.dims if d != "schedule"]
    out = {
        "p_win_mean": p_win.mean(grid),
        "tail95": (stats["t_p95"] / stats["t_mean"] - 1).mean(grid),
        "tail99": (stats["t_p99"] / stats["t_mean"] - 1).mean(grid),
    }
    if "t_sim_nominal" in dataset:
        nominal = masked(dataset, "t_sim_nominal")
        winner = xr.apply_ufunc(
            lambda a: np.moveaxis(rank_lower_better(np.moveaxis(a, -1, 0), axis=0) == 1, 0, -1),
            nominal, input_core_dims=[["schedule"]], output_core_dims=[["schedule"]], dask="parallelized", output_dtypes=[bool],
        ).transpose(*p_win.dims)
        fragile = (p_win < 0.9) & winner
        out["flip_share"] = fragile.sum(grid) / winner.sum(grid)
        out["slowdown"] = (stats["t_mean"] / nominal - 1).mean(grid)
    return xr.Dataset(out)


__all__ = [
    "CHOSEN_BY",
    "PERCENTILES",
    "has_samples",
    "masked",
    "rank_distribution",
    "regret",
    "regret_summary",
    "robustness",
    "sample_regret",
    "step_time_stats",
    "uncertainty",
    "win_probability",
    "win_share",
]
