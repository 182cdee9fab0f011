"""``python -m ppsweep.explore STORE``: an interactive page to look at a results store.

Usage::

    python -m ppsweep.explore results/bandwidth.zarr                  # serve it on http://127.0.0.1:5006/
    python -m ppsweep.explore results/bandwidth.zarr --html page.html # write a self-contained page
    python -m ppsweep.explore results/big.zarr --serve                # a Bokeh server (automatic past MAX_VALUES)

The page (Bokeh, every script inline: it opens without a network) has

- a **selector for every dimension** of the grid (``p``, ``m``, ``bandwidth``, ``latency``, and
  ``comm``, ``compute``, ``sample`` or any other the store has);
- the **winner map**: the fastest schedule (simulated step time) over bandwidth × latency at the
  selected values of the other dimensions; ties have their own colour, the cell of the selected
  bandwidth and latency is outlined; hover shows every schedule's step time and whether the
  bubble formula picks another winner;
- **step time** of every schedule against a swept axis (chosen with "x axis"), the others at
  their selected values;
- **memory** of the bottleneck worker per schedule at the selected ``(p, m)``: persistent, and
  persistent plus peak activations (log scale; activations without recomputation, no cap unless
  the system sets one);
- where the store has a ``sample`` dimension (a noisy sweep), **P(win)**: the share of samples in
  which each schedule is among the fastest, and the **regret** of choosing by the formula or the
  table: the mean over samples of ``t_sim(chosen) / t_sim(fastest) − 1``, where the chosen
  schedule is the first of the formula's (table's) winners in store order.

Values are shown in the unit of their magnitude (:mod:`ppsweep.viz.display`). The page's address may
carry a selection, ``page.html#p=8&m=32&x=latency``, which sets the selectors when it opens.

All of a store's values are embedded in the page; past :data:`MAX_VALUES` values, select a part
with ``--sel DIM=VALUE[,VALUE...]`` (e.g. ``--sel p=8 --sel latency=5e-7``), or leave out ``--html``:
the command then serves the page from a Bokeh server that reads each selection's part of the store
on demand (:mod:`ppsweep.viz.explore_served`; ``--serve`` forces it for any store). Both pages are
:func:`build_page`'s: the same figures and script, drawing from :func:`page_data` of the whole store
or of the selection's part. Bad input prints one line ``error: ...`` and exits with 2.
"""

from __future__ import annotations

import functools
import http.server
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import xarray as xr

from ppsweep.cli.support import UsageError, stopped_by_signals
from ppsweep.viz.display import SCHEDULE_COLORS, format_coordinate

#: At most this many values of ``t_sim`` are embedded in a page.
MAX_VALUES = 4_000_000
#: One colour per schedule (store order), and colours of ties, as in the PNG figures.
TIE_COLORS = ["#B0C4DE", "#F5DEB3", "#D8BFD8", "#C1E1C1", "#FFDAB9", "#E0E0E0"]
#: Dimensions the winner map spans.
MAP_DIMS = ("bandwidth", "latency")

MEMORY_NOTE = (
    "Activations as the cost model counts them: every stored microbatch-stage, no recomputation, no offloading. "
    "Without <code>system.memory_capacity</code> no point is marked invalid, so a schedule that stores all m "
    "microbatches (GPipe) can need more than any device has."
)


def _label(value: Any) -> str:
    """Text of a coordinate value in selectors and the page's address."""
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return str(value)


#: Tick labels of a numeric axis in the unit of each tick's magnitude (the units of :func:`format_coordinate`).
_TICK_JS = r"""
const PREFIXES = {
  bandwidth: ["B/s", [[1, ""], [1e3, "k"], [1e6, "M"], [1e9, "G"], [1e12, "T"], [1e15, "P"]]],
  memory_capacity: ["B", [[1, ""], [1e3, "k"], [1e6, "M"], [1e9, "G"], [1e12, "T"], [1e15, "P"]]],
  compute: ["FLOP/s", [[1, ""], [1e9, "G"], [1e12, "T"], [1e15, "P"], [1e18, "E"]]],
  latency: ["s", [[1e-9, "n"], [1e-6, "µ"], [1e-3, "m"], [1, ""]]],
};
const dim = axis_dim.value === undefined ? axis_dim : axis_dim.value;
if (!(dim in PREFIXES) || !(tick > 0)) return Number(tick).toPrecision(3).replace(/\.?0+$/, "");
const [unit, scale] = PREFIXES[dim];
let chosen = scale[0];
for (const s of scale) if (tick >= s[0] * 0.9999) chosen = s;
return Number((tick / chosen[0]).toPrecision(3)) + " " + chosen[1] + unit;
"""


