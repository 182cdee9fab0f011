"""``python -m ppsweep.analyze STORE``: which schedule wins where, and how stable that answer is.

Usage::

    python -m ppsweep.analyze results/bandwidth.zarr [--figures DIR] [--no-figures]

Prints a short report:

- the store (sweep, schedules, grid);
- **winners** per ``(p, m)``: the formula and table winners, and each schedule's share of the
  grid points where it is a sim winner (ties count for every tied schedule);
- **stability** per ``(p, m)`` and overall (:mod:`ppsweep.analysis.stability`): the share of
  points where the sim winner flips against the formula and the table winners (disjoint winner
  sets), where the winner sets differ at all, where the full order differs, and the mean
  Kendall tau-b between sim and formula/table ranks;
- **crossovers** along the bandwidth (:mod:`ppsweep.analysis.crossover`): per pair that ever
  swaps places, in how many series and at which bandwidths (median, range);
- **sensitivity** (:mod:`ppsweep.analysis.sensitivity`): how far each axis must move before the
  sim winner changes (median factor over the points where it changes at all).

A layout sweep's store (``+sweep=layout``) gets its own report instead
(:func:`ppsweep.analysis.layouts.layout_report`): per GPU count, cluster and capacity the fastest
(layout, schedule, m, recompute) that fits, its tokens/s and model FLOP/s per GPU, the runner-up,
the best other layout and their margins, and the choice at every inter-node bandwidth.

and writes the figures of :func:`ppsweep.viz.plots.write_figures` beside the store
(``results/<name>_figures/``, or ``--figures DIR``). Bad input (no store, not a ppsweep
store) prints one line ``error: ...`` and exits with 2. An unfinished store is analysed with a
warning; its missing units are left out.

For one schedule's Gantt chart or Chrome trace at one point, see ``python -m ppsweep.trace``;
for an interactive page of a store, ``python -m ppsweep.explore``.

Naming: this module is the *command line* only (parsing, the text report, the figures); the
computations live in the library :mod:`ppsweep.analysis`. ``python -m ppsweep.analysis`` runs this
same command (``ppsweep/analysis/__main__.py`` calls :func:`main`).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ppsweep.cli.support import UsageError, command_parser, check_arguments, run_command


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("analyze", "Rankings, ranking stability, crossovers and figures of a ppsweep results store.",
                            "results/bandwidth.zarr", store=True)
    parser.add_argument("--figures", metavar="DIR", help="directory of the PNG figures (default: <store>_figures beside the store)")
    parser.add_argument("--no-figures", action="store_true", help="print the report only")
    return parser


if __name__ == "__main__" and (_status := check_arguments(_parser())) is not None:
    sys.exit(_status)  # bad arguments and --help are answered before the heavy imports below

import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from ppsweep.analysis import (  # noqa: E402
    AnalysisError,
    crossovers,
    load,
    schedules,
    sensitivity,
    stability,
    summarize,
    winner_label,
)
from ppsweep.analysis.fits import fits_report, plot_fits_map  # noqa: E402
from ppsweep.store.errors import IncompleteStoreWarning  # noqa: E402
from ppsweep.store.open import describe  # noqa: E402


def figures_dir(store: Path) -> Path:
    """Default figure directory: ``results/<name>_figures`` for ``results/<name>.zarr``."""
    name = store.name[: -len(".zarr")] if store.name.endswith(".zarr") else store.name
    return store.parent / f"{name}_figures"


def _pct(x: float) -> str:
    return "  n/a" if x is None or np.isnan(x) else f"{100 * x:4.0f}%"


def _num(x: float, fmt: str = "+.2f") -> str:
    return "  n/a" if x is None or np.isnan(x) else format(x, fmt)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def winner_section(dataset: xr.Dataset, result: xr.Dataset) -> list[str]:
    """Formula and table winners and the sim winners' shares, per ``(p, m)``."""
    names = schedules(dataset)
    rows = [["p", "m", "formula winner", "table winner", "sim winners (share of points)"]]
    for i, p in enumerate(dataset["p"].values):
        for j, m in enumerate(dataset["m"].values):
            unit = result.isel(p=i, m=j)
            sim = np.asarray(unit["winner_sim"].values).ravel()
            sim = sim[sim >= 0]
            if sim.size == 0:
                rows.append([str(p), str(m), "-", "-", "not written / nothing valid"])
                continue
            formula = np.unique(unit["winner_formula"].values)
            table = np.unique(unit["winner_table"].values)
            shares = []
            for k, name in enumerate(names):
                share = float(np.mean((sim >> k) & 1))
                if share > 0:
                    shares.append((share, name))
            text = ", ".join(f"{name} {share:.0%}" for share, name in sorted(shares, reverse=True))
            rows.append(
                [
                    str(p), str(m),
                    " / ".join(winner_label(c, names) for c in formula),
                    " / ".join(winner_label(c, names) for c in table),
                    text,
                ]
            )
    return ["Winners (ties joined by '='):"] + _table(rows)


def stability_section(result: xr.Dataset) -> list[str]:
    """Flip shares, differing winners, reorderings and mean Kendall taus, per ``(p, m)`` and overall."""
    per = summarize(result)
    overall = summarize(result, by=())
    head = ["p", "m", "points", "flip vs formula", "flip vs table", "set differs f/t", "order differs f/t", "tau sim~formula", "tau sim~table"]
    rows = [head]

    def row(s: xr.Dataset, p: str, m: str) -> list[str]:
        v = {k: float(s[k]) for k in s.data_vars}
        return [
            p, m, str(int(v["n_points"])),
            _pct(v["share_disagree_formula"]), _pct(v["share_disagree_table"]),
            f"{_pct(v['share_differ_formula'])}/{_pct(v['share_differ_table']).strip()}",
            f"{_pct(v['share_reordered_formula'])}/{_pct(v['share_reordered_table']).strip()}",
            _num(v["mean_tau_formula"]), _num(v["mean_tau_table"]),
        ]

    for p in per["p"].values:
        for m in per["m"].values:
            rows.append(row(per.sel(p=p, m=m), str(p), str(m)))
    rows.append(row(overall, "all", ""))
    return [
        "Stability of the ranking: sim (communication-aware) against formula / table (bubble-based).",
        "  flip = no sim winner is among the formula (table) winners; tau = mean Kendall tau-b (n/a: a ranking all ties).",
    ] + _table(rows)


