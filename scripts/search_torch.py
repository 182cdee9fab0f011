"""The searched schedule run for real in PyTorch, against PyTorch's built-in schedules (issue 28, item 3).

    PYTHONPATH=$PWD python scripts/search_torch.py [--p 4] [--m 8] [--steps 5]

Emulated compute (``ppsweep.measure.torch_runtime``, ``kind="sleep"``): every physical stage holds
its rank for the zero-bubble paper's 1.5B times read as milliseconds (T_F 18.522, T_B 18.086,
T_W 9.337; Table 9), over gloo on localhost. PyTorch's first stage has no input gradient (its I
does nothing, its W runs the whole backward), and the search's costs say so; PyTorch's own cost
per pass (dispatch, messages on a loaded machine) is estimated from its 1F1B, measured first, and
added to every pass whatever its size (``Region.overhead``: a chunk pays it whole). The search (space
``b``, objective mean step time over message latencies 0.1, 0.5 and 2 ms) runs under caps of ``p``
and ``2p`` microbatches' activations; each winner is exported as a PyTorch CSV, checked with
PyTorch's loader, and run by ``_PipelineScheduleRuntime`` beside the built-in schedules. Prints,
per schedule, the peak activations (M_B), the predicted step (mean over the latencies) and the
measured median of ``--steps`` steps after 2 warm-up steps, with the spread. 1F1B, interleaved ZB
and ZB-V also run as ppsweep's tables exported to CSV, through the runtime the winners use.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsweep.measure.torch_runtime import (
    TORCH_SCHEDULES,
    RunConfig,
    Workload,
    run_pipeline,
)
from ppsweep.search.driver import search
from ppsweep.search.export import check_with_torch, export_csv
from ppsweep.search.region import Region, figures
from ppsweep.tables.build import build_schedule

T_F, T_B, T_W = 0.018522, 0.018086, 0.009337  # Table 9, 1.5B, m=24, read as ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", type=int, default=4)
    parser.add_argument("--m", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--space", default="all")
    args = parser.parse_args()
    p, m = args.p, args.m
    work = Workload("sleep", t_f=(T_F,) * p, t_i=(T_B,) * p, t_w=(T_W,) * p, hidden=512, rows=32)
    # PyTorch's overhead per pass, from its 1F1B: (measured - predicted) over the 2(m+p-1) passes of its critical path
    bare = Region.of(T_F, (0.0,) + (T_B,) * (p - 1), (T_B + T_W,) + (T_W,) * (p - 1), latency=[1e-4, 5e-4, 2e-3])
    first = run_pipeline(p, work, [RunConfig("1f1b", m, steps=args.steps)], timeout=900)[0]
    overhead = max(0.0, (first.median - figures(build_schedule("1f1b", p, m), bare).mean) / (2 * (m + p - 1)))
    print(f"1F1B measured {first.median * 1e3:.1f} ms: {overhead * 1e3:.2f} ms per pass (every F, B, I, W, chunk or not)")
    region = Region.of(T_F, (0.0,) + (T_B,) * (p - 1), (T_B + T_W,) + (T_W,) * (p - 1), latency=[1e-4, 5e-4, 2e-3],
                       overhead=overhead)
    rows: dict[str, tuple[float, float]] = {}
    configs: list[RunConfig] = []
    scratch = Path(tempfile.mkdtemp(prefix="search_torch_"))
    for cap in (p, 2 * p):
        result = search(args.space, p, m, region, cap=cap, objective="mean", budget=600, progress=False)
        best = result.best[0]
        table = build_schedule(best.label, p, m)
        csv = export_csv(table, scratch / f"searched_cap{cap}.csv")
        check_with_torch(csv, table.p, table.n_stages, table.m)
        name = f"searched cap {cap}: " + "@".join(x for x in best.label.split("@") if not x.startswith("times="))
        rows[name] = (best.figures.peak, best.figures.mean)
        configs.append(RunConfig(name, m, steps=args.steps, csv_path=str(csv)))
        print(f"cap {cap}: {result.evaluated} candidates, {result.seconds:.1f} s; winner {best.label}; "
              f"best hand-made {result.incumbents[0].label}; predicted margin {result.margin:+.2%}")
    for name in TORCH_SCHEDULES:
        table = build_schedule(name, p, m)
        fig = figures(table, region)
        rows[name] = (fig.peak, fig.mean)
        configs.append(RunConfig(name, m, steps=args.steps))
        if name in ("1f1b", "interleaved_zb", "zbv"):  # the same orders through the CSV runtime the winners use
            csv = export_csv(table, scratch / f"{name}.csv")
            rows[f"{name} (ppsweep's table as CSV)"] = (fig.peak, fig.mean)
            configs.append(RunConfig(f"{name} (ppsweep's table as CSV)", m, steps=args.steps, csv_path=str(csv)))
    measured = run_pipeline(p, work, configs, timeout=900)
    print(f"\np={p} m={m}, sleep stages T_F={T_F * 1e3} ms, T_I={T_B * 1e3} ms, T_W={T_W * 1e3} ms; "
          f"{args.steps} steps after 2 warm-up steps")
    print(f"{'schedule':72s} {'peak M_B':>8s} {'predicted ms':>12s} {'measured ms':>11s} {'spread':>7s}")
    for config, result in zip(configs, measured):
        peak, predicted = rows[config.schedule]
        if result.refused:
            print(f"{config.schedule:72s} {peak:8.2f} {predicted * 1e3:12.1f}  refused: {result.refused}")
            continue
        print(f"{config.schedule:72s} {peak:8.2f} {predicted * 1e3:12.1f} {result.median * 1e3:11.1f} {result.spread:7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
