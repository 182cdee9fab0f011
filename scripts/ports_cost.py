"""What the `ports` mode costs against the others, table by table (README "Communication modes").

For the tables of ``conf/sweep/bandwidth.yaml`` (GPipe, 1F1B, Chimera, Hanayo; p 4, 8; m 8 … 64)
and one 64 × 5 bandwidth × latency grid, prints per mode the time of the routing
(:func:`ppsweep.engine.comm.route`), the time of ``simulate`` (envelope build and evaluation, or the
scan with its compilation where a table passes the envelope's cap) and the tables that went to
the scan. Run: ``python scripts/ports_cost.py`` (modes in the order given: the first one also
pays the envelope evaluation's one-time compilation).
"""

from __future__ import annotations

import sys
import time

import numpy as np

import ppsweep
from ppsweep.tables.build import UnsupportedPointError
from ppsweep.engine.comm import route
from ppsweep.engine.core import simulate
from ppsweep.engine.program import compile_program


def main(modes: list[str]) -> None:
    """Print the routing and simulation time of every mode in ``modes`` over the bandwidth sweep's tables."""
    tables = []
    for name in ("gpipe", "1f1b", "chimera", "hanayo"):
        for p in (4, 8):
            for m in (8, 12, 16, 32, 64):
                try:
                    tables.append((f"{name} p={p} m={m}", ppsweep.build_schedule(name, p, m)))
                except UnsupportedPointError:
                    pass
    beta = np.logspace(9, 12, 64)[:, None] * np.ones(5)
    alpha = np.ones(64)[:, None] * np.array([1e-7, 5e-7, 1e-6, 5e-6, 1e-5])
    for mode in modes:
        routing = evaluate = 0.0
        scanned = []
        for label, table in tables:
            program = compile_program(table)
            t0 = time.perf_counter()
            route(program, mode)
            t1 = time.perf_counter()
            r = simulate(table, 1e-3, 2e-3, alpha, beta, 5e6, mode)
            routing, evaluate = routing + t1 - t0, evaluate + time.perf_counter() - t1
            if r.method == "scan":
                scanned.append(label)
        print(f"{mode}: {len(tables)} tables, route {routing:.2f} s, simulate {evaluate:.1f} s, "
              f"on the scan: {len(scanned)} ({', '.join(scanned) or '-'})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["overlap", "contention", "ports"])
