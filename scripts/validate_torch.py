"""PyTorch's pipeline schedules run for real on this machine, held against ppsweep's predictions.

    python scripts/validate_torch.py [--quick] [--json docs/validate_torch.json] [--figure docs/validate_torch.png]

Needs torch (``pip install -e '.[validate]'``). Three experiments, each one process group of
spawned ranks over gloo on localhost (``ppsweep.measure.validate``):

- ``real p=2``: real compute, each physical stage 4 Linear(512)+tanh layers, 32 rows a microbatch;
- ``sleep p=4`` and ``sleep p=8``: emulated compute, stages sleeping unequal set times
  (forward 6-9 ms, input and weight gradients each as long as the forward).

Each calibrates once from a profiler trace of PyTorch's 1F1B (``ppsweep.calibrate``'s fit) and
predicts every other schedule in every communication mode; prints per (schedule, p, m) the
measured median (5 steps after 2 warm-up steps), its spread, each mode's prediction and error, and
the error summary with the ranking agreement (about 6 minutes on 2 busy cores). ``--quick``: p = 2
and 4 only, fewer m (about 2 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsweep.engine.comm import MODES
from ppsweep.measure.torch_runtime import Workload
from ppsweep.measure.validate import (
    STEADY_SPREAD,
    Experiment,
    format_rows,
    format_summary,
    run_experiment,
    summary,
)

SLEEP_F = (0.006, 0.008, 0.007, 0.009, 0.006, 0.008, 0.007, 0.009)


def sleep_work(p: int) -> Workload:
    """Unequal emulated stages: forward 6-9 ms, input and weight gradients each the forward's time."""
    f = SLEEP_F[:p]
    return Workload("sleep", t_f=f, t_i=f, t_w=f, hidden=512, rows=32)


def experiments(quick: bool) -> list[Experiment]:
    """The full run's experiments (or the quick run's)."""
    real = Workload("mlp", layers=(4, 4), hidden=512, rows=32)
    if quick:
        return [Experiment("real", 2, real, (4, 8), calibrate_m=8, steps=5),
                Experiment("sleep", 4, sleep_work(4), (8,), calibrate_m=8, steps=5)]
    return [Experiment("real", 2, real, (4, 8, 16), calibrate_m=8),
            Experiment("sleep", 4, sleep_work(4), (4, 8, 16), calibrate_m=8),
            Experiment("sleep", 8, sleep_work(8), (8, 16), calibrate_m=16)]