def _tick_formatter(axis_dim: Any) -> Any:
    """A Bokeh tick formatter for the dimension ``axis_dim`` (a name, or the Select that names it)."""
    from bokeh.models import CustomJSTickFormatter

    return CustomJSTickFormatter(args={"axis_dim": axis_dim}, code=_TICK_JS)


def _edges(values: np.ndarray) -> np.ndarray:
    """Cell edges around sorted positive values, halfway in log space (the winner map's cells)."""
    x = np.log10(np.asarray(values, dtype=float))
    if len(x) == 1:
        edges = np.array([x[0] - 0.5, x[0] + 0.5])
    else:
        mid = (x[1:] + x[:-1]) / 2
        edges = np.concatenate([[x[0] - (mid[0] - x[0])], mid, [x[-1] + (x[-1] - mid[-1])]])
    return 10.0**edges


def select_part(dataset: xr.Dataset, selections: Sequence[str]) -> xr.Dataset:
    """``dataset`` restricted by ``DIM=VALUE[,VALUE...]`` selections (values as the selectors show them).

    Raises:
      UsageError: a malformed selection, an unknown dimension or value.
    """
    for text in selections:
        dim, sep, values = text.partition("=")
        if not sep or not values:
            raise UsageError(f"--sel: expected DIM=VALUE[,VALUE...], got {text!r}")
        if dim not in dataset["t_sim"].dims:
            raise UsageError(f"--sel: {dim!r} is not a dimension of the store; choose one of {', '.join(dataset['t_sim'].dims)}")
        labels = [_label(v) for v in dataset[dim].values]
        index = []
        for value in values.split(","):
            matches = [k for k, label in enumerate(labels) if label == value or _same_number(label, value)]
            if not matches:
                raise UsageError(f"--sel: {dim} has no value {value!r}; it has {', '.join(labels)}")
            index.append(matches[0])
        dataset = dataset.isel({dim: index})
    return dataset


#: Dimensions of a layout store (docs/contract.md §3b) the page shows one value of at a time
#: (``memory_capacity`` only of ``fits``, which the page does not show: dropped).
ONE_VALUE_DIMS = ("gpus", "tp", "dp", "cp", "recompute")


def one_layout(dataset: xr.Dataset) -> xr.Dataset:
    """A layout sweep's store at one layout and recomputation mode (chosen with ``--sel``), as a pipeline store.

    The page shows the schedules over ``p``, ``m`` and the other axes (``system``, the network) of
    one ``gpus``/``tp``/``dp``/``cp`` and ``recompute``; ``python -m ppsweep.analyze`` compares layouts.

    Raises:
      UsageError: a layout store where one of those dimensions still has several values.
    """
    if "layout_invalid" not in dataset:
        return dataset
    several = [d for d in ONE_VALUE_DIMS if d in dataset.dims and dataset.sizes[d] > 1]
    if several:
        choices = " ".join(f"--sel {d}={_label(dataset[d].values[0])}" for d in several)
        raise UsageError(f"--sel: a layout store; choose one value of {', '.join(several)} (e.g. {choices})")
    dataset = dataset.drop_vars([v for v in ("layout_invalid", "dp", "fits", "memory_capacity") if v in dataset.variables])
    return dataset.squeeze([d for d in ONE_VALUE_DIMS if d in dataset.dims], drop=True)


