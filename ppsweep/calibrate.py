"""``python -m ppsweep.calibrate TRACE [TRACE ...] [--out costs.yaml]``: per-stage costs fitted from traces.

TRACE: a Chrome/Perfetto JSON trace (PyTorch's profiler, one file per rank or merged; or ppsweep's
own, ``python -m ppsweep.trace ... --trace``) or a folder of them. Prints the fit and writes a
profiled-costs file (``ppsweep-costs/1``, :mod:`ppsweep.cost_profile`) with ``--out``. The fitting
rules: :mod:`ppsweep.measure.calibrate`. Bad input prints one line ``error: ...`` and exits with 2.
"""

from __future__ import annotations

import sys

from ppsweep.cli.support import command_parser, run_command


def _run(argv: list[str] | None) -> str:
    from ppsweep.cost_profile import write_cost_profile
    from ppsweep.measure.calibrate import fit_trace

    parser = command_parser("calibrate", __doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", metavar="TRACE", help="trace JSON file(s) or folder(s)")
    parser.add_argument("--out", metavar="PATH", help="write the profiled-costs file (YAML)")
    args = parser.parse_args(argv)
    fit = fit_trace(args.traces)
    text = fit.summary()
    if args.out:
        try:
            write_cost_profile(fit.profile, args.out)
        except OSError as error:
            raise ValueError(f"--out: cannot write {args.out!r}: {error.strerror or error}") from None
        text += f"\nwrote {args.out}"
    return text


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0, or 2 after one ``error:`` line)."""
    return run_command(lambda: _run(argv), (ValueError,))


if __name__ == "__main__":
    sys.exit(main())
