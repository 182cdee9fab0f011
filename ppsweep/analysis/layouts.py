"""The fastest layout that fits: per GPU count and cluster, which (layout, schedule, m, recompute).

A layout sweep (docs/contract.md §3b; ``python -m ppsweep +sweep=layout``) stores ``t_sim`` over
``schedule × p × m × [gpus] × [tp] × [dp] × [cp] × [recompute] × [system] × … × bandwidth ×
latency`` and ``fits`` per ``memory_capacity``. An **option** here is everything a team chooses:
the schedule, ``p``, ``m`` (microbatches per replica), ``tp``, ``dp`` (where it is a dimension;
with ``gpus`` it follows), ``cp`` and the recomputation; :func:`ppsweep.analysis.fits.fastest_that_fits`
picks the fastest option that fits at every other point (GPU count, system, network, capacity)
and its runner-up. This module adds what the choice delivers (tokens/s, model FLOP/s per GPU),
the best option with a **different layout** (how much the layout itself matters), and the text
report of ``python -m ppsweep.analyze``.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
import yaml

from ppsweep.analysis.fits import CAPACITY, fastest_that_fits
from ppsweep.analysis.load import AnalysisError

#: Dimensions an option spans, where present.
OPTION_DIMS = ("schedule", "p", "m", "tp", "dp", "cp", "recompute")
#: Those that make the layout (with ``gpus``, ``dp`` follows from them).
LAYOUT_KEY = ("p", "tp", "dp", "cp")


def is_layout_store(dataset: xr.Dataset) -> bool:
    """Whether ``dataset`` is a layout sweep's store."""
    return "layout_invalid" in dataset


def option_dims(dataset: xr.Dataset) -> tuple[str, ...]:
    """The dimensions of ``t_sim`` an option spans."""
    return tuple(d for d in OPTION_DIMS if d in dataset["t_sim"].dims)


