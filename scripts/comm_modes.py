"""Step time of each seed schedule at p=8, m=16 in every communication mode, on three systems.

    python scripts/comm_modes.py [--p 8] [--m 16] [--systems baseline mid_cp_slow_nw fast_cp_slow_nw]

Prints t_sim and comm_time per mode, and each mode's difference to ``overlap``.
"""

from __future__ import annotations

import argparse

from ppsweep import build_schedule
from ppsweep.tables.build import why_unsupported
from ppsweep.sweep.config import load_config
from ppsweep.cost_model import stage_costs
from ppsweep.engine.core import MODES, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", type=int, default=8)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--model", default="megatron_128l")
    parser.add_argument("--schedules", nargs="+", default=["gpipe", "1f1b", "chimera", "hanayo"])
    parser.add_argument("--systems", nargs="+", default=["baseline", "mid_cp_slow_nw", "fast_cp_slow_nw"])
    args = parser.parse_args()
    model = load_config(["name=comm_modes", f"model={args.model}"]).model
    print(f"p={args.p} m={args.m} model={args.model}: t_sim (difference to overlap) and comm_time per mode")
    for system_name in args.systems:
        system = load_config(["name=comm_modes", f"system={system_name}"]).system
        for name in args.schedules:
            if why_unsupported(name, args.p, args.m):
                continue
            table = build_schedule(name, args.p, args.m)
            c = stage_costs(model, system, table)
            cells = []
            overlap = None
            for mode in MODES:
                r = simulate(table, c.t_f[0], c.t_b[0], system.latency, system.bandwidth, c.msg_bytes, mode,
                             t_i=c.t_i[0], t_w=c.t_w[0], grad_bytes=c.grad_bytes, t_opt=system.optimizer_time)
                t = float(r.t_sim)
                overlap = overlap or t
                cells.append(f"{mode} {t:8.4f} s ({100 * (t / overlap - 1):+6.2f} %, comm {float(r.comm_time):.3f} s)")
            print(f"{system_name:16s} {name:8s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
