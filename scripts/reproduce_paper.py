#!/usr/bin/env python
"""Reproduce the seed paper's findings with ppsweep and judge them claim by claim.

    python scripts/reproduce_paper.py            # run (or reuse) the sweeps, write results/paper/
    python scripts/reproduce_paper.py --fresh    # recompute the sweeps from scratch
    python scripts/reproduce_paper.py --override engine.compilation_cache=null   # Hydra overrides

Seed paper: "A Tabular Schedule Abstraction for Communication-Aware Evaluation of Pipeline-Parallel
LLM Training" (Barley, Leis, Klenk, Fröning, ISPDC 2026). The work is done by ``ppsweep.paper``:

1. ``sweeps``: runs ``conf/sweep/paper.yaml`` and ``conf/sweep/paper_asym.yaml`` through the sweep
   config path into ``results/paper.zarr`` and ``results/paper_asym.zarr`` (git-ignored; a complete
   store is reused) and the single-assumption runs through ``ppsweep.engine.core.simulate``;
2. ``findings``: one function per finding, returning its tables and measured numbers;
3. ``verdict``: every verdict, from the claims table (``claims``) and the measured numbers;
4. ``figures`` and ``report``: the PNGs and ``results/paper/REPORT.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's ppsweep, when run as a script

from ppsweep.paper import reproduce  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and write the report; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="recompute the sweeps' stores from scratch")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="Hydra override for both sweeps (repeatable), e.g. engine.compilation_cache=null")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "paper", help="output directory (default results/paper)")
    args = parser.parse_args(argv)
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    reproduce.run(args.out, args.override, args.fresh, log)
    log(f"done: {args.out} (total {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
