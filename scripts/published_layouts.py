#!/usr/bin/env python
"""The layout model against published measurements: per row measured, predicted, error.

    python scripts/published_layouts.py

Prints (ppsweep.published: the sources, the inputs, the one assumed parameter): Narayanan et al.
2021 Table 1 (teraFLOP/s per GPU, 1.7B on 32 GPUs to 1T on 3,072), the interleaved schedule's
predicted gain on those rows (the paper measures "10+%"), Korthikanti et al. 2022's model FLOP
utilisation of the 530B model with and without selective recomputation, and vTrain's 109 measured
iteration times (MAPE, and per model Kendall's tau and whether the fastest configuration agrees).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's ppsweep, when run as a script

from ppsweep.published import (  # noqa: E402
    Comparison,
    a100,
    interleaved_gains,
    korthikanti_rows,
    narayanan_rows,
    ranking_agreement,
    summary,
    vtrain_rows,
)


def table(title: str, rows: list[Comparison]) -> list[str]:
    """Markdown rows: label, setting, measured, predicted, error; then the median and largest |error|."""
    unit = rows[0].unit
    lines = [f"### {title}", "", f"| run | layout, batch, schedule | measured {unit} | predicted | error |", "|---|---|---|---|---|"]
    lines += [f"| {r.label} | {r.setting} | {r.measured:.1f} | {r.predicted:.1f} | {r.error:+.1%} |" for r in rows]
    s = summary(rows)
    lines += ["", f"median |error| {s['median_abs_error']:.1%}, largest {s['max_abs_error']:.1%}", ""]
    return lines


def main() -> dict[str, list]:
    """Print the tables; returns the rows printed (for tests/test_published_layouts.py)."""
    system = a100()
    rows = {"narayanan": narayanan_rows(system), "korthikanti": korthikanti_rows(system), "interleaved": interleaved_gains(system),
            "vtrain": vtrain_rows(system)}
    print(f"System: conf/system/a100_cluster.yaml (compute_efficiency {system.compute_efficiency}, assumed once; "
          f"inter-node {system.bandwidth / 1e9:g} GB/s per GPU, NVLink {system.intra_bandwidth / 1e9:g} GB/s)\n")
    print("\n".join(table("Narayanan et al. 2021, Table 1 (full recomputation, microbatch 1 assumed)", rows["narayanan"])))
    print("### Interleaved schedule (2 chunks) against 1F1B, predicted gain (the paper's abstract: 10+%)\n")
    print("\n".join(f"- {label}: {gain:+.1%}" for label, gain in rows["interleaved"]) + "\n")
    print("\n".join(table("Korthikanti et al. 2022, abstract (530B on 2,240 A100s)", rows["korthikanti"])))
    print("\n".join(table("vTrain (Bang et al. 2024), measured iteration times (1F1B, full recomputation)", rows["vtrain"])))
    s = summary(rows["vtrain"])
    print(f"vTrain, all {len(rows['vtrain'])} rows: MAPE {s['mape']:.1%}\n")
    print("| model | rows | MAPE | Kendall tau (measured vs predicted) | fastest configuration agrees |\n|---|---|---|---|---|")
    for g in ranking_agreement(rows["vtrain"]):
        print(f"| {g['model']} | {g['rows']} | {g['mape']:.1%} | {g['tau']:.2f} | {'yes' if g['same_fastest'] else 'no'} |")
    return rows


if __name__ == "__main__":
    main()
