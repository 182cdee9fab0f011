"""Figures (PNG, matplotlib's Agg canvas, no pyplot state): results stores and schedule Gantt charts.

Store figures (:func:`write_figures`, used by ``python -m ppsweep.analyze``):

- ``winner_map[_<comm>][_<compute>].png`` — the sim winner over bandwidth × latency, one panel
  per ``(p, m)``; hatching marks the points where the sim winner flips against the formula
  (``disagree_formula``, :mod:`ppsweep.analysis.stability`). One file per value of any ``comm``
  / ``compute`` axis.
- ``t_sim_vs_m.png`` — step time against ``m`` per schedule, one row per ``p``, at the lowest,
  middle and highest bandwidth of the grid (middle latency; first ``comm`` / ``compute``).
- ``bubble_by_abstraction.png`` — per schedule against ``m``: closed-form bubble, table bubble,
  and the simulated idle fraction (median over the unit's network points, bar from min to max).
- ``memory.png`` — bottleneck worker's peak memory per schedule (persistent, and persistent plus
  peak activations), log scale, with the caveat that activations are counted without
  recomputation and no memory cap applies unless the system sets one.

Schedule pictures: :func:`plot_table_gantt` (idealized table, unit slots) and
:func:`plot_step_gantt` (a simulated step from :mod:`ppsweep.viz.trace`'s event record: each worker
has a compute lane and a communication lane; idle compute time is hatched).
"""

from __future__ import annotations

import io
import math
import os
import textwrap
import warnings
from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ppsweep.analysis.load import inner_dims, masked, schedules, whole_along
from ppsweep.analysis.ranks import winner_label
from ppsweep.viz.display import SCHEDULE_COLORS, byte_unit, format_coordinate, message_lanes, time_unit
from ppsweep.tables.ops import KIND_LETTER, Kind, op_label

