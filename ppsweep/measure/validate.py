"""Measured PyTorch pipeline steps against ppsweep's predictions (issue 26, item 4).

An :class:`Experiment` is one ``p`` and one :class:`~ppsweep.measure.torch_runtime.Workload`: its
ranks run a profiled 1F1B (the calibration trace), then every schedule at every ``m`` unprofiled
(the measurements), all in one spawned process group. The 1F1B trace is calibrated
(:func:`ppsweep.measure.calibrate.fit_trace`) and every measured step predicted in every
communication mode (:func:`ppsweep.measure.predict.predict_step`).

Ranking agreement: two schedules at the same ``(p, m)`` form a pair *beyond the noise* when their
measured medians differ by more than the larger of their measured ranges (max - min of the kept
steps); such a pair agrees when the prediction orders them the same way.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from ppsweep.engine.comm import MODES
from ppsweep.measure.calibrate import Fit, fit_trace
from ppsweep.measure.predict import predict_step, schedule_table
from ppsweep.measure.torch_runtime import (
    TORCH_SCHEDULES,
    Measurement,
    RunConfig,
    Workload,
    run_pipeline,
)


@dataclass(frozen=True)
class Experiment:
    """One process group's worth of measurements (see the module docstring)."""

    name: str
    p: int
    work: Workload
    ms: tuple[int, ...]
    schedules: tuple[str, ...] = tuple(TORCH_SCHEDULES)
    calibrate_m: int = 8
    steps: int = 5
    warmup: int = 2


@dataclass
class Row:
    """One measured configuration and its predictions (seconds; error relative to the measurement)."""

    schedule: str
    p: int
    m: int
    measured: float
    spread: float
    rng: float
    predicted: dict[str, float] = field(default_factory=dict)

    def error(self, mode: str) -> float:
        """(predicted - measured) / measured."""
        return self.predicted[mode] / self.measured - 1.0


@dataclass
class ExperimentResult:
    """An experiment's fit, rows, and the configurations PyTorch refused."""

    experiment: Experiment
    fit: Fit
    rows: list[Row]
    refused: list[Measurement]


def run_experiment(exp: Experiment, trace_dir: str | Path | None = None) -> ExperimentResult:
    """Run ``exp``: the profiled 1F1B, every (schedule, m) measured, then calibrate and predict.

    Args:
      exp: the experiment.
      trace_dir: where the calibration trace goes (default: a temporary folder).
    """
    tmp = None
    if trace_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="ppsweep-trace-")
        trace_dir = tmp.name
    trace = Path(trace_dir) / f"{exp.name}_1f1b_p{exp.p}_m{exp.calibrate_m}"
    configs = [RunConfig("1f1b", exp.calibrate_m, steps=exp.steps, warmup=exp.warmup, trace_dir=str(trace))]
    configs += [RunConfig(s, m, steps=exp.steps, warmup=exp.warmup) for s in exp.schedules for m in exp.ms]
    try:
        measured = run_pipeline(exp.p, exp.work, configs)
        fit = fit_trace([trace], source=f"calibrated from PyTorch Schedule1F1B, {exp.name}, p={exp.p} m={exp.calibrate_m}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    rows, refused = [], []
    for result in measured[1:]:
        if result.refused:
            refused.append(result)
            continue
        row = Row(result.schedule, exp.p, result.m, result.median, result.spread, max(result.times) - min(result.times))
        table = schedule_table(result.schedule, exp.p, result.m)
        for mode in MODES:
            row.predicted[mode] = predict_step(fit.profile, table, mode, "latency" if mode == "overlap" else "wire",
                                               op_overhead=fit.per_operation())
        rows.append(row)
    return ExperimentResult(exp, fit, rows, refused)


def ranking(rows: list[Row], mode: str) -> tuple[int, int, list[str]]:
    """Pairs beyond the noise, how many the prediction orders right, and the wrong ones (text)."""
    total, right, wrong = 0, 0, []
    groups: dict[tuple[int, int], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.p, row.m), []).append(row)
    for (p, m), group in groups.items():
        for a, b in combinations(group, 2):
            if abs(a.measured - b.measured) <= max(a.rng, b.rng):
                continue
            total += 1
            if (a.measured - b.measured) * (a.predicted[mode] - b.predicted[mode]) > 0:
                right += 1
            else:
                wrong.append(f"p={p} m={m}: {a.schedule} vs {b.schedule}")
    return total, right, wrong


#: A measurement is *steady* when its spread ((max - min)/median of the kept steps) is at most this.
STEADY_SPREAD = 0.2


def summary(rows: list[Row], mode: str, steady: bool = False) -> dict[str, float]:
    """Median and worst |error| and the ranking agreement in ``mode`` (``steady``: only the rows
    whose spread is at most :data:`STEADY_SPREAD`, the ones the machine's other work barely touched)."""
    if steady:
        rows = [r for r in rows if r.spread <= STEADY_SPREAD]
    errors = [abs(r.error(mode)) for r in rows]
    total, right, _ = ranking(rows, mode)
    return {
        "median_abs_error": statistics.median(errors) if errors else math.nan,
        "worst_abs_error": max(errors) if errors else math.nan,
        "pairs": total,
        "pairs_right": right,
        "rows": len(rows),
    }


def format_rows(rows: list[Row]) -> str:
    """A Markdown table: measured, spread, and each mode's prediction and error."""
    head = "| schedule | p | m | measured ms | spread | " + " | ".join(f"{mode} ms (err)" for mode in MODES) + " |"
    lines = [head, "|" + "---|" * (4 + len(MODES) + 1)]
    for r in rows:
        cells = " | ".join(f"{1e3 * r.predicted[mode]:.1f} ({r.error(mode):+.1%})" for mode in MODES)
        lines.append(f"| {r.schedule} | {r.p} | {r.m} | {1e3 * r.measured:.1f} | {r.spread:.1%} | {cells} |")
    return "\n".join(lines)


def format_summary(rows: list[Row]) -> str:
    """A Markdown table of the error summary per mode: all rows, then the steady ones."""
    lines = ["| mode | rows | median abs error | worst abs error | ranking pairs right |", "|---|---|---|---|---|"]
    for steady in (False, True):
        for mode in MODES:
            s = summary(rows, mode, steady)
            label = f"{s['rows']} steady (spread <= {STEADY_SPREAD:.0%})" if steady else f"all {s['rows']}"
            pct = (lambda x: "–" if math.isnan(x) else f"{x:.1%}")
            lines.append(f"| {mode} | {label} | {pct(s['median_abs_error'])} | {pct(s['worst_abs_error'])} | "
                         f"{s['pairs_right']}/{s['pairs']} |")
    return "\n".join(lines)
