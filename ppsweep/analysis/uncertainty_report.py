"""The uncertainty part of ``python -m ppsweep.analyze``: P(win), robustness and regret, as text and figures.

On a store with a ``sample`` dimension (a sweep with noise) the rest of the report reads the
noise-free step time (:func:`nominal_view`), and this section adds, over the samples:

- per schedule: its mean P(win) over the grid, the share of the points it wins without noise
  where it wins fewer than 90 % of the samples ("fragile"), its tail (``t_p95 / t_mean − 1``,
  ``t_p99 / t_mean − 1``) and its mean slowdown against the noise-free run;
- how often the noise-free winner stays the most likely winner;
- the regret of choosing by ``formula``, ``table`` and the noise-free ``sim``.

On a store without samples it gives the noise-free regret of choosing by ``formula`` and
``table`` (a headline like "choosing by the bubble ratio costs X % on this grid").
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from ppsweep.analysis.load import schedules
from ppsweep.analysis.uncertainty import (
    has_samples,
    masked,
    regret,
    regret_summary,
    robustness,
    win_probability,
)
from ppsweep.sweep.ranking import rank_lower_better


def nominal_view(dataset: xr.Dataset) -> xr.Dataset:
    """The store as a noise-free one, for the rest of the report: ``t_sim`` is ``t_sim_nominal``,
    every other per-sample variable its mean over the samples (the store itself where it has no
    samples)."""
    if not has_samples(dataset):
        return dataset
    per_sample = [name for name in dataset.data_vars if "sample" in dataset[name].dims and name != "t_sim"]
    means = {name: dataset[name].mean("sample", keep_attrs=True) for name in per_sample}
    out = dataset.drop_vars(per_sample + ["t_sim", "t_sim_nominal"]).drop_dims("sample", errors="ignore")
    return out.assign(t_sim=dataset["t_sim_nominal"], **means)


def _pct(x: float) -> str:
    return "n/a" if not np.isfinite(x) else f"{100 * x:.1f} %"


def _criterion_text(criterion: str) -> str:
    return {"formula": "closed-form bubble", "table": "table bubble", "sim": "noise-free simulation"}[criterion]


def regret_lines(result: xr.Dataset, samples: int) -> list[str]:
    """Text of :func:`ppsweep.analysis.uncertainty.regret_summary`."""
    over = f"mean over samples ({samples}), then over" if samples > 1 else "over"
    lines = [f"Regret of choosing by a criterion: t_sim(chosen) / t_sim(best) - 1, {over} the grid's points"]
    for criterion, s in regret_summary(result).items():
        p95 = f", per-point p95 over samples {_pct(s['p95'])}" if samples > 1 else ""
        lines.append(
            f"  by {_criterion_text(criterion):22s} mean {_pct(s['mean'])}{p95}, worst point {_pct(s['max'])}, "
            f"points losing > 0.1 %: {_pct(s['share_positive'])} of {s['points']}"
        )
    return lines


def uncertainty_section(dataset: xr.Dataset) -> list[str]:
    """The report's uncertainty lines (module docstring)."""
    if not has_samples(dataset):
        return regret_lines(regret(dataset), 1)
    names = schedules(dataset)
    samples = dataset.sizes["sample"]
    noise = dataset.attrs.get("noise", "")
    lines = [f"Uncertainty: {samples} samples per point" + (f" ({noise})" if noise else "")]
    p_win = win_probability(dataset)
    rb = robustness(dataset)
    lines.append(f"  {'schedule':10s} {'mean P(win)':>11s} {'fragile':>8s} {'p95/mean-1':>10s} {'p99/mean-1':>10s} {'mean/noise-free-1':>17s}")
    for k, name in enumerate(names):
        r = rb.isel(schedule=k)
        lines.append(
            f"  {name:10s} {float(r['p_win_mean']):11.3f} {_pct(float(r['flip_share'])):>8s} "
            f"{_pct(float(r['tail95'])):>10s} {_pct(float(r['tail99'])):>10s} {_pct(float(r['slowdown'])):>17s}"
        )
    lines.append("  (fragile: share of its noise-free wins where it wins < 90 % of samples)")
    nominal = masked(dataset, "t_sim_nominal").compute()  # a dask-backed store (python -m ppsweep.analyze): in memory, as p_win
    nominal_win = xr.apply_ufunc(
        lambda a: np.moveaxis(rank_lower_better(np.moveaxis(a, -1, 0)) == 1, 0, -1),
        nominal, input_core_dims=[["schedule"]], output_core_dims=[["schedule"]],
    ).transpose(*p_win.dims)
    values = np.asarray(p_win.values, float)
    ok = ~np.all(np.isnan(values), axis=0)
    likely = np.argmax(np.where(np.isnan(values), -1, values), axis=0)
    kept = np.take_along_axis(np.asarray(nominal_win.values), likely[None], axis=0)[0]
    top = np.nanmax(np.where(np.isnan(values), -1, values), axis=0)
    lines.append(
        f"  the noise-free winner is the most likely winner at {_pct(float(np.mean(kept[ok])))} of the points; "
        f"the most likely winner wins >= 90 % of samples at {_pct(float(np.mean(top[ok] >= 0.9)))}"
    )
    return lines + [""] + regret_lines(regret(dataset), samples)


def write_uncertainty_figures(dataset: xr.Dataset, out_dir: str | os.PathLike) -> list[Path]:
    """P(win) map (stores with samples) and regret maps (:mod:`ppsweep.analysis.uncertainty_plots`)."""
    from ppsweep.analysis.uncertainty_plots import write_uncertainty_figures as write

    p_win = win_probability(dataset) if has_samples(dataset) else None
    return write(dataset, p_win, regret(dataset), out_dir)