def plot(rows, path: Path) -> None:
    """Predicted against measured step time, one marker per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    markers = dict(zip(MODES, "o^sx"))
    for mode in ("overlap", "blocking"):  # contention and ports lie with overlap here (small messages)
        for steady in (False, True):
            sel = [r for r in rows if (r.spread <= STEADY_SPREAD) == steady]
            ax.scatter([1e3 * r.measured for r in sel], [1e3 * r.predicted[mode] for r in sel], marker=markers[mode],
                       s=30 if steady else 18, alpha=0.95 if steady else 0.3, color="C0" if mode == "overlap" else "C1",
                       edgecolors="k" if steady else "none",
                       label=f"{mode}, {'steady' if steady else 'spread'} {'<=' if steady else '>'} {STEADY_SPREAD:.0%}")
    hi = 1.1e3 * max(max(r.measured, *r.predicted.values()) for r in rows)
    ax.plot([0, hi], [0, hi], "k-", lw=0.8)
    for f in (0.95, 1.05):
        ax.plot([0, hi], [0, f * hi], "k:", lw=0.6)
    ax.set(xscale="log", yscale="log", xlabel="measured step, ms (PyTorch, gloo, this machine)",
           ylabel="predicted step, ms (ppsweep, calibrated on 1F1B)", title="Held against measurements")
    ax.legend(title="comm mode, measurement", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def runtime_check(p: int = 4, m: int = 8) -> None:
    """1F1B and Interleaved 1F1B run by their PyTorch classes and by ``_PipelineScheduleRuntime``
    from ppsweep's exported CSV, all predicted from one 1F1B trace: separates the runtime class
    from the chunking."""
    import ppsweep
    from ppsweep.measure.calibrate import fit_trace
    from ppsweep.measure.predict import predict_step
    from ppsweep.measure.torch_runtime import RunConfig, run_pipeline
    from ppsweep.tables.interchange import write_csv

    with tempfile.TemporaryDirectory() as tmp:
        tables = {"1f1b": ppsweep.build_schedule("1f1b", p, m),
                  "interleaved_1f1b": ppsweep.build_schedule("interleaved_1f1b", p, m, v=2)}
        configs = [RunConfig("1f1b", m, trace_dir=f"{tmp}/trace")]
        for name, table in tables.items():
            write_csv(table, f"{tmp}/{name}.csv")
            configs += [RunConfig(name, m, steps=7), RunConfig(f"{name} (CSV)", m, steps=7, csv_path=f"{tmp}/{name}.csv")]
        measured = run_pipeline(p, sleep_work(p), configs)
        fit = fit_trace([f"{tmp}/trace"])
    print(f"| schedule, p={p} m={m} | runtime | median ms | fastest ms | spread | predicted ms (overlap) |")
    print("|---|---|---|---|---|---|")
    for result in measured[1:]:
        name = result.schedule.removesuffix(" (CSV)")
        runtime = "_PipelineScheduleRuntime (CSV)" if result.schedule.endswith("(CSV)") else "its class"
        predicted = predict_step(fit.profile, tables[name], op_overhead=fit.per_operation())
        print(f"| {name} | {runtime} | {1e3 * result.median:.1f} | {1e3 * min(result.times):.1f} | {result.spread:.0%} | {1e3 * predicted:.1f} |")


def two_size_check(p: int = 4, m: int = 8) -> None:
    """The per-operation fixed cost ``c`` from two 1F1B traces of the same emulated stages at full
    and half time (``t_half = t/2 + c``: ``c = 2·t_half − t_full``, median over stages), against the
    trace's own estimate (dispatch + runtime-own time), on the chunked schedules measured alongside."""
    import statistics
    from dataclasses import replace

    from ppsweep.measure.calibrate import fit_trace
    from ppsweep.measure.predict import predict_step, schedule_table
    from ppsweep.measure.torch_runtime import RunConfig, run_pipeline

    work = sleep_work(p)
    half = replace(work, **{k: tuple(x / 2 for x in getattr(work, k)) for k in ("t_f", "t_i", "t_w")})
    names = ["1f1b", "interleaved_1f1b", "looped_bfs", "interleaved_zb", "zbv", "dualpipev"]
    with tempfile.TemporaryDirectory() as tmp:
        measured = run_pipeline(p, work, [RunConfig("1f1b", m, trace_dir=f"{tmp}/full")]
                                + [RunConfig(s, m, steps=7) for s in names])[1:]
        run_pipeline(p, half, [RunConfig("1f1b", m, trace_dir=f"{tmp}/half")])
        full, short = fit_trace([f"{tmp}/full"]), fit_trace([f"{tmp}/half"])
    c = {k: statistics.median(2 * h - f for h, f in zip(getattr(short.profile, name), getattr(full.profile, name)))
         for k, name in (("F", "t_f"), ("B", "t_b"))}
    own = full.per_operation()
    print(f"per-operation cost, ms: two sizes F {1e3 * c['F']:.3f} B {1e3 * c['B']:.3f}; "
          f"one trace (dispatch + runtime-own) F {1e3 * own['F']:.3f} B {1e3 * own['B']:.3f}")
    print(f"| schedule, p={p} m={m} | median ms | fastest ms | spread | predicted, one trace (err) | predicted, two sizes (err) |")
    print("|---|---|---|---|---|---|")
    for r in measured:
        table = schedule_table(r.schedule, p, m)
        a, b = (predict_step(full.profile, table, op_overhead=o) for o in (own, c))
        print(f"| {r.schedule} | {1e3 * r.median:.1f} | {1e3 * min(r.times):.1f} | {r.spread:.0%} | "
              f"{1e3 * a:.1f} ({a / r.median - 1:+.1%}) | {1e3 * b:.1f} ({b / r.median - 1:+.1%}) |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="p = 2 and 4, fewer m (about 2 minutes)")
    parser.add_argument("--json", type=Path, help="write the rows and summary as JSON")
    parser.add_argument("--figure", type=Path, help="write the predicted-vs-measured PNG")
    parser.add_argument("--runtime-check", action="store_true",
                        help="only: 1F1B and Interleaved 1F1B by their classes and from CSV (p=4, m=8)")
    parser.add_argument("--two-size", action="store_true",
                        help="only: the per-operation cost from 1F1B at two stage sizes, on the chunked schedules (p=4, m=8)")
    parser.add_argument("--replot", type=Path, metavar="JSON", help="only draw --figure from a --json file of an earlier run")
    args = parser.parse_args()
    if args.replot:
        from ppsweep.measure.validate import Row

        data = json.loads(args.replot.read_text())
        plot([Row(**r) for e in data["experiments"] for r in e["rows"]], args.figure or Path("validate_torch.png"))
        return 0
    try:
        import torch
    except ImportError:
        print("error: torch is not installed; pip install -e '.[validate]'", file=sys.stderr)
        return 2
    if args.runtime_check:
        runtime_check()
        return 0
    if args.two_size:
        two_size_check()
        return 0
    start = time.time()
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, torch {torch.__version__}, load {os.getloadavg()[0]:.1f}"
    print(f"machine: {machine}")
    rows, record = [], []
    for exp in experiments(args.quick):
        result = run_experiment(exp)
        print(f"\n## {exp.name} p={exp.p}: calibrated from 1F1B m={exp.calibrate_m}\n{result.fit.summary()}\n")
        print(format_rows(result.rows))
        for refused in result.refused:
            print(f"refused by PyTorch: {refused.schedule} p={refused.p} m={refused.m}: {refused.refused}")
        print(f"\n{format_summary(result.rows)}")
        rows += result.rows
        record.append({"experiment": exp.name, "p": exp.p, "fit": result.fit.profile.to_mapping(),
                       "overhead_s": result.fit.overhead,
                       "rows": [vars(r) for r in result.rows]})
    print(f"\n## all experiments ({len(rows)} configurations)\n{format_summary(rows)}")
    print(f"\nwall time {time.time() - start:.0f} s; load now {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": machine, "experiments": record,
                                         "summary": {mode: summary(rows, mode) for mode in MODES},
                                         "summary_steady": {mode: summary(rows, mode, True) for mode in MODES}}, indent=1))
    if args.figure:
        plot(rows, args.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
