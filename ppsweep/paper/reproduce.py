"""The whole reproduction: sweeps, findings, verdicts, figures and REPORT.md."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from ppsweep.paper import findings
from ppsweep.paper.claims import CLAIMS
from ppsweep.paper.figures import write_figure
from ppsweep.paper.output import write_tables
from ppsweep.paper.report import render, report_values
from ppsweep.paper.sweeps import run_or_load
from ppsweep.paper.verdict import verdicts


def measured_of(*results: findings.Finding) -> dict[str, dict[str, pd.Series]]:
    """The findings' measured numbers, merged by claim id (each claim is measured by one finding)."""
    out: dict[str, dict[str, pd.Series]] = {}
    for result in results:
        for cid, by_choice in result.measured.items():
            if cid in out:
                raise ValueError(f"claim {cid!r} measured by two findings")
            out[cid] = by_choice
    return out


def run(out: Path, overrides: Sequence[str] = (), fresh: bool = False, log: Callable[[str], None] = print) -> pd.DataFrame:
    """Run (or reuse) the sweeps and write every file of ``out``.

    Args:
      out: output directory (results/paper).
      overrides: Hydra overrides for both sweeps.
      fresh: recompute the stores from scratch.
      log: progress messages.

    Returns:
      The verdict table.
    """
    ds, spec = run_or_load("paper", overrides, fresh, log)
    asym, spec_asym = run_or_load("paper_asym", overrides, fresh, log)
    findings.check_spec(spec)
    results = [findings.finding1(ds, spec), findings.finding2(ds, spec), findings.finding3(ds, spec),
               findings.finding4(ds, spec), findings.finding5(ds, asym, spec)]
    for k, result in enumerate(results, 1):
        write_tables(out, result.stem, result.title, result.csv, result.sections)
        for stem, frame in result.extra_csv.items():
            frame.to_csv(out / f"{stem}.csv", index=False, float_format="%.6g")
        write_figure(out, result, spec)
        log(f"finding {k} written")
    table = verdicts(CLAIMS, measured_of(*results))
    values = report_values(spec, dict(points=spec.n_points, points_asym=spec_asym.n_points), *results, table)
    (out / "REPORT.md").write_text(render(values))
    return table