#: Colours of operation kinds and other events in Gantt charts.
KIND_COLOR = {Kind.F: "#4C72B0", Kind.B: "#55A868", Kind.I: "#DD8452", Kind.W: "#C44E52", Kind.FB: "#8172B3"}
MESSAGE_COLOR = "#8C8C8C"
SYNC_COLOR = "#8172B3"
UPDATE_COLOR = "#CCB974"
IDLE_COLOR = "#F2F2F2"
TIE_COLORS = ["#B0C4DE", "#F5DEB3", "#D8BFD8", "#C1E1C1", "#FFDAB9", "#E0E0E0"]


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Render with Agg and write a palette PNG (charts have few colours: files 3-5x smaller)."""
    from PIL import Image  # a dependency of matplotlib

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=256).save(path, format="PNG", optimize=True)
    return path


def _edges(values: np.ndarray) -> tuple[np.ndarray, bool]:
    """Cell edges around grid values, and whether the axis is logarithmic."""
    v = np.asarray(values, dtype=float)
    log = bool(np.all(v > 0))
    x = np.log10(v) if log else v
    if len(x) == 1:
        half = 0.5 if log else (abs(x[0]) / 2 or 0.5)
        edges = np.array([x[0] - half, x[0] + half])
    else:
        mid = (x[1:] + x[:-1]) / 2
        edges = np.concatenate([[x[0] - (mid[0] - x[0])], mid, [x[-1] + (x[-1] - mid[-1])]])
    return (10.0**edges if log else edges), log


def _schedule_color(k: int) -> str:
    return SCHEDULE_COLORS[k % len(SCHEDULE_COLORS)]


#: Markers of the schedules' lines, in store order.
_MARKERS = "osD^vP*Xph"


def _schedule_line(k: int, n: int) -> dict:
    """Line style of schedule ``k`` of ``n``: its colour and marker, and a width that shrinks along the
    store order, so that a line drawn over an equal one (GPipe under 1F1B at high bandwidth) still shows."""
    return {"color": _schedule_color(k), "marker": _MARKERS[k % len(_MARKERS)], "ms": 3.5,
            "lw": 1.0 + 2.2 * (n - 1 - k) / max(n - 1, 1)}


# --------------------------------------------------------------------------------------------
# store figures


def _extra_combinations(dataset: xr.Dataset) -> list[dict[str, int]]:
    extra = [d for d in inner_dims(dataset) if d not in ("bandwidth", "latency")]
    combos: list[dict[str, int]] = [{}]
    for d in extra:
        combos = [{**c, d: k} for c in combos for k in range(dataset.sizes[d])]
    return combos


def _value_text(value) -> str:
    return f"{value:.3g}" if isinstance(value, (float, np.floating)) else str(value)


def _combo_text(dataset: xr.Dataset, combo: dict[str, int], sep: str = " ") -> str:
    return sep.join(f"{d}={format_coordinate(d, dataset[d].values[k])}" for d, k in combo.items())


def category_panel(ax, x_edges: np.ndarray, y_edges: np.ndarray, codes: np.ndarray, index: dict[int, int], cmap, hatch: np.ndarray) -> None:
    """One panel of a category map: cell ``(y, x)`` coloured by ``index[codes[y, x]]``, hatched where ``hatch``.

    Args:
      ax: the axes.
      x_edges, y_edges: cell edges.
      codes: ``(len(y), len(x))`` category codes; codes missing from ``index`` stay blank.
      index: code -> colour index into ``cmap``.
      cmap: a ListedColormap with one colour per index.
      hatch: boolean ``(len(y), len(x))``.
    """
    grid = np.full(codes.shape, np.nan)
    for code, k in index.items():
        grid[codes == code] = k
    ax.pcolormesh(x_edges, y_edges, np.ma.masked_invalid(grid), cmap=cmap, vmin=-0.5, vmax=max(cmap.N, 1) - 0.5, shading="flat")
    if hatch.any():
        ax.pcolor(
            x_edges, y_edges, np.ma.masked_where(~hatch, hatch.astype(float)),
            cmap=ListedColormap([(0, 0, 0, 0)]), hatch="//", edgecolors="black", linewidth=0,
        )


def plot_winner_maps(dataset: xr.Dataset, result: xr.Dataset, out_dir: str | os.PathLike, max_files: int = 12) -> list[Path]:
    """Winner maps over bandwidth × latency, one panel per ``(p, m)``, one file per extra-axis value.

    Args:
      dataset: the results dataset (coordinates only are read).
      result: :func:`ppsweep.analysis.stability`'s dataset.
      out_dir: directory of the PNG files.
      max_files: at most this many files (combinations of ``comm`` / ``compute`` values).
    """
    names = schedules(dataset)
    P, M = dataset.sizes["p"], dataset.sizes["m"]
    result = result.sortby(["bandwidth", "latency"])  # the grid may list them in any order
    bw_edges, bw_log = _edges(result["bandwidth"].values)
    lat_edges, lat_log = _edges(result["latency"].values)
    paths = []
    for combo in _extra_combinations(dataset)[:max_files]:
        winner = result["winner_sim"].isel(combo).transpose("p", "m", "bandwidth", "latency")
        flips = result["disagree_formula"].isel(combo).transpose("p", "m", "bandwidth", "latency")
        codes = np.asarray(winner.values)
        present = [int(c) for c in np.unique(codes) if c >= 0]
        singles = [c for c in present if c & (c - 1) == 0]
        ties = [c for c in present if c & (c - 1) != 0]
        colors, labels = [], []
        for c in singles + ties:
            if c in singles:
                colors.append(_schedule_color(int(math.log2(c))))
            else:
                colors.append(TIE_COLORS[ties.index(c) % len(TIE_COLORS)])
            labels.append(winner_label(c, names, sep=" = ") + (" (tie)" if c in ties else ""))
        index = {c: k for k, c in enumerate(singles + ties)}
        fig = _figure(2.8 * M + 0.8, 2.3 * P + 1.3)
        axes = fig.subplots(P, M, squeeze=False, sharex=True, sharey=True)
        cmap = ListedColormap(colors or ["white"])
        for i in range(P):
            for j in range(M):
                ax = axes[i, j]
                category_panel(ax, bw_edges, lat_edges, codes[i, j].T, index, cmap, np.asarray(flips.values[i, j]).T == 1)
                if bw_log:
                    ax.set_xscale("log")
                if lat_log:
                    ax.set_yscale("log")
                ax.set_title(f"p={int(dataset['p'].values[i])}, m={int(dataset['m'].values[j])}", fontsize=9)
                if i == P - 1:
                    ax.set_xlabel("bandwidth (B/s)")
                if j == 0:
                    ax.set_ylabel("latency (s)")
        handles = [Patch(facecolor=c, edgecolor="none", label=t) for c, t in zip(colors, labels)]
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="flip: sim winner ∉ formula winners"))
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8, title="sim winner", title_fontsize=8)
        extra = _combo_text(dataset, combo)
        fig.suptitle("Fastest schedule (simulated step time)" + (f", {extra}" if extra else ""), fontsize=10)
        suffix = "".join("_" + _value_text(dataset[d].values[k]) for d, k in combo.items())
        paths.append(_save(fig, Path(out_dir) / f"winner_map{suffix}.png"))
    return paths


def _masked_table(dataset: xr.Dataset, name: str) -> np.ndarray:
    """A table-level variable ``(schedule, p, m)``, NaN where invalid or not done (first value of any other dimension, e.g. ``recompute``)."""
    values = np.asarray(dataset[name].isel({d: 0 for d in dataset[name].dims if d not in ("schedule", "p", "m")}).values, dtype=float)
    ok = np.asarray(dataset["valid"].values, dtype=bool) & np.asarray(dataset["done"].values, dtype=bool)[None]
    return np.where(ok, values, np.nan)


def _log_axis_plain(axis) -> None:
    """A log scale labelled with plain numbers (``50``, ``60``, not ``5×10¹``), minor ticks too when the
    axis spans less than about a decade."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
            return f"{x:.4g}"

    axis.axes.set_yscale("log") if axis.axis_name == "y" else axis.axes.set_xscale("log")
    axis.set_major_formatter(Plain(labelOnlyBase=False))
    axis.set_minor_formatter(Plain(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def plot_t_sim_vs_m(dataset: xr.Dataset, out_dir: str | os.PathLike) -> Path:
    """Step time against ``m`` per schedule, rows ``p``, columns lowest / middle / highest bandwidth."""
    names = schedules(dataset)
    by_bw = np.argsort(dataset["bandwidth"].values, kind="stable")
    nb = len(by_bw)
    bw_index = [int(by_bw[k]) for k in sorted({0, nb // 2, nb - 1})]
    lat_index = int(np.argsort(dataset["latency"].values, kind="stable")[dataset.sizes["latency"] // 2])
    select = {d: 0 for d in inner_dims(dataset) if d not in ("bandwidth", "latency")}
    t = dataset["t_sim"].isel(bandwidth=bw_index, latency=lat_index, **select).transpose("schedule", "p", "m", "bandwidth")
    ok = np.asarray(dataset["valid"].values, bool) & np.asarray(dataset["done"].values, bool)[None]
    values = np.where(ok[..., None], np.asarray(t.values, float), np.nan)
    P = dataset.sizes["p"]
    by_m = np.argsort(dataset["m"].values, kind="stable")
    m = dataset["m"].values[by_m]
    values = values[:, :, by_m]
    size, unit = time_unit(values)
    fig = _figure(3.4 * len(bw_index) + 1.6, 2.4 * P + 0.8)
    axes = fig.subplots(P, len(bw_index), squeeze=False, sharex=True)
    for i in range(P):
        for c, b in enumerate(bw_index):
            ax = axes[i, c]
            for k, name in enumerate(names):
                ax.plot(m, values[k, i, :, c] / size, label=name, **_schedule_line(k, len(names)))
            ax.set_xscale("log", base=2)
            _log_axis_plain(ax.yaxis)
            ax.set_title(f"p={int(dataset['p'].values[i])}, {format_coordinate('bandwidth', dataset['bandwidth'].values[b])}", fontsize=9)
            if i == P - 1:
                ax.set_xlabel("microbatches m")
            if c == 0:
                ax.set_ylabel(f"t_sim ({unit})")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], label=n, **_schedule_line(k, len(names))) for k, n in enumerate(names)]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    extra = _combo_text(dataset, select)
    latency = format_coordinate("latency", dataset["latency"].values[lat_index])
    fig.suptitle(f"Step time, latency {latency}" + (f", {extra}" if extra else ""), fontsize=10)
    return _save(fig, Path(out_dir) / "t_sim_vs_m.png")


def plot_bubbles(dataset: xr.Dataset, out_dir: str | os.PathLike) -> Path:
    """Bubble by abstraction against ``m``: formula (dashed), table (dotted), sim idle (solid, min–max band)."""
    names = schedules(dataset)
    S, P = dataset.sizes["schedule"], dataset.sizes["p"]
    formula = _masked_table(dataset, "bubble_formula")
    table = _masked_table(dataset, "bubble_table")
    inner = list(inner_dims(dataset))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN: a schedule invalid in a unit
        quantiles = whole_along(masked(dataset, "idle_sim"), inner).quantile([0.0, 0.5, 1.0], dim=inner, skipna=True)
        idle = np.asarray(quantiles.transpose("quantile", "schedule", "p", "m").values)  # min, median, max over the unit's points
    by_m = np.argsort(dataset["m"].values, kind="stable")
    m = dataset["m"].values[by_m]
    formula, table, idle = formula[..., by_m], table[..., by_m], idle[..., by_m]
    fig = _figure(4.4 * P + 2.2, 6.4)
    axes = fig.subplots(2, P, squeeze=False, sharex=True)
    for i in range(P):
        top, bottom = axes[0, i], axes[1, i]
        for k in range(S):
            line = _schedule_line(k, S)
            top.plot(m, table[k, i], ls="-", **line)
            top.plot(m, formula[k, i], ls="none", marker="x", ms=6, mew=1.2, color=line["color"])
            low, mid, high = idle[:, k, i]
            bottom.fill_between(m, low, high, color=line["color"], alpha=0.15, lw=0)
            bottom.plot(m, mid, ls="-", **line)
        top.set_title(f"p={int(dataset['p'].values[i])}: structure (formula ×, table line)", fontsize=9)
        bottom.set_title(f"p={int(dataset['p'].values[i])}: simulated idle (median, band: min–max over the network grid)", fontsize=9)
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
        bottom.set_xlabel("microbatches m")
        if i == 0:
            top.set_ylabel("bubble ratio")
            bottom.set_ylabel("idle fraction")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], label=n, **_schedule_line(k, S)) for k, n in enumerate(names)]
    handles.append(Line2D([], [], color="black", ls="none", marker="x", label="formula bubble"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    fig.suptitle("Bubble by abstraction", fontsize=10)
    return _save(fig, Path(out_dir) / "bubble_by_abstraction.png")


#: The caveat printed under the memory figure.
MEMORY_CAVEAT = (
    "Activations as the cost model counts them: every stored microbatch-stage, with the model's recomputation (none by default), no offloading; "
    "without system.memory_capacity no point is marked invalid, so schedules that store all m microbatches "
    "(GPipe) can need more than any device has. Log scale."
)


def plot_memory(dataset: xr.Dataset, out_dir: str | os.PathLike) -> Path:
    """Bottleneck worker's peak memory per schedule and ``(p, m)``, on a log scale.

    Each schedule has two bars side by side: persistent memory (parameters, gradients, optimizer
    state; solid) and the peak, persistent plus peak activations (light), so that both stay
    visible when the activations are orders of magnitude larger. Unit by magnitude; the caveat
    :data:`MEMORY_CAVEAT` is printed under the figure.
    """
    names = schedules(dataset)
    S, P, M = dataset.sizes["schedule"], dataset.sizes["p"], dataset.sizes["m"]
    persistent = _masked_table(dataset, "persistent_bytes")
    peak = persistent + _masked_table(dataset, "peak_activation_bytes")
    size, unit = byte_unit(peak)
    persistent, peak = persistent / size, peak / size
    fig = _figure(max(5.0, 0.8 * S * M) + 1.6, 2.6 * P + 1.0)
    axes = fig.subplots(P, 1, squeeze=False)[:, 0]
    group = 0.8 / S  # each schedule's pair of bars
    x = np.arange(M)
    for i in range(P):
        ax = axes[i]
        for k in range(S):
            left = x - 0.4 + group * k
            color = _schedule_color(k)
            ax.bar(left + group * 0.25, persistent[k, i], group * 0.45, color=color)
            ax.bar(left + group * 0.7, peak[k, i], group * 0.45, color=color, alpha=0.4)
        ax.set_xticks(x, [f"m={int(v)}" for v in dataset["m"].values])
        _log_axis_plain(ax.yaxis)
        ax.set_ylabel(unit)
        ax.set_title(f"p={int(dataset['p'].values[i])}", fontsize=9)
    handles = [Patch(facecolor=_schedule_color(k), label=n) for k, n in enumerate(names)]
    handles += [Patch(facecolor="grey", label="persistent"), Patch(facecolor="grey", alpha=0.4, label="peak (persistent + activations)")]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    extra = {d: 0 for d in dataset["persistent_bytes"].dims if d not in ("schedule", "p", "m")}
    fig.suptitle("Peak memory of the bottleneck worker" + (f", {_combo_text(dataset, extra)}" if extra else ""), fontsize=10)
    fig.text(0.01, 0.005, textwrap.fill(MEMORY_CAVEAT, 150), fontsize=7, va="bottom", ha="left", color="#444444")
    fig.get_layout_engine().set(rect=(0, 0.06, 1, 0.94))
    return _save(fig, Path(out_dir) / "memory.png")


def write_figures(dataset: xr.Dataset, result: xr.Dataset, out_dir: str | os.PathLike) -> list[Path]:
    """Every store figure (see the module docstring) into ``out_dir``; returns their paths."""
    paths = plot_winner_maps(dataset, result, out_dir)
    paths.append(plot_t_sim_vs_m(dataset, out_dir))
    paths.append(plot_bubbles(dataset, out_dir))
    paths.append(plot_memory(dataset, out_dir))
    return paths


# --------------------------------------------------------------------------------------------
# Gantt charts


def plot_table_gantt(table, path: str | os.PathLike, title: str | None = None) -> Path:
    """Gantt chart of an idealized table: one row per worker, one cell per slot, idle cells hatched."""
    placed = table.placed_ops()
    show_stage = table.n_stages * table.n_replicas > table.p  # a worker holds several stages (V, interleaved)
    fig = _figure(min(max(6.0, 0.18 * table.length + 2.0), 24.0), 0.45 * table.p + 1.4)
    ax = fig.add_subplot()
    ax.barh(range(table.p), table.length, left=0, height=0.8, color=IDLE_COLOR, hatch="///", edgecolor="#BBBBBB", linewidth=0)
    for item in placed:
        ax.barh(item.worker, item.slots, left=item.start, height=0.8, color=KIND_COLOR[item.op.kind], edgecolor="white", linewidth=0.5)
        if table.length <= 120:
            ax.text(item.start + item.slots / 2, item.worker, op_label(item.op, show_stage), ha="center", va="center", fontsize=6, color="white")
    ax.set_yticks(range(table.p), [f"w{w}" for w in range(table.p)])
    ax.invert_yaxis()
    ax.set_xlim(0, table.length)
    ax.set_xlabel("slot")
    kinds = sorted({item.op.kind for item in placed})
    handles = [Patch(facecolor=KIND_COLOR[k], label=KIND_LETTER[k]) for k in kinds]
    handles.append(Patch(facecolor=IDLE_COLOR, hatch="///", edgecolor="#BBBBBB", label="idle (bubble)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    ax.set_title(title or f"{table.name} p={table.p} m={table.m}: idealized table, T={table.length}, bubble {table.bubble_ratio():.1%}", fontsize=9)
    return _save(fig, path)


def plot_step_gantt(record, path: str | os.PathLike, title: str | None = None) -> Path:
    """Gantt chart of a simulated step (:class:`ppsweep.engine.reference.StepRecord`).

    Each worker has a compute lane (operations by kind, optimizer updates, idle time hatched)
    and below it a communication lane (its outgoing messages from send to arrival, stacked
    where several are in flight, and its gradient synchronisations). Times in the unit of the
    step's magnitude (:func:`ppsweep.viz.display.time_unit`).
    """
    p = record.p
    size, unit = time_unit(record.t_sim)
    scale = 1.0 / size  # seconds to the unit of the step's magnitude
    t_end = record.t_sim * scale
    lanes = message_lanes(record)
    depth = [1] * p
    for msg, lane in zip(record.messages, lanes):
        depth[msg.src] = max(depth[msg.src], lane + 1)
    fig = _figure(12.0, 0.9 * p + 1.5)
    ax = fig.add_subplot()
    ax.barh([2 * w for w in range(p)], t_end, left=0, height=0.8, color=IDLE_COLOR, hatch="///", edgecolor="#BBBBBB", linewidth=0)
    label_min = t_end / 60
    show_stage = len({(ev.worker, ev.op.stage) for ev in record.ops}) > p  # a worker runs several stages
    for ev in record.ops:
        width = (ev.end - ev.start) * scale
        ax.barh(2 * ev.worker, width, left=ev.start * scale, height=0.8, color=KIND_COLOR[ev.op.kind], edgecolor="white", linewidth=0.3)
        if width >= label_min:
            ax.text((ev.start * scale) + width / 2, 2 * ev.worker, op_label(ev.op, show_stage), ha="center", va="center", fontsize=5.5, color="white")
    for ev in record.updates:
        ax.barh(2 * ev.worker, (ev.end - ev.start) * scale, left=ev.start * scale, height=0.8, color=UPDATE_COLOR)
    for msg, lane in zip(record.messages, lanes):
        h = 0.8 / depth[msg.src]
        y = 2 * msg.src + 1 - 0.4 + h * (lane + 0.5)
        ax.barh(y, (msg.arrive - msg.send) * scale, left=msg.send * scale, height=h * 0.9, color=MESSAGE_COLOR, alpha=0.8, linewidth=0)
    for ev in record.syncs:
        for w in ev.holders:
            ax.barh(2 * w + 1, (ev.end - ev.start) * scale, left=ev.start * scale, height=0.8, color=SYNC_COLOR, alpha=0.8)
    ticks = [y for w in range(p) for y in (2 * w, 2 * w + 1)]
    ax.set_yticks(ticks, [t for w in range(p) for t in (f"w{w} compute", f"w{w} send")], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, t_end)
    ax.set_xlabel(f"time ({unit})")
    kinds = sorted({ev.op.kind for ev in record.ops})
    handles = [Patch(facecolor=KIND_COLOR[k], label=KIND_LETTER[k]) for k in kinds]
    handles.append(Patch(facecolor=IDLE_COLOR, hatch="///", edgecolor="#BBBBBB", label="idle"))
    handles.append(Patch(facecolor=MESSAGE_COLOR, label="message (send → arrive)"))
    if record.syncs:
        handles.append(Patch(facecolor=SYNC_COLOR, label="gradient sync"))
    if record.updates:
        handles.append(Patch(facecolor=UPDATE_COLOR, label="optimizer"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    compute = sum(ev.end - ev.start for ev in record.ops) + sum(ev.end - ev.start for ev in record.updates)
    idle = 1 - compute / (p * record.t_sim) if record.t_sim > 0 else float("nan")
    head = title or f"simulated step ({record.mode})"
    ax.set_title(f"{head}: t_sim {t_end:.4g} {unit}, idle {idle:.1%}", fontsize=9)
    return _save(fig, path)


__all__ = [
    "plot_bubbles",
    "plot_memory",
    "plot_step_gantt",
    "plot_t_sim_vs_m",
    "plot_table_gantt",
    "plot_winner_maps",
    "write_figures",
]