def _same_number(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def coordinates(dataset: xr.Dataset, dims: Sequence[str]) -> dict[str, dict[str, list]]:
    """Per dimension of ``dims``: ``labels`` (the selectors' values), ``shown`` (their texts, with units),
    ``axis_titles`` (``name (unit)``) and ``values`` (floats, None for a non-numeric coordinate)."""
    return {
        "labels": {d: [_label(v) for v in dataset[d].values] for d in dims},
        "shown": {d: [format_coordinate(d, v) for v in dataset[d].values] for d in dims},
        "axis_titles": {d: f"{d} ({dataset[d].attrs['units']})" if dataset[d].attrs.get("units") else d for d in dims},
        "values": {d: [float(v) if np.issubdtype(np.asarray(dataset[d].values).dtype, np.number) else None for v in dataset[d].values] for d in dims},
    }


def page_data(dataset: xr.Dataset) -> dict[str, Any]:
    """Everything the page's script needs, computed from the store (numpy arrays and lists).

    Args:
      dataset: a results dataset (:func:`ppsweep.analysis.load`), possibly a part of a store.

    Returns:
      A dict: ``dims`` (grid dimensions in order), ``labels`` (per dimension, the selectors'
      texts), ``t`` (masked ``t_sim`` in seconds, schedule-major, flattened), ``winner`` (winner
      masks over the grid), ``flip`` (1 where the sim winners and the formula winners are
      disjoint), memory arrays over ``(schedule, p, m)``, colours and labels of the winner codes,
      and, with a ``sample`` dimension, ``pwin`` and ``regret`` over the grid without it.
    """
    from ppsweep.analysis import masked, schedules, stability, winner_label
    from ppsweep.viz.display import byte_unit, time_unit

    names = schedules(dataset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        st = stability(dataset).compute()
        t_sim = masked(dataset, "t_sim").compute()
    dims = list(st["winner_sim"].dims)
    t = np.asarray(t_sim.transpose("schedule", *dims).values, dtype=float)
    winner = np.asarray(st["winner_sim"].values, dtype=np.int64)
    flip = np.nan_to_num(np.asarray(st["disagree_formula"].values, dtype=float), nan=0.0)
    codes = sorted(int(c) for c in np.unique(winner))
    singles = [c for c in codes if c > 0 and c & (c - 1) == 0]
    ties = [c for c in codes if c > 0 and c & (c - 1) != 0]
    colors = {str(c): SCHEDULE_COLORS[(int(c).bit_length() - 1) % len(SCHEDULE_COLORS)] for c in singles}
    colors.update({str(c): TIE_COLORS[k % len(TIE_COLORS)] for k, c in enumerate(ties)})
    colors["-1"] = "#FFFFFF"
    labels = {str(c): winner_label(c, names, sep=" = ") + (" (tie)" if c in ties else "") for c in codes}
    persistent = np.asarray(masked(dataset, "persistent_bytes").transpose("schedule", "p", "m").values, dtype=float)
    peak = persistent + np.asarray(masked(dataset, "peak_activation_bytes").transpose("schedule", "p", "m").values, dtype=float)
    t_size, t_unit = time_unit(t)
    b_size, b_unit = byte_unit(peak)
    data: dict[str, Any] = {
        "names": names,
        "dims": dims,
        "sizes": [int(st.sizes[d]) for d in dims],
        **coordinates(dataset, dims),
        "t": t.ravel(),
        "winner": winner.ravel().astype(np.float64),
        "flip": flip.ravel(),
        "colors": colors,
        "code_labels": labels,
        "t_unit": [t_size, t_unit],
        "b_unit": [b_size, b_unit],
        "persistent": persistent.ravel(),
        "peak": peak.ravel(),
        "pm_sizes": [int(dataset.sizes["p"]), int(dataset.sizes["m"])],
        "map": {d: _edges(np.sort(np.asarray(dataset[d].values, dtype=float))).tolist() for d in MAP_DIMS},
        "map_order": {d: np.argsort(np.asarray(dataset[d].values, dtype=float), kind="stable").tolist() for d in MAP_DIMS},
        "has_sample": "sample" in dims,
    }
    if "sample" in dims:
        data.update(_sample_data(dataset, st, t_sim, dims, names))
    return data


def _first_member(codes: np.ndarray) -> np.ndarray:
    """Index of the first schedule (lowest bit) in each winner mask; -1 where the mask is -1 (none)."""
    codes = np.asarray(codes, dtype=np.int64)
    lowest = np.where(codes > 0, codes & -codes, 1)
    return np.where(codes > 0, np.log2(lowest).astype(np.int64), -1)


def _sample_data(dataset: xr.Dataset, st: xr.Dataset, t_sim: xr.DataArray, dims: list[str], names: list[str]) -> dict[str, Any]:
    """P(win) per schedule and the regret of choosing by formula / table, over the grid without ``sample``."""
    winner = st["winner_sim"]
    known = winner >= 0
    bits = xr.DataArray(np.int64(1) << np.arange(len(names), dtype=np.int64), dims="schedule")
    wins = ((winner & bits) != 0) & known
    pwin = wins.sum("sample") / known.sum("sample").where(known.sum("sample") > 0)
    best = t_sim.min("schedule")
    regret = {}
    for by in ("formula", "table"):
        code = st[f"winner_{by}"]
        first = xr.apply_ufunc(_first_member, code)
        chosen = t_sim.isel(schedule=xr.where(first >= 0, first, 0)).where(first >= 0)
        regret[by] = (chosen / best - 1).mean("sample", skipna=True)
    rest = [d for d in dims if d != "sample"]
    return {
        "pwin": np.asarray(pwin.transpose("schedule", *rest).values, dtype=float).ravel(),
        "regret_formula": np.asarray(regret["formula"].transpose(*rest).values, dtype=float).ravel(),
        "regret_table": np.asarray(regret["table"].transpose(*rest).values, dtype=float).ravel(),
    }


# The page's script: recomputes every plot's data from the selectors. `D` is page_data's dict: the
# whole store's (static page) or the current selection's part (served page: the part changes, then this runs).
_UPDATE_JS = r"""
const D = page.data;
const dims = D.dims, sizes = D.sizes, S = D.names.length;
const strides = new Array(dims.length); { let s = 1; for (let a = dims.length - 1; a >= 0; a--) { strides[a] = s; s *= sizes[a]; } }
const G = sizes.reduce((a, b) => a * b, 1);
function sel(dim) { const k = D.labels[dim].indexOf(selects[dim].value); return k < 0 ? 0 : k; }
// Served page: a selected value the data lacks is on its way from the server, which redraws then.
if (dims.some(d => D.labels[d].indexOf(selects[d].value) < 0)) return;
function flat(fixed) { let k = 0; for (let a = 0; a < dims.length; a++) k += fixed[dims[a]] * strides[a]; return k; }
function current() { const f = {}; for (const d of dims) f[d] = sel(d); return f; }
function fmt(v, size, unit) { return Number.isFinite(v) ? (v / size).toPrecision(4) + " " + unit : "n/a"; }
const [ts, tu] = D.t_unit, [bs, bu] = D.b_unit;
const cur = current();

// winner map over bandwidth x latency
const bw = D.map_order.bandwidth, lat = D.map_order.latency, eb = D.map.bandwidth, el = D.map.latency;
const m = {left: [], right: [], bottom: [], top: [], color: [], winner: [], flip: [], bandwidth: [], latency: [], line: []};
for (let s = 0; s < S; s++) m["t" + s] = [];
for (let i = 0; i < bw.length; i++) for (let j = 0; j < lat.length; j++) {
  const f = Object.assign({}, cur, {bandwidth: bw[i], latency: lat[j]});
  const g = flat(f), code = String(D.winner[g]);
  m.left.push(eb[i]); m.right.push(eb[i + 1]); m.bottom.push(el[j]); m.top.push(el[j + 1]);
  m.color.push(D.colors[code] || "#FFFFFF"); m.winner.push(D.code_labels[code] || "none");
  m.flip.push(D.flip[g] == 1 ? "yes: the formula picks another schedule" : "no");
  m.bandwidth.push(D.shown.bandwidth[bw[i]]); m.latency.push(D.shown.latency[lat[j]]);
  m.line.push(bw[i] == cur.bandwidth && lat[j] == cur.latency ? 3 : 0);
  for (let s = 0; s < S; s++) m["t" + s].push(fmt(D.t[s * G + g], ts, tu));
}
map_source.data = m;

// step time against the chosen axis
const xd = xaxis.value;
for (let s = 0; s < S; s++) {
  const l = {x: [], y: [], label: [], value: []};
  for (let k = 0; k < D.labels[xd].length; k++) {
    const f = Object.assign({}, cur); f[xd] = k;
    const v = D.t[s * G + flat(f)];
    if (Number.isFinite(v)) { l.x.push(D.values[xd][k]); l.y.push(v / ts); l.label.push(D.shown[xd][k]); l.value.push(fmt(v, ts, tu)); }
  }
  l.order = l.x.map((_, k) => k).sort((a, b) => l.x[a] - l.x[b]);
  line_sources[s].data = {x: l.order.map(k => l.x[k]), y: l.order.map(k => l.y[k]), label: l.order.map(k => l.label[k]), value: l.order.map(k => l.value[k])};
}
line_axis.axis_label = D.axis_titles[xd];
line_yaxis.axis_label = "t_sim (" + tu + ")";
mem_yaxis.axis_label = bu;

// memory at the selected (p, m)
const [P, M] = D.pm_sizes, ip = cur.p, im = cur.m;
const mem = {schedule: [], persistent: [], peak: [], persistent_text: [], peak_text: [], color: [], floor: []};
let lowest = Infinity;
for (let s = 0; s < S; s++) { const v = D.persistent[(s * P + ip) * M + im]; if (Number.isFinite(v) && v > 0) lowest = Math.min(lowest, v / bs); }
for (let s = 0; s < S; s++) {
  const k = (s * P + ip) * M + im, a = D.persistent[k], b = D.peak[k];
  mem.schedule.push(D.names[s]); mem.persistent.push(Number.isFinite(a) ? a / bs : NaN); mem.peak.push(Number.isFinite(b) ? b / bs : NaN);
  mem.persistent_text.push(fmt(a, bs, bu)); mem.peak_text.push(fmt(b, bs, bu)); mem.color.push(colors[s]);
  mem.floor.push(Number.isFinite(lowest) ? lowest / 10 : 1e-3);
}
mem_source.data = mem;

// samples: P(win) and regret over the grid without `sample`
if (D.has_sample) {
  const rest = dims.filter(d => d != "sample");
  const rs = rest.map(d => sizes[dims.indexOf(d)]);
  let k = 0, stride = 1;
  for (let a = rest.length - 1; a >= 0; a--) { k += cur[rest[a]] * stride; stride *= rs[a]; }
  const R = stride;
  const pw = {schedule: [], pwin: [], text: [], color: []};
  for (let s = 0; s < S; s++) { const v = D.pwin[s * R + k]; pw.schedule.push(D.names[s]); pw.pwin.push(Number.isFinite(v) ? v : 0); pw.text.push(Number.isFinite(v) ? (100 * v).toFixed(1) + " %" : "n/a"); pw.color.push(colors[s]); }
  pwin_source.data = pw;
  const rf = D.regret_formula[k], rt = D.regret_table[k];
  regret_source.data = {by: ["formula", "table"], regret: [Number.isFinite(rf) ? 100 * rf : 0, Number.isFinite(rt) ? 100 * rt : 0],
                        text: [Number.isFinite(rf) ? (100 * rf).toFixed(2) + " %" : "n/a", Number.isFinite(rt) ? (100 * rt).toFixed(2) + " %" : "n/a"]};
}

// status line
const g0 = flat(cur), code0 = String(D.winner[g0]);
status.text = "<b>Selected point</b>: " + dims.map(d => d + "=" + D.shown[d][cur[d]]).join(", ") +
  " &mdash; fastest: <b>" + (D.code_labels[code0] || "none") + "</b>";
"""

# Run once when the page opens: apply the address's #dim=value&x=axis selection, then draw.
_READY_JS = r"""
const params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
for (const [key, value] of params) {
  if (key == "x" && xaxis.options.includes(value)) { xaxis.value = value; continue; }
  const w = selects[key];
  if (!w) continue;
  const values = w.options.map(o => Array.isArray(o) ? o[0] : o);  // options are [value, shown text] pairs
  const match = values.find(o => o == value || (Number.isFinite(parseFloat(o)) && parseFloat(o) == parseFloat(value)));
  if (match !== undefined) w.value = match;
}
update.execute(null);
"""


@functools.cache
def _page_model() -> type:
    """The Bokeh model that carries the page's data (:func:`page_data`'s dict) to its script."""
    from bokeh.core.properties import Any as AnyValue
    from bokeh.model import DataModel

    class PageData(DataModel):
        """:func:`page_data`'s dict; on the served page the server replaces it for every selection."""

        data = AnyValue(default=None, help="page_data's dict")

    return PageData


def build_page(dataset: xr.Dataset, title: str = "ppsweep explorer", data: dict[str, Any] | None = None, document: Any = None) -> Any:
    """The page as a Bokeh document.

    Args:
      dataset: a results dataset (or a part of one); the selectors offer all of its coordinates.
      title: the page's title.
      data: :func:`page_data` of ``dataset`` (default), or of the part of it the current selection
        needs (the served page, :mod:`ppsweep.viz.explore_served`, which then replaces
        ``document.select_one({"name": "page_data"}).data`` as the selection changes).
      document: the document to fill (default: a new one).

    Returns:
      A :class:`bokeh.document.Document`; its script (CustomJS) redraws whenever a selector or
      the ``page_data`` model changes. With ``data`` left out (the static page) every interaction
      runs in the browser.
    """
    # Bokeh numbers its models in the order they are made: the steps keep the page's order.
    data = page_data(dataset) if data is None else data
    names = data["names"]
    colors = [SCHEDULE_COLORS[k % len(SCHEDULE_COLORS)] for k in range(len(names))]
    selects, xaxis = _selectors(coordinates(dataset, data["dims"]), data["dims"])
    winner_map = _winner_map(data)
    step_time = _step_time_plot(data, colors, xaxis)
    memory = _memory_plot(data)
    status = _div(text="", width=1250, name="status")
    holder = _page_model()(data=data, name="page_data")
    args: dict[str, Any] = dict(page=holder, selects=selects, xaxis=xaxis, map_source=winner_map["source"],
                                line_sources=step_time["sources"], line_axis=step_time["figure"].xaxis[0],
                                line_yaxis=step_time["figure"].yaxis[0], mem_yaxis=memory["figure"].yaxis[0],
                                mem_source=memory["source"], status=status, colors=colors)
    sample_panels = _sample_panels(names, args) if data["has_sample"] else []
    update = _redraw_on_change(args, [*selects.values(), xaxis], holder)
    layout = _page_layout(dataset, title, selects, xaxis, status, winner_map, step_time, memory, sample_panels)
    return _fill_document(document, layout, holder, title, selects, xaxis, update)


def _div(**props: Any) -> Any:
    """A Bokeh ``Div`` (imported on first use, as every Bokeh model here)."""
    from bokeh.models import Div

    return Div(**props)


def _selectors(coords: dict[str, dict[str, list]], dims: Sequence[str]) -> tuple[dict[str, Any], Any]:
    """One ``Select`` per dimension (first value selected), and the step-time plot's "x axis"
    choice: the numeric swept dimensions (else the winner map's), bandwidth by default."""
    from bokeh.models import Select

    selects = {d: Select(title=coords["axis_titles"][d], value=coords["labels"][d][0], options=list(zip(coords["labels"][d], coords["shown"][d])),
                         name=f"select_{d}", width=130) for d in dims}
    numeric = [d for d in dims if d != "sample" and all(v is not None and v > 0 for v in coords["values"][d]) and len(coords["labels"][d]) > 1]
    x_choices = numeric or [d for d in dims if d in MAP_DIMS]
    xaxis = Select(title="x axis (step time)", value="bandwidth" if "bandwidth" in x_choices else x_choices[0], options=x_choices, name="select_x", width=160)
    return selects, xaxis


def _winner_map(data: dict[str, Any]) -> dict[str, Any]:
    """The winner map over bandwidth × latency (its source filled by the script) and its legend."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    names = data["names"]
    map_columns = ["left", "right", "bottom", "top", "color", "winner", "flip", "bandwidth", "latency", "line"] + [f"t{k}" for k in range(len(names))]
    map_source = ColumnDataSource({c: [] for c in map_columns}, name="map_source")
    map_fig = figure(title="Fastest schedule (simulated step time)", x_axis_type="log", y_axis_type="log", width=620, height=430,
                     x_axis_label="bandwidth (B/s)", y_axis_label="latency (s)", tools="pan,wheel_zoom,box_zoom,reset,save", name="winner_map")
    map_fig.xaxis[0].formatter = _tick_formatter("bandwidth")
    map_fig.yaxis[0].formatter = _tick_formatter("latency")
    map_fig.quad(left="left", right="right", bottom="bottom", top="top", fill_color="color", line_color="black", line_width="line", source=map_source)
    tooltips = [("bandwidth", "@bandwidth"), ("latency", "@latency"), ("fastest", "@winner")]
    tooltips += [(f"t_sim {n}", f"@t{k}") for k, n in enumerate(names)]
    tooltips.append(("flip vs formula", "@flip"))
    map_fig.add_tools(HoverTool(tooltips=tooltips))
    legend = _div(text=_legend_html(data), width=260, name="legend")
    return dict(source=map_source, figure=map_fig, legend=legend)


def _step_time_plot(data: dict[str, Any], colors: list[str], xaxis: Any) -> dict[str, Any]:
    """Step time against the chosen x axis: one line (and its source) per schedule."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    line_fig = figure(title="Step time", x_axis_type="log", y_axis_type="log", width=620, height=360,
                      y_axis_label=f"t_sim ({data['t_unit'][1]})", tools="pan,wheel_zoom,box_zoom,reset,save", name="step_time")
    line_fig.xaxis[0].formatter = _tick_formatter(xaxis)
    line_sources = []
    for k, name in enumerate(data["names"]):
        source = ColumnDataSource({"x": [], "y": [], "label": [], "value": []}, name=f"line_{name}")
        line_fig.line("x", "y", source=source, color=colors[k], line_width=2, legend_label=name)
        line_fig.scatter("x", "y", source=source, color=colors[k], size=6, legend_label=name)
        line_sources.append(source)
    line_fig.add_tools(HoverTool(tooltips=[("x", "@label"), ("t_sim", "@value")]))
    line_fig.legend.location = "top_right"
    line_fig.legend.click_policy = "hide"
    return dict(figure=line_fig, sources=line_sources)


def _memory_plot(data: dict[str, Any]) -> dict[str, Any]:
    """The bottleneck worker's memory per schedule (persistent; persistent + peak activations) and its note."""
    from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Legend
    from bokeh.plotting import figure
    from bokeh.transform import dodge

    mem_source = ColumnDataSource({"schedule": [], "persistent": [], "peak": [], "persistent_text": [], "peak_text": [], "color": [], "floor": []}, name="memory_source")
    mem_fig = figure(title="Peak memory of the bottleneck worker at the selected (p, m)", x_range=FactorRange(*data["names"]), y_axis_type="log",
                     width=620, height=330, y_axis_label=data["b_unit"][1], tools="save", name="memory")
    solid = mem_fig.vbar(x=dodge("schedule", -0.2, range=mem_fig.x_range), top="persistent", bottom="floor", width=0.35, source=mem_source, fill_color="color", line_color=None)
    light = mem_fig.vbar(x=dodge("schedule", 0.2, range=mem_fig.x_range), top="peak", bottom="floor", width=0.35, source=mem_source, fill_color="color", fill_alpha=0.4, line_color=None)
    mem_fig.add_tools(HoverTool(tooltips=[("schedule", "@schedule"), ("persistent", "@persistent_text"), ("peak", "@peak_text")]))
    mem_fig.add_layout(Legend(items=[("persistent", [solid]), ("persistent + peak activations", [light])], orientation="horizontal"), "below")
    mem_note = _div(text=f"<small>{MEMORY_NOTE}</small>", width=620)
    return dict(source=mem_source, figure=mem_fig, note=mem_note)


def _sample_panels(names: list[str], args: dict[str, Any]) -> list[Any]:
    """A noisy store's P(win) and regret plots, as one row; their sources go into the script's ``args``."""
    from bokeh.layouts import row
    from bokeh.models import ColumnDataSource, FactorRange, HoverTool
    from bokeh.plotting import figure

    pwin_source = ColumnDataSource({"schedule": [], "pwin": [], "text": [], "color": []}, name="pwin_source")
    pwin_fig = figure(title="P(win): share of samples where the schedule is fastest", x_range=FactorRange(*names), y_range=(0, 1.05),
                      width=620, height=300, tools="save", name="pwin")
    pwin_fig.vbar(x="schedule", top="pwin", width=0.6, source=pwin_source, fill_color="color", line_color=None)
    pwin_fig.add_tools(HoverTool(tooltips=[("schedule", "@schedule"), ("P(win)", "@text")]))
    regret_source = ColumnDataSource({"by": [], "regret": [], "text": []}, name="regret_source")
    regret_fig = figure(title="Regret of choosing by formula / table (mean over samples)", x_range=FactorRange("formula", "table"),
                        width=620, height=300, y_axis_label="%", tools="save", name="regret")
    regret_fig.vbar(x="by", top="regret", width=0.5, source=regret_source, fill_color="#8172B3", line_color=None)
    regret_fig.add_tools(HoverTool(tooltips=[("chosen by", "@by"), ("regret", "@text")]))
    args.update(pwin_source=pwin_source, regret_source=regret_source)
    return [row(pwin_fig, regret_fig)]


def _redraw_on_change(args: dict[str, Any], widgets: list[Any], holder: Any) -> Any:
    """The page's script (:data:`_UPDATE_JS` over ``args``), run as a selector changes and as the
    page data changes (the served page: the selectors' new values reach the server, which sends
    the selection's part)."""
    from bokeh.models import CustomJS

    update = CustomJS(args=args, code=_UPDATE_JS)
    for widget in widgets:
        widget.js_on_change("value", update)
    holder.js_on_change("data", update)
    return update


def _page_layout(dataset: xr.Dataset, title: str, selects: dict[str, Any], xaxis: Any, status: Any,
                 winner_map: dict[str, Any], step_time: dict[str, Any], memory: dict[str, Any], sample_panels: list[Any]) -> Any:
    """The header, the selectors, the status line and the plots, top to bottom."""
    from bokeh.layouts import column, row

    header = _div(text=f"<h2 style='margin:4px 0'>{title}</h2><p style='margin:0'>{_describe(dataset)}</p>", width=1250)
    return column(
        header,
        row(*selects.values(), xaxis),
        status,
        row(winner_map["figure"], winner_map["legend"]),
        row(step_time["figure"], column(memory["figure"], memory["note"])),
        *sample_panels,
        name="page",
    )


def _fill_document(document: Any, layout: Any, holder: Any, title: str, selects: dict[str, Any], xaxis: Any, update: Any) -> Any:
    """``document`` (default: a new one) with the page and the data model as roots, and the
    script that applies the address's selection (:data:`_READY_JS`) when the page opens."""
    from bokeh.document import Document
    from bokeh.events import DocumentReady
    from bokeh.models import CustomJS

    document = Document() if document is None else document
    document.add_root(layout)
    document.add_root(holder)  # the served page's callbacks find it by name
    document.title = title
    document.js_on_event(DocumentReady, CustomJS(args=dict(selects=selects, xaxis=xaxis, update=update), code=_READY_JS))
    return document


def _legend_html(data: dict[str, Any]) -> str:
    items = [
        f"<div><span style='display:inline-block;width:14px;height:14px;background:{data['colors'][code]};border:1px solid #999;"
        f"vertical-align:middle;margin-right:6px'></span>{label}</div>"
        for code, label in data["code_labels"].items()
        if code != "-1"
    ]
    return "<b>fastest schedule</b>" + "".join(items) + "<div style='margin-top:6px'><small>outlined: the selected bandwidth and latency</small></div>"


def _describe(dataset: xr.Dataset) -> str:
    from ppsweep.store.open import describe

    grid = ", ".join(f"{d} {dataset.sizes[d]}" for d in dataset["t_sim"].dims)
    return f"{describe(dict(dataset.attrs))}; grid: {grid}"


def page_html(dataset: xr.Dataset, title: str = "ppsweep explorer") -> str:
    """The page as one self-contained HTML string (BokehJS inline, no network needed)."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    return file_html(build_page(dataset, title), INLINE, title)


def _check_size(dataset: xr.Dataset) -> None:
    size = int(dataset["t_sim"].size)
    if size > MAX_VALUES:
        dims = ", ".join(f"{d} {dataset.sizes[d]}" for d in dataset["t_sim"].dims)
        raise UsageError(
            f"the store has {size:,} values of t_sim ({dims}); the page embeds at most {MAX_VALUES:,}: "
            "select a part with --sel DIM=VALUE[,VALUE...], e.g. --sel p=8, or serve it (no --html)"
        )


def serve(html: str, port: int, open_browser: bool = True) -> None:
    """Serve ``html`` on ``http://127.0.0.1:PORT/`` until interrupted (Ctrl-C or SIGTERM)."""
    directory = tempfile.mkdtemp(prefix="ppsweep-explore-")
    Path(directory, "index.html").write_text(html, encoding="utf-8")
    handler = functools.partial(_QuietHandler, directory=directory)
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as error:
        raise UsageError(f"--port: cannot listen on 127.0.0.1:{port} ({error.strerror or error}); choose another port") from None
    serve_until_stopped(f"http://127.0.0.1:{server.server_address[1]}/", "", open_browser, server.serve_forever, server.server_close)


def serve_until_stopped(url: str, how: str, open_browser: bool, run: Callable[[], None], close: Callable[[], None]) -> None:
    """Say where the explorer is served (``how``: what serves it, ending ``"; "``, or ``""``), open
    ``url`` in a browser if asked, and ``run`` the server until Ctrl-C or SIGTERM; then ``close`` it."""
    print(f"serving the explorer on {url} ({how}Ctrl-C to stop)", file=sys.stderr, flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        with stopped_by_signals():
            run()
    except KeyboardInterrupt:
        pass
    finally:
        close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass
