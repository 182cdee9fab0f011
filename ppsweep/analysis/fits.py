"""The fastest schedule that fits: step time once each worker's memory is capped.

A sweep with a ``memory_capacity`` list stores ``fits`` (``valid`` and the bottleneck worker's
``peak_memory_bytes`` within the capacity) with a ``memory_capacity`` dimension; a store without
it can be given capacities here (bytes per worker). Where the sweep has a ``recompute``
dimension, the choice is made over schedule × recomputation (a user picks both).

Rules:

- An **option** is a schedule (and, with a ``recompute`` dimension, a recomputation mode). At
  each point (every other dimension, and each capacity) the options that are ``valid``, whose
  unit is ``done`` and that **fit** compete on the simulated step time ``t_sim``.
- **Ranks among fitting options** (``rank_fit``): competition ranks of ``t_sim`` over the fitting
  options only (:func:`ppsweep.sweep.ranking.rank_lower_better`: ties within 1e-9 relative share the
  best rank); options that do not fit get no rank (NaN) and take none.
- The **choice** is the option of rank 1; among tied options the first in store order
  (schedule order, then ``none``, ``selective``, ``full``: the least recomputation). ``-1``
  where nothing fits.
- ``memory_cost`` = ``t_fit / t_free - 1``: how much slower the fastest fitting option is than
  the fastest valid option with no cap (0 where the unconstrained winner fits).
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import xarray as xr

from ppsweep.analysis.load import AnalysisError
from ppsweep.sweep.ranking import rank_lower_better

#: Name of the capacity dimension (bytes per worker).
CAPACITY = "memory_capacity"


def fits_mask(dataset: xr.Dataset, capacity: float | Sequence[float] | None = None) -> xr.DataArray:
    """Where each schedule can run and fits, with a ``memory_capacity`` dimension.

    Args:
      dataset: a results dataset (``valid``, ``done``, ``peak_memory_bytes``; ``fits`` if swept).
      capacity: bytes per worker (one number or a list); None: the store's ``fits``.

    Returns:
      Boolean array over the dimensions of ``peak_memory_bytes`` plus ``memory_capacity``.

    Raises:
      AnalysisError: no capacity given and none in the store, or a capacity that is not > 0.
    """
    usable = dataset["valid"].astype(bool) & dataset["done"].astype(bool)
    if capacity is None:
        if "fits" not in dataset:
            raise AnalysisError("capacity: the store has no memory_capacity axis (fits); give capacities in bytes")
        return (dataset["fits"].astype(bool) & usable).transpose(*dataset["fits"].dims)
    caps = np.atleast_1d(np.asarray(capacity, dtype=float))
    if caps.ndim != 1 or caps.size == 0 or not np.all(np.isfinite(caps) & (caps > 0)):
        raise AnalysisError(f"capacity: must be bytes > 0 (a number or a list), got {capacity!r}")
    caps_da = xr.DataArray(caps, dims=(CAPACITY,), coords={CAPACITY: caps})
    peak = dataset["peak_memory_bytes"]
    return (peak <= caps_da) & usable


def fastest_that_fits(
    dataset: xr.Dataset,
    capacity: float | Sequence[float] | None = None,
    over: Sequence[str] | None = None,
) -> xr.Dataset:
    """Per point and capacity: the fastest option that fits, its step time and what memory costs.

    Args:
      dataset: a results dataset.
      capacity: bytes per worker (see :func:`fits_mask`); None: the store's ``fits``.
      over: the dimensions an option spans; default ``schedule`` and, where present, ``recompute``.

    Returns:
      Dataset over every other dimension of ``t_sim`` plus ``memory_capacity``, with ``choice``
      (int index into the ``option`` coordinate, -1 where nothing fits), ``choice_label``,
      ``t_fit`` (s), ``t_free`` (s, no cap), ``memory_cost`` (1), ``runner_up`` (the second
      fastest option that fits, -1: none), ``t_runner_up`` (s), ``margin`` (``t_runner_up /
      t_fit - 1``), ``n_fit`` (options that fit),
      ``fit_changes_winner`` (the choice is not the uncapped winner) and ``rank_fit`` (with the
      ``option`` dimension).
    """
    over = _option_dims(dataset, over)
    fit = fits_mask(dataset, capacity)
    usable = dataset["valid"].astype(bool) & dataset["done"].astype(bool)
    t = dataset["t_sim"].where(usable)
    t_fit_all = t.where(fit)  # NaN where not valid or not fitting; gains the capacity dimension
    rest = [d for d in t_fit_all.dims if d not in over]
    stacked = t_fit_all.transpose(*over, *rest).stack(option=over).transpose("option", *rest)
    free = t.transpose(*over, *[d for d in t.dims if d not in over]).stack(option=over).transpose("option", ...)
    values = np.asarray(stacked.values, dtype=float)
    free_values = np.asarray(free.values, dtype=float)
    ranks = rank_lower_better(values, axis=0)
    choice = _first_best(ranks)
    second, t_second = _runner_up(values, choice)
    # The uncapped arrays lack the capacity dimension: broadcast them to the capped layout.
    free_dims = free.dims[1:]
    free_coords = {d: free[d] for d in free_dims}
    free_choice = xr.DataArray(_first_best(rank_lower_better(free_values, axis=0)), dims=free_dims, coords=free_coords)
    t_free = xr.DataArray(_nanmin(free_values), dims=free_dims, coords=free_coords)
    labels = np.array([" · ".join(str(v) for v in (key if isinstance(key, tuple) else (key,))) for key in stacked["option"].values], dtype=object)
    return _fit_dataset(values, ranks, choice, second, t_second, t_free, free_choice, labels, rest, {d: stacked[d] for d in rest})


def _option_dims(dataset: xr.Dataset, over: Sequence[str] | None) -> tuple[str, ...]:
    """The dimensions an option spans (default ``schedule`` and, where present, ``recompute``),
    each checked to be one of ``t_sim``'s."""
    over = tuple(over) if over is not None else tuple(d for d in ("schedule", "recompute") if d in dataset["t_sim"].dims)
    for dim in over:
        if dim not in dataset["t_sim"].dims:
            raise AnalysisError(f"over: {dim!r} is not a dimension of t_sim ({', '.join(dataset['t_sim'].dims)})")
    return over


