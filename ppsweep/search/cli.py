"""``python -m ppsweep.search``: search a schedule space for a point or a region and write the results.

Examples::

    # the zero-bubble paper's 1.5B model (Table 9: p=8, m=24), cap 2p M_B, its bubble rate
    python -m ppsweep.search --space a --p 8 --m 24 --t-f 18.522 --t-i 18.086 --t-w 9.337 \\
        --latency 0.601 --cap 16 --w-share 0.366 --objective bubble --out results/search.zarr --csv best.csv

    # a region: mean step time over a grid of latencies and bandwidths
    python -m ppsweep.search --space c --p 4 --m 8 --t-f 1e-3 --t-i 1e-3 --t-w 1e-3 --msg-bytes 1e7 \\
        --latency 1e-6,1e-5 --bandwidth 1e9,1e10,1e11 --cap 4 --objective worst

Costs (seconds per microbatch of a whole worker stage, or one value per profiled stage,
comma-separated) come from ``--t-f/--t-i/--t-w`` or from a profiled-costs file (``--profile``,
:mod:`ppsweep.cost_profile`). It prints the winners, the hand-made schedules and the margin, writes
the store (:mod:`ppsweep.search.store`) and, with ``--csv``, the winner as a PyTorch pipeline CSV
checked with PyTorch's loader (:mod:`ppsweep.search.export`).
"""

from __future__ import annotations

import argparse
import sys

from ppsweep.cli.support import UsageError, command_parser, run_command


def _numbers(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    from ppsweep.search.region import OBJECTIVES
    from ppsweep.search.spaces import SPACES

    parser = command_parser("search", "Search a space of schedules for a point or a region (ppsweep.search).")
    parser.add_argument("--space", default="a", choices=sorted(SPACES), help="schedule space (default a)")
    parser.add_argument("--p", type=int, required=True, help="workers (>= 2)")
    parser.add_argument("--m", type=int, required=True, help="microbatches (>= 1)")
    parser.add_argument("--t-f", type=_numbers, help="forward seconds per microbatch (one, or one per stage)")
    parser.add_argument("--t-i", type=_numbers, help="input-gradient seconds per microbatch")
    parser.add_argument("--t-w", type=_numbers, help="weight-gradient seconds per microbatch")
    parser.add_argument("--profile", help="profiled-costs file (ppsweep.cost_profile) instead of --t-f/--t-i/--t-w")
    parser.add_argument("--latency", type=_numbers, help="message latency, s (a list: a grid axis; default 0)")
    parser.add_argument("--bandwidth", type=_numbers, help="bytes/s (a list: a grid axis; default inf)")
    parser.add_argument("--msg-bytes", type=float, default=0.0, help="bytes per message (default 0)")
    parser.add_argument("--mode", default="overlap", help="communication mode (default overlap)")
    parser.add_argument("--noise-cv", type=float, default=0.0, help="lognormal compute jitter cv (0: no noise)")
    parser.add_argument("--samples", type=int, default=0, help="noise samples per point (with --noise-cv)")
    parser.add_argument("--seed", type=int, default=0, help="noise seed")
    parser.add_argument("--cap", type=float, help="peak activations cap per worker, M_B (or bytes with a profile's memory)")
    parser.add_argument("--w-share", type=float, default=1.0,
                        help="share of an activation kept from I to W (zero-bubble paper: M_W/M_B; default 1)")
    parser.add_argument("--objective", default="mean", choices=OBJECTIVES, help="what to minimize (default mean)")
    parser.add_argument("--budget", type=int, default=2000, help="most candidates evaluated (default 2000)")
    parser.add_argument("--top", type=int, default=5, help="winners kept (default 5)")
    parser.add_argument("--out", default="results/search.zarr", help="zarr store to write (default results/search.zarr)")
    parser.add_argument("--csv", help="write the winner as a PyTorch pipeline CSV here (checked with PyTorch's loader)")
    return parser


def _region(args: argparse.Namespace):
    from ppsweep.engine.noise import Jitter, NoiseConfig
    from ppsweep.search.region import Region

    noise = None
    if args.noise_cv or args.samples:
        if args.samples < 1 or args.noise_cv <= 0:
            raise UsageError("noise: give both --noise-cv > 0 and --samples >= 1")
        noise = NoiseConfig(samples=args.samples, seed=args.seed, compute=Jitter("lognormal", args.noise_cv))
    grid = {k: v for k, v in (("latency", args.latency), ("bandwidth", args.bandwidth)) if v is not None}
    if args.profile:
        if args.t_f or args.t_i or args.t_w:
            raise UsageError("give either --profile or --t-f/--t-i/--t-w, not both")
        from ppsweep.cost_profile import load_cost_profile

        return Region.from_profile(load_cost_profile(args.profile), noise=noise, mode=args.mode, w_share=args.w_share,
                                   **grid)
    missing = [k for k in ("t_f", "t_i", "t_w") if getattr(args, k) is None]
    if missing:
        raise UsageError(f"--{missing[0].replace('_', '-')}: required without --profile (seconds per microbatch)")
    return Region.of(args.t_f, args.t_i, args.t_w, msg_bytes=args.msg_bytes, mode=args.mode, noise=noise,
                     w_share=args.w_share, **grid)


def _run(args: argparse.Namespace) -> str:
    from ppsweep.search.driver import search
    from ppsweep.search.store import write_result

    region = _region(args)
    result = search(args.space, args.p, args.m, region, cap=args.cap, objective=args.objective, budget=args.budget,
                    top=args.top)
    lines = [result.summary()]
    path = write_result(result, region, args.out, inputs=vars(args))
    lines.append(f"wrote {path}")
    if args.csv and result.best:
        from ppsweep.search.export import check_with_torch, export_csv
        from ppsweep.tables.build import build_schedule

        table = build_schedule(result.best[0].label, args.p, args.m)
        csv_path = export_csv(table, args.csv)
        try:
            actions = check_with_torch(csv_path, table.p, table.n_stages, table.m)
            lines.append(f"wrote {csv_path} (PyTorch's _load_csv: valid, {actions} actions with communication)")
        except ImportError:
            lines.append(f"wrote {csv_path} (not checked: torch is not installed)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0, or 2 after one ``error:`` line on stderr)."""
    return run_command(lambda: _run(_parser().parse_args(argv)), (ValueError, OSError))


if __name__ == "__main__":
    sys.exit(main())