def fastest_layouts(dataset: xr.Dataset, capacity=None) -> xr.Dataset:
    """Per point (GPU count, system, network, capacity): the fastest option that fits and what it delivers.

    Args:
      dataset: a layout sweep's store (``fits``, or give ``capacity``).
      capacity: bytes per GPU (see :func:`ppsweep.analysis.fits.fits_mask`); None: the store's.

    Returns:
      :func:`fastest_that_fits`'s dataset plus ``tokens_per_s`` and ``model_flops_per_gpu`` of
      the choice, ``other_layout`` (the fastest option that fits with another layout, -1: none),
      ``t_other_layout`` and ``layout_margin`` (``t_other_layout / t_fit - 1``).
    """
    if not is_layout_store(dataset):
        raise AnalysisError("store: not a layout sweep (no layout_invalid; run python -m ppsweep +sweep=layout)")
    over = option_dims(dataset)
    result = fastest_that_fits(dataset, capacity, over=over)
    rest = result["choice"].dims
    choice = result["choice"].values
    out = {}
    coords = result["choice"].coords
    for name in ("tokens_per_s", "model_flops_per_gpu"):
        stacked = _stacked(dataset[name], over, rest, coords)
        taken = np.take_along_axis(stacked, np.maximum(choice, 0)[None], axis=0)[0]
        out[name] = xr.DataArray(np.where(choice >= 0, taken, np.nan), dims=rest, coords=result["choice"].coords)
    # The best option with another layout: mask the choice's layout, take the fastest that fits.
    t = _stacked(dataset["t_sim"].where(dataset["valid"].astype(bool) & dataset["done"].astype(bool)), over, rest, coords)
    fit = _stacked(_fits(dataset, capacity), over, rest, coords).astype(bool)
    t = np.where(fit, t, np.nan)
    keys = _layout_keys(dataset, over)
    chosen_key = keys[np.maximum(choice, 0)]
    same = keys[(slice(None),) + (None,) * choice.ndim] == chosen_key[None]
    other = np.where(same, np.nan, t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        t_other = np.where(choice >= 0, np.nanmin(other, axis=0), np.nan)
    other_index = np.where(np.isfinite(t_other), np.argmin(np.where(np.isnan(other), np.inf, other), axis=0), -1)
    return result.assign(
        tokens_per_s=out["tokens_per_s"].assign_attrs(units="tokens/s", long_name="tokens/s of the fastest option that fits"),
        model_flops_per_gpu=out["model_flops_per_gpu"].assign_attrs(units="FLOP/s", long_name="model FLOP/s per GPU of the choice"),
        other_layout=xr.DataArray(other_index, dims=rest, coords=coords).assign_attrs(
            long_name="fastest option that fits with another layout (index into option_label; -1: none)"),
        t_other_layout=xr.DataArray(t_other, dims=rest, coords=coords).assign_attrs(units="s"),
        layout_margin=(xr.DataArray(t_other, dims=rest, coords=coords) / result["t_fit"] - 1).assign_attrs(
            units="1", long_name="t_other_layout / t_fit - 1"),
    )


def _fits(dataset: xr.Dataset, capacity) -> xr.DataArray:
    from ppsweep.analysis.fits import fits_mask

    return fits_mask(dataset, capacity)


def _stacked(array: xr.DataArray, over: tuple[str, ...], rest: tuple[str, ...], coords=None) -> np.ndarray:
    """``array`` as ``(option, *rest)`` values, options in :func:`fastest_that_fits`'s order.

    A dimension of ``rest`` that ``array`` lacks (``fits`` has no network axes) is broadcast from ``coords``.
    """
    for d in over + rest:
        if d not in array.dims:
            array = array.expand_dims({d: coords[d].values})
    values = array.transpose(*over, *rest).values
    return np.asarray(values, dtype=float).reshape((-1,) + values.shape[len(over):])


def _layout_keys(dataset: xr.Dataset, over: tuple[str, ...]) -> np.ndarray:
    """One integer per option naming its layout (equal exactly where ``p``, ``tp``, ``dp``, ``cp`` are)."""
    grids = np.meshgrid(*[np.arange(dataset.sizes[d]) for d in over], indexing="ij")
    key = np.zeros(grids[0].shape, dtype=np.int64) if grids else np.zeros(1, dtype=np.int64)
    for d, g in zip(over, grids):
        if d in LAYOUT_KEY:
            key = key * (dataset.sizes[d] + 1) + g
    return key.reshape(-1)


def option_text(dataset: xr.Dataset, result: xr.Dataset, index: int, where: dict) -> str:
    """``zbv · tp8·p8·dp4·cp1 · m=64 · selective`` for option ``index`` at ``where`` (its GPU count)."""
    over = option_dims(dataset)
    values = dict(zip(over, np.unravel_index(index, [dataset.sizes[d] for d in over])))
    get = {d: dataset[d].values[i] for d, i in values.items()}
    tp, cp, p = int(get.get("tp", 1)), int(get.get("cp", 1)), int(get["p"])
    if "dp" in get:
        dp = int(get["dp"])
    elif "gpus" in where:
        dp = int(where["gpus"]) // (tp * p * cp)
    else:
        dp = 1
    parts = [str(get["schedule"]), f"tp{tp}·p{p}·dp{dp}·cp{cp}", f"m={int(get['m'])}"]
    if "recompute" in get:
        parts.append(str(get["recompute"]))
    return " · ".join(parts)


def _system_networks(dataset: xr.Dataset) -> dict[str, tuple[float, float]]:
    """Each system's own inter-node bandwidth and latency, from the store's config."""
    try:
        config = yaml.safe_load(dataset.attrs.get("config", "")) or {}
    except yaml.YAMLError:
        config = {}
    if not isinstance(config, dict):
        config = {}
    systems = config.get("systems") or {}
    if not systems and isinstance(config.get("system"), dict):
        systems = {"": config["system"]}
    return {str(k): (float(v["bandwidth"]), float(v["latency"])) for k, v in systems.items()}


def layout_report(dataset: xr.Dataset, capacity=None) -> tuple[list[str], xr.Dataset]:
    """The ``analyze`` command's section for a layout store.

    Per GPU count, system and capacity, at the system's own inter-node bandwidth and latency (the
    nearest values of the axes): the fastest option that fits, its step time, tokens/s and model
    FLOP/s per GPU, the runner-up and its margin, the best other layout and its margin; then the
    choice at every bandwidth of the axis (how the answer moves with the network).
    """
    result = fastest_layouts(dataset, capacity).compute()
    networks = _system_networks(dataset)
    lines = ["Fastest layout that fits (option: schedule · layout · microbatches per replica · recomputation;",
             "  at each system's own inter-node bandwidth; margins: step time of the other / of the choice - 1):"]
    groups = [{}]
    for dim in ("gpus", "system", CAPACITY, "comm"):
        if dim in result["choice"].dims:
            groups = [{**g, dim: v} for g in groups for v in result[dim].values]
    for group in groups:
        part = result.sel(group)
        system = str(group.get("system", ""))
        bandwidth, latency = networks.get(system, (float(np.median(part["bandwidth"])), float(np.median(part["latency"]))))
        at = part.sel(bandwidth=bandwidth, latency=latency, method="nearest")
        head = ", ".join(_show(d, v) for d, v in group.items())
        choice = int(at["choice"])
        if choice < 0:
            lines.append(f"  {head}: nothing fits")
            continue
        bw = float(at["bandwidth"])
        text = (f"  {head} (inter {bw / 1e9:g} GB/s): {option_text(dataset, result, choice, group)}: "
                f"{float(at['t_fit']):.3g} s/step, {float(at['tokens_per_s']):,.0f} tokens/s, "
                f"{float(at['model_flops_per_gpu']) / 1e12:.0f} TFLOP/s per GPU")
        lines.append(text)
        second = int(at["runner_up"])
        if second >= 0:
            lines.append(f"      runner-up {option_text(dataset, result, second, group)} {float(at['margin']):+.1%}")
        other = int(at["other_layout"])
        if other >= 0:
            lines.append(f"      best other layout {option_text(dataset, result, other, group)} {float(at['layout_margin']):+.1%}")
        moves = []
        for b in part["bandwidth"].values:
            here = part.sel(bandwidth=b, latency=latency, method="nearest")
            c = int(here["choice"])
            moves.append(f"{b / 1e9:g} GB/s " + (option_text(dataset, result, c, group) + f" {float(here['t_fit']):.3g} s" if c >= 0 else "nothing fits"))
        lines.append("      with the network: " + "; ".join(moves))
    return lines, result


def _show(dim: str, value) -> str:
    if dim == CAPACITY:
        return f"{float(value) / 1e9:g} GB"
    if dim == "gpus":
        return f"{int(value)} GPUs"
    return f"{value}"