def _first_best(ranks: np.ndarray) -> np.ndarray:
    """Per point, the first option of rank 1 (store order), -1 where none has a rank."""
    return np.where(np.any(ranks == 1, axis=0), np.argmax(ranks == 1, axis=0), -1)


def _nanmin(values: np.ndarray) -> np.ndarray:
    """The smallest value over the options, NaN where none is a number (nothing fits)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: nothing fits
        return np.nanmin(values, axis=0)


def _runner_up(values: np.ndarray, choice: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fastest fitting option after ``choice`` (ties with it included) and its step time;
    -1 and NaN where there is none."""
    second_values = values.copy()
    np.put_along_axis(second_values, np.maximum(choice, 0)[None], np.nan, axis=0)
    t_second = _nanmin(second_values)
    second = np.where(np.isfinite(t_second), np.argmin(np.where(np.isnan(second_values), np.inf, second_values), axis=0), -1)
    return second, t_second


def _fit_dataset(values: np.ndarray, ranks: np.ndarray, choice: np.ndarray, second: np.ndarray, t_second: np.ndarray,
                 t_free: xr.DataArray, free_choice: xr.DataArray, labels: np.ndarray, rest: list, coords: dict) -> xr.Dataset:
    """:func:`fastest_that_fits`'s dataset from its arrays over the options and ``rest`` (the
    uncapped ``t_free`` and ``free_choice`` broadcast to the capped layout)."""
    choice_da = xr.DataArray(choice, dims=rest, coords=coords)
    t_fit_da = xr.DataArray(_nanmin(values), dims=rest, coords=coords)
    t_free_b = t_free.broadcast_like(t_fit_da).transpose(*rest)
    free_choice_b = free_choice.broadcast_like(choice_da).transpose(*rest)
    label_da = xr.DataArray(np.where(choice >= 0, labels[np.maximum(choice, 0)], ""), dims=rest, coords=coords)
    second_da = xr.DataArray(second, dims=rest, coords=coords)
    t_second_da = xr.DataArray(t_second, dims=rest, coords=coords)
    out = xr.Dataset(
        {
            "choice": choice_da.assign_attrs(long_name="fastest option that fits (index into option_label; -1: none fits)"),
            "choice_label": label_da.assign_attrs(long_name="fastest option that fits"),
            "t_fit": t_fit_da.assign_attrs(units="s", long_name="step time of the fastest option that fits"),
            "t_free": t_free_b.assign_attrs(units="s", long_name="step time of the fastest valid option, no cap"),
            "memory_cost": (t_fit_da / t_free_b - 1).assign_attrs(units="1", long_name="t_fit / t_free - 1"),
            "runner_up": second_da.assign_attrs(long_name="second fastest option that fits (index into option_label; -1: none)"),
            "t_runner_up": t_second_da.assign_attrs(units="s", long_name="step time of the runner-up"),
            "margin": (t_second_da / t_fit_da - 1).assign_attrs(units="1", long_name="t_runner_up / t_fit - 1"),
            "n_fit": xr.DataArray(np.sum(np.isfinite(values), axis=0), dims=rest, coords=coords).assign_attrs(
                long_name="options that fit"
            ),
            "fit_changes_winner": ((choice_da >= 0) & (choice_da != free_choice_b)).assign_attrs(
                long_name="the cap changes the fastest option"
            ),
            "rank_fit": xr.DataArray(ranks, dims=("option_index", *rest), coords=coords).assign_attrs(
                long_name="rank by t_sim among the options that fit (1 = best)"
            ),
        }
    )
    return out.assign_coords(option_label=("option_index", labels))