def crossover_section(dataset: xr.Dataset) -> list[str]:
    """Pairs that swap places along the bandwidth, with where."""
    cx = crossovers(dataset)
    names = schedules(dataset)
    lines = ["Crossovers along the bandwidth (pair: series with a crossover / series; bandwidth median [min, max]):"]
    found = False
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            pair = cx.isel(schedule=a, other=b)
            values = np.asarray(pair["crossover"].values, float)
            counts = np.asarray(pair["n_crossings"].values)
            if not np.any(counts):
                continue
            found = True
            v = values[~np.isnan(values)]
            first = np.asarray(pair["direction"].isel(crossing=0).values)[counts > 0]
            above = names[a] if np.mean(first > 0) >= 0.5 else names[b]
            lines.append(
                f"  {names[a]} vs {names[b]}: {int(np.sum(counts > 0))}/{counts.size} series, "
                f"{np.median(v):.3g} B/s [{v.min():.3g}, {v.max():.3g}]; mostly {above} faster above"
            )
    if not found:
        lines.append("  none: no pair of schedules changes order along the bandwidth axis")
    return lines


def sensitivity_section(result: xr.Dataset) -> list[str]:
    """Median factor and steps each axis must move before the sim winner changes."""
    sens = sensitivity(result)
    lines = ["Sensitivity (how far one axis must move before the sim winner changes):"]
    if not sens.data_vars:
        return lines + ["  no axis with more than one value"]
    for name in sens.data_vars:
        if not str(name).startswith("steps_"):
            continue
        axis = str(name)[len("steps_"):]
        steps = np.asarray(sens[name].values, float)
        factor = np.asarray(sens[f"factor_{axis}"].values, float)
        known = np.asarray(result["winner_sim"].values) >= 0
        changes = ~np.isnan(steps) & known
        if not changes.any():
            lines.append(f"  {axis}: the sim winner never changes along {axis} within the grid")
            continue
        lines.append(
            f"  {axis}: changes within the grid at {changes.sum() / max(known.sum(), 1):.0%} of points; "
            f"median {np.median(steps[changes]):.0f} grid step(s), factor {np.median(factor[changes]):.3g}; "
            f"{np.mean(steps[changes] == 1):.0%} of those change at the next grid value"
        )
    return lines


def report(dataset: xr.Dataset, result: xr.Dataset, path: Path) -> str:
    """The whole text report."""
    names = schedules(dataset)
    sizes = ", ".join(f"{d} {dataset.sizes[d]}" for d in dataset["t_sim"].dims)
    lines = [
        f"{path}: {describe(dict(dataset.attrs))}",
        f"  schedules: {', '.join(names)}; grid: {sizes} ({int(np.prod([dataset.sizes[d] for d in dataset['t_sim'].dims]))} points)",
        "",
        *winner_section(dataset, result),
        "",
        *stability_section(result),
        "",
        *crossover_section(dataset),
        "",
        *sensitivity_section(result),
    ]
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> str:
    """Everything but printing errors: returns the text to print."""
    args = _parser().parse_args(argv)
    path = Path(args.store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IncompleteStoreWarning)
        dataset = load(path)
    for w in caught:
        if issubclass(w.category, IncompleteStoreWarning):
            print(f"warning: {w.message}", file=sys.stderr)
    from ppsweep.analysis.layouts import is_layout_store, layout_report

    if is_layout_store(dataset):  # a layout sweep: the fastest layout that fits (README, "The whole layout")
        sizes = ", ".join(f"{d} {dataset.sizes[d]}" for d in dataset["t_sim"].dims)
        lines, _ = layout_report(dataset)
        return "\n".join([f"{path}: {describe(dict(dataset.attrs))}", f"  grid: {sizes}", "", *lines])
    from ppsweep.analysis import uncertainty_report  # P(win) and regret (README, "Uncertainty")

    noisy, dataset = dataset, uncertainty_report.nominal_view(dataset)
    result = stability(dataset).compute()  # once: the report reads it many times
    text = report(dataset, result, path) + "\n\n" + "\n".join(uncertainty_report.uncertainty_section(noisy))
    fit_lines, fit_result = fits_report(dataset)  # stores with a memory_capacity axis
    if fit_lines:
        text += "\n\n" + "\n".join(fit_lines)
    if not args.no_figures:
        from ppsweep.viz.plots import write_figures

        out = Path(args.figures) if args.figures else figures_dir(path)
        try:
            paths = write_figures(dataset, result, out) + uncertainty_report.write_uncertainty_figures(noisy, out)
            if fit_result is not None:
                paths.append(plot_fits_map(fit_result, out / "fits_map.png"))
        except OSError as error:
            raise UsageError(f"cannot write figures to {out}: {error.strerror or error}") from None
        text += "\n\nFigures:\n" + "\n".join(f"  {p}" for p in paths)
    return text


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0, or 2 after one ``error:`` line on stderr)."""
    return run_command(lambda: run(argv), (AnalysisError,))


if __name__ == "__main__":
    sys.exit(main())
