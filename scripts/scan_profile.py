"""Where a sweep's compiled scans spend their time: by mode and p, then by schedule family.

    python scripts/scan_profile.py                        # +sweep=design (about 2 minutes, one evaluator)
    python scripts/scan_profile.py +sweep=bandwidth p=[8]  # any sweep, with Hydra overrides

The sweep runs in this process with one evaluator (``engine.workers=1``), its table and engine
caches empty (a temporary directory, unless ``--caches DIR``), inside
:func:`ppsweep.engine.scan_tally.tallied`, after numba's kernels are compiled (or loaded), so that
the seconds are the loop's. For each ``(mode, p)`` it prints the scans (pairs of a
table and a mode the envelope did not take), the seconds in the compiled loop (summed over its
threads), the share of the tables' waves × points the loop computed (``scanned``: the periodic scan
stepped over the rest) and the steps over a run per point (``steps/pt``: one a point and run, so a
table with two runs can pass 1). Then the same by schedule family (a variant with options, such as
``chimera@split=1:2``, counts under its family). A point that
never steps is scanned through every wave; one that steps still scans the table's fill and drain,
the spans its check needs before the step and the span it checks after it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path


def _share(part: int, whole: int) -> str:
    return f"{part / whole:6.2f}" if whole else "     -"


def _print_table(title: str, rows: dict, total_seconds: float) -> None:
    print(f"\n{title:<24} {'scans':>6} {'seconds':>8} {'of all':>7} {'scanned':>8} {'steps/pt':>8}")
    for key in sorted(rows):
        t = rows[key]
        print(f"{str(key):<24} {t.scans:6d} {t.seconds:8.2f} {t.seconds / total_seconds:7.1%} "
              f"{_share(t.scanned, t.wave_points):>8} {_share(t.stepped, t.points):>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--caches", help="table and engine caches (default: empty ones in a temporary directory)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (default: +sweep=design)")
    args = parser.parse_args()
    overrides = args.overrides or ["+sweep=design"]
    with tempfile.TemporaryDirectory() as tmp:
        caches = Path(args.caches or tmp)
        os.environ["PPSWEEP_TABLE_CACHE"] = str(caches / "tables")
        os.environ["PPSWEEP_ENVELOPE_CACHE"] = str(caches / "engine")
        from ppsweep.engine.kernels import compile_kernels
        from ppsweep.engine.scan_tally import ScanTally, tallied
        from ppsweep.sweep.config import load_plan
        from ppsweep.sweep.parallel import configure_jax
        from ppsweep.sweep.runner import run_sweep

        plan = load_plan(overrides)
        configure_jax(None)
        # numba's kernels first: else the first scan's seconds hold the scan kernel's compiling (measured:
        # 15.8 s of the design sweep's 58.9, all under interleaved 1F1B at p = 2 in contention)
        compile_kernels(None)
        start = time.perf_counter()
        with tallied() as tally:
            run_sweep(plan.spec, Path(tmp) / "profile.zarr", plan.config_yaml, progress=False, workers=1)
        wall = time.perf_counter() - start

    total = sum(t.seconds for t in tally.values())
    print(f"sweep {plan.spec.name}: {wall:.1f} s end to end (one evaluator), {total:.1f} s in the compiled scan "
          f"over {sum(t.scans for t in tally.values())} scans")
    by_mode_p: dict = defaultdict(ScanTally)
    by_schedule: dict = defaultdict(ScanTally)
    for (schedule, p, mode), t in tally.items():
        by_mode_p[(mode, p)].add(t)
        by_schedule[schedule].add(t)
    if not total:
        print("no compiled scan ran (the envelope took every pair, or another backend ran)")
        return
    _print_table("(mode, p)", by_mode_p, total)
    _print_table("schedule", by_schedule, total)


if __name__ == "__main__":
    sys.exit(main())