def fit_summary(result: xr.Dataset, by: Sequence[str] = ("p", CAPACITY)) -> list[dict]:
    """Per group: each option's share of the points where it is the fastest that fits.

    Args:
      result: :func:`fastest_that_fits`'s dataset.
      by: dimensions that form the groups.

    Returns:
      One dict per group: the group's coordinates, ``shares`` (label -> share of the group's
      points, including ``"none fits"``), ``median_memory_cost`` over the points where something fits.
    """
    rows = []
    labels = [str(v) for v in result["option_label"].values]
    groups = [{}]
    for dim in by:
        groups = [{**g, dim: v} for g in groups for v in result[dim].values]
    for group in groups:
        part = result.sel(group) if group else result
        choice = np.asarray(part["choice"].values).ravel()
        shares = {labels[k]: float(np.mean(choice == k)) for k in np.unique(choice) if k >= 0}
        if np.any(choice < 0):
            shares["none fits"] = float(np.mean(choice < 0))
        cost = np.asarray(part["memory_cost"].values).ravel()
        cost = cost[np.isfinite(cost)]
        rows.append({**{d: g.item() if hasattr(g, "item") else g for d, g in group.items()}, "shares": shares,
                     "median_memory_cost": float(np.median(cost)) if cost.size else float("nan")})
    return rows


