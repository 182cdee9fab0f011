"""The envelope kernel alone: points/s of ``simulate(..., backend="auto", finish=False)`` at p=8, m=32.

Usage (from a checkout's root, so that its ``ppsweep`` is imported; the script may live elsewhere,
e.g. to time an older checkout against this one, alternately, on a shared machine):

    python scripts/bench_envelope.py [MODE] [--reps N]

A 1000 × 1000 bandwidth × latency grid of the cost model ``megatron_128l`` on ``baseline``
(as ``scripts/bench.py``), float64, each seed schedule, then the four mixed (equal points
each: total points / total time), from the fastest of ``--reps`` warm calls (on a shared
machine other work only slows a call down, so the fastest is the figure to compare); per
wall-clock second and per CPU second of the process (all its threads).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))  # that checkout's bench.py (it puts its root first)

import numpy as np  # noqa: E402

import bench  # noqa: E402
from ppsweep.tables.build import build_schedule  # noqa: E402
from ppsweep.engine.core import simulate  # noqa: E402

SCHEDULES = ("gpipe", "1f1b", "chimera", "hanayo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", default="overlap", help="comm.mode (default overlap)")
    parser.add_argument("--reps", type=int, default=7, help="warm calls per schedule (the fastest counts)")
    args = parser.parse_args()
    model, system = bench.configs()
    seconds = {}
    for name in SCHEDULES:
        table = build_schedule(name, 8, 32)
        eargs, kw = bench.grid_args(table, model, system, 1000, 1000)

        def run():
            return simulate(*eargs, args.mode, backend="auto", dtype=np.float64, finish=False, **kw)

        run()  # the programme and the compilation
        wall, cpu = [], []
        for _ in range(args.reps):
            t0, c0 = time.perf_counter(), time.process_time()
            run()
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        seconds[name] = (min(wall), min(cpu))
    for i, what in enumerate(("wall", "CPU")):
        rates = " ".join(f"{name} {1e6 / s[i] / 1e6:.0f}M" for name, s in seconds.items())
        mixed = len(SCHEDULES) * 1e6 / sum(s[i] for s in seconds.values())
        print(f"{Path(os.getcwd()).name} {args.mode}, points per {what} second: {rates} mixed {mixed / 1e6:.0f}M")


if __name__ == "__main__":
    main()
