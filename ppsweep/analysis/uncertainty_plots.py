"""Figures of a store with noise (README, "Uncertainty"): P(win) map and regret map (PNG, Agg).

- ``p_win_map.png`` — over bandwidth × latency, one panel per ``(p, m)``: the colour of the
  schedule most likely to win, faded towards white as its P(win) falls (solid: it wins every
  sample); hatched where that schedule is not the noise-free winner.
- ``regret_map_<criterion>.png`` — the mean regret over samples (percent) of choosing by
  ``formula``, ``table`` or the noise-free ``sim``, same panels.

Other grid axes (``comm``, ``compute``) are shown at their first value.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch

from ppsweep.analysis.load import schedules
from ppsweep.analysis.uncertainty import masked
from ppsweep.viz.plots import _edges, _figure, _save, _schedule_color
from ppsweep.sweep.ranking import rank_lower_better

_PANEL_DIMS = ("p", "m", "bandwidth", "latency")


def _first_of_extra(array: xr.DataArray) -> xr.DataArray:
    extra = {d: 0 for d in array.dims if d not in _PANEL_DIMS + ("schedule",)}
    return array.isel(extra)


def _panels(dataset: xr.Dataset):
    P, M = dataset.sizes["p"], dataset.sizes["m"]
    fig = _figure(2.8 * M + 1.0, 2.3 * P + 1.3)
    axes = fig.subplots(P, M, squeeze=False, sharex=True, sharey=True)
    bw_edges, bw_log = _edges(dataset["bandwidth"].values)
    lat_edges, lat_log = _edges(dataset["latency"].values)
    for (i, j), ax in np.ndenumerate(axes):
        ax.set(xscale="log" if bw_log else "linear", yscale="log" if lat_log else "linear")
        ax.set_title(f"p={int(dataset['p'].values[i])}, m={int(dataset['m'].values[j])}", fontsize=9)
    fig.supxlabel("bandwidth (B/s)", fontsize=9)
    fig.supylabel("latency (s)", fontsize=9)
    return fig, axes, bw_edges, lat_edges


def plot_win_probability_map(dataset: xr.Dataset, p_win: xr.DataArray, out_dir: str | os.PathLike) -> Path:
    """The P(win) map (module docstring).

    Args:
      dataset: the store (sorted by bandwidth and latency; coordinates, ``valid``, ``done`` and
        ``t_sim_nominal`` where present are read).
      p_win: :func:`ppsweep.analysis.uncertainty.win_probability` of it.
      out_dir: directory of the PNG.

    Returns:
      The file written.
    """
    names = schedules(dataset)
    pw = _first_of_extra(p_win).transpose("schedule", *_PANEL_DIMS)
    values = np.asarray(pw.values, float)
    top = np.nanmax(np.where(np.isnan(values), -1, values), axis=0)  # (P, M, bw, lat)
    best = np.argmax(np.where(np.isnan(values), -1, values), axis=0)
    nominal_winner = None
    if "t_sim_nominal" in dataset:
        nominal = _first_of_extra(masked(dataset, "t_sim_nominal")).transpose("schedule", *_PANEL_DIMS)
        nominal_winner = rank_lower_better(np.asarray(nominal.values, float), axis=0) == 1
    fig, axes, bw_edges, lat_edges = _panels(dataset)
    for i in range(values.shape[1]):
        for j in range(values.shape[2]):
            rgb = np.ones(best.shape[2:] + (4,))
            for k in range(len(names)):
                here = (best[i, j] == k) & (top[i, j] >= 0)
                rgb[here, :3] = 1 - top[i, j][here, None] * (1 - np.array(to_rgb(_schedule_color(k))))
            axes[i, j].pcolormesh(bw_edges, lat_edges, np.transpose(rgb, (1, 0, 2)), shading="flat")
            if nominal_winner is not None:
                differs = (top[i, j] >= 0) & ~np.take_along_axis(nominal_winner[:, i, j], best[i, j][None], axis=0)[0]
                if differs.any():
                    axes[i, j].pcolor(
                        bw_edges, lat_edges, np.ma.masked_where(~differs, differs.astype(float)).T,
                        cmap=_clear(), hatch="//", edgecolors="black", linewidth=0,
                    )
    appearing = appearing_winners(best, top)
    handles = [Patch(facecolor=_schedule_color(k), label=names[k]) for k in appearing]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="most likely winner ≠ noise-free winner"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="most likely winner", title_fontsize=8)
    _fading_scale(fig, axes)
    fig.suptitle(f"P(win) under noise ({dataset.sizes.get('sample', 1)} samples)", fontsize=10)
    return _save(fig, Path(out_dir) / "p_win_map.png")


def appearing_winners(best: np.ndarray, top: np.ndarray) -> list[int]:
    """Indices of the schedules that are the most likely winner at some valid point (the legend lists these)."""
    return sorted({int(k) for k in np.unique(best[top >= 0])})


def _fading_scale(fig, axes) -> None:
    """The scale of the fading: a winner's colour at P(win) = 1 (solid) down to 0 (white), shown in grey."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import LinearSegmentedColormap, Normalize

    fade = LinearSegmentedColormap.from_list("fade", ["white", "#404040"])
    fig.colorbar(ScalarMappable(Normalize(0, 1), fade), ax=axes, shrink=0.6, pad=0.02,
                 label="P(win) of the most likely winner (its colour fades to white as it falls)")


def _clear():
    from matplotlib.colors import ListedColormap

    return ListedColormap([(0, 0, 0, 0)])


def plot_regret_map(dataset: xr.Dataset, result: xr.Dataset, criterion: str, out_dir: str | os.PathLike) -> Path:
    """The regret map of one criterion (module docstring).

    Args:
      dataset: the store (coordinates are read).
      result: :func:`ppsweep.analysis.uncertainty.regret` of it.
      criterion: ``formula``, ``table`` or ``sim``.
      out_dir: directory of the PNG.

    Returns:
      The file written.
    """
    values = 100 * np.asarray(_first_of_extra(result[f"regret_{criterion}_mean"]).transpose(*_PANEL_DIMS).values, float)
    vmax = max(float(np.nanmax(values)) if np.isfinite(values).any() else 0.0, 0.1)
    fig, axes, bw_edges, lat_edges = _panels(dataset)
    mesh = None
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            mesh = axes[i, j].pcolormesh(bw_edges, lat_edges, np.ma.masked_invalid(values[i, j]).T, cmap="magma_r", vmin=0, vmax=vmax, shading="flat")
    fig.colorbar(mesh, ax=axes, label="mean regret (%)", shrink=0.8)
    samples = dataset.sizes.get("sample", 1)
    fig.suptitle(f"Regret of choosing by {criterion}: t_sim(chosen)/t_sim(best) − 1, mean over {samples} sample(s)", fontsize=10)
    return _save(fig, Path(out_dir) / f"regret_map_{criterion}.png")


def write_uncertainty_figures(dataset: xr.Dataset, p_win: xr.DataArray | None, result: xr.Dataset, out_dir: str | os.PathLike) -> list[Path]:
    """The P(win) map (where ``p_win`` is given) and one regret map per criterion in ``result``."""
    dataset = dataset.sortby(["bandwidth", "latency"])
    result = result.sortby(["bandwidth", "latency"])
    paths = []
    if p_win is not None:
        paths.append(plot_win_probability_map(dataset, p_win.sortby(["bandwidth", "latency"]), out_dir))
    for name in result.data_vars:
        if name.startswith("regret_") and name.endswith("_mean"):
            paths.append(plot_regret_map(dataset, result, name[len("regret_") : -len("_mean")], out_dir))
    return paths