def plot_fits_map(result: xr.Dataset, path, select: dict | None = None, title: str | None = None):
    """The fastest option that fits as a map: rows ``p``, columns capacity, ``m`` × bandwidth.

    Hatched cells: the cap changed the fastest option (``fit_changes_winner``); white: nothing
    fits. Any other dimension (latency, comm, compute, ...) is taken at ``select`` (label
    values), else at its middle value.

    Args:
      result: :func:`fastest_that_fits`'s dataset.
      path: the PNG file to write.
      select: values of the other dimensions, e.g. ``{"latency": 5e-7}``.
      title: the figure's title.

    Returns:
      The path written.
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    from ppsweep.viz.plots import _edges, _figure, _save, _schedule_color, category_panel

    select = dict(select or {})
    keep = ("p", CAPACITY, "m", "bandwidth")
    for dim in result["choice"].dims:
        if dim not in keep and dim not in select:
            select[dim] = result[dim].values[len(result[dim]) // 2]
    part = result.sel(select).sortby("bandwidth")
    choice = part["choice"].transpose(*keep).values
    changed = part["fit_changes_winner"].transpose(*keep).values
    labels = [str(v) for v in result["option_label"].values]
    present = sorted(int(c) for c in np.unique(choice) if c >= 0)
    index = {c: k for k, c in enumerate(present)}
    P, C = part.sizes["p"], part.sizes[CAPACITY]
    m_values = part["m"].values
    bw_edges, bw_log = _edges(part["bandwidth"].values)
    m_edges = np.arange(len(m_values) + 1) - 0.5
    fig = _figure(2.9 * C + 0.6, 1.9 * P + 1.3)
    axes = fig.subplots(P, C, squeeze=False, sharex=True, sharey=True)
    cmap = ListedColormap([_schedule_color(c) for c in present] or ["white"])
    for i in range(P):
        for j in range(C):
            ax = axes[i, j]
            category_panel(ax, bw_edges, m_edges, choice[i, j], index, cmap, changed[i, j].astype(bool))
            if bw_log:
                ax.set_xscale("log")
            ax.set_yticks(np.arange(len(m_values)), [str(int(v)) for v in m_values])
            ax.set_title(f"p={int(part['p'].values[i])}, cap {part[CAPACITY].values[j] / 1e9:.0f} GB", fontsize=9)
            if i == P - 1:
                ax.set_xlabel("bandwidth (B/s)")
            if j == 0:
                ax.set_ylabel("m")
    handles = [Patch(facecolor=_schedule_color(c), label=labels[c]) for c in present]
    handles.append(Patch(facecolor="white", edgecolor="black", label="nothing fits"))
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="cap changes the winner"))
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8,
               title="fastest that fits", title_fontsize=8)
    where = ", ".join(f"{d}={v:.3g}" if isinstance(v, (float, np.floating)) else f"{d}={v}" for d, v in select.items())
    fig.suptitle((title or "Fastest schedule that fits") + (f" ({where})" if where else ""), fontsize=10)
    return _save(fig, path)


def fits_report(dataset: xr.Dataset) -> tuple[list[str], xr.Dataset | None]:
    """The ``analyze`` command's section for a store with a capacity axis (``fits``).

    Args:
      dataset: the results dataset.

    Returns:
      The report lines and :func:`fastest_that_fits`'s dataset; ``([], None)`` without ``fits``.
    """
    if "fits" not in dataset:
        return [], None
    result = fastest_that_fits(dataset)
    lines = ["Fastest option that fits (share of points per p and capacity; memory cost: median t_fit/t_free - 1):"]
    for row in fit_summary(result):
        shares = ", ".join(f"{k} {v:.0%}" for k, v in sorted(row["shares"].items(), key=lambda kv: -kv[1]))
        lines.append(f"  p={row['p']}, {row[CAPACITY] / 1e9:.0f} GB: {shares}; memory cost {row['median_memory_cost']:+.1%}")
    return lines, result


def recompute_cost(dataset: xr.Dataset, baseline: str = "none") -> xr.DataArray:
    """What recomputation costs in step time: ``t_sim / t_sim(recompute=baseline) - 1``.

    Args:
      dataset: a results dataset with a ``recompute`` dimension.
      baseline: the mode compared against.

    Returns:
      The relative step-time increase over every dimension of ``t_sim`` (NaN where invalid).

    Raises:
      AnalysisError: no ``recompute`` dimension, or ``baseline`` is not one of its values.
    """
    if "recompute" not in dataset["t_sim"].dims:
        raise AnalysisError("recompute: the store has no recompute dimension")
    modes = [str(v) for v in dataset["recompute"].values]
    if baseline not in modes:
        raise AnalysisError(f"baseline: must be one of {', '.join(modes)}, got {baseline!r}")
    usable = dataset["valid"].astype(bool) & dataset["done"].astype(bool)
    t = dataset["t_sim"].where(usable)
    return (t / t.sel(recompute=baseline) - 1).assign_attrs(units="1", long_name=f"step time / step time with recompute={baseline} - 1")
