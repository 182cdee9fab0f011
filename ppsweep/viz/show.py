"""``python -m ppsweep.show``: build one schedule table and look at it.

Forms::

    python -m ppsweep.show SCHEDULE p=P m=M [OPTION=VALUE ...] [--csv PATH] [--f-slots N] [--b-slots N]
    python -m ppsweep.show --from-csv PATH [--csv PATH] [--f-slots N] [--b-slots N]
    python -m ppsweep.show --list

Examples: ``python -m ppsweep.show 1f1b p=4 m=8``,
``python -m ppsweep.show hanayo p=4 m=4 waves=2 --csv /tmp/h.csv``.

It prints one header line (schedule, p, m, options, T, bubble ratio by table and by formula,
peak activations by table and by formula) and then the grid of :func:`ppsweep.format_table`.
``--csv`` also writes the table in PyTorch's pipeline CSV convention
(:mod:`ppsweep.tables.interchange`). Values of ``key=value`` are ints where they parse as ints, else
strings (``split=1:2``). Bad input prints one line ``error: ...`` to stderr and exits with 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from ppsweep.cli.support import UsageError, command_parser, run_command
from ppsweep.tables.build import UnsupportedPointError, bubble_formula, build_schedule, peak_activations_formula
from ppsweep.tables.interchange import read_csv, write_csv
from ppsweep.schedules import SCHEDULES
from ppsweep.tables.table import ScheduleTable, format_table


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("show", "Build a pipeline schedule table and print it (see ppsweep.viz.show's docstring).",
                            "1f1b p=4 m=8 --csv /tmp/1f1b.csv")
    parser.add_argument("schedule", nargs="?", help="registered schedule name (see --list)")
    parser.add_argument("assignments", nargs="*", metavar="KEY=VALUE", help="p=P m=M and schedule options")
    parser.add_argument("--list", action="store_true", help="list the registered schedules and exit")
    parser.add_argument("--from-csv", metavar="PATH", help="show a table read from a PyTorch pipeline CSV")
    parser.add_argument("--csv", metavar="PATH", help="also write the table as a PyTorch pipeline CSV")
    parser.add_argument("--f-slots", type=int, default=1, metavar="N", help="slots per forward (default 1)")
    parser.add_argument("--b-slots", type=int, default=2, metavar="N", help="slots per backward (default 2)")
    return parser


def parse_value(text: str) -> int | str:
    """``text`` as an int where it parses as one, else the string itself."""
    try:
        return int(text)
    except ValueError:
        return text


#: The sweep's key names that name one of these commands' keys (``comm.mode=contention`` is ``mode=contention``).
SWEEP_KEYS = {"comm.mode": "mode"}


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """``["p=4", "m=8", "split=1:2"]`` → ``{"p": 4, "m": 8, "split": "1:2"}``.

    The sweep's spellings are taken too: a one-value list (``p=[4]``) is that value, and
    ``comm.mode=`` is ``mode=`` (:data:`SWEEP_KEYS`); a list of several values is one line (one point).
    """
    values: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = SWEEP_KEYS.get(key.strip().lstrip("+"), key.strip().lstrip("+"))
        if not sep or not key:
            raise UsageError(f"argument {item!r}: expected KEY=VALUE (e.g. p=4, m=8, waves=2)")
        if key in values:
            raise UsageError(f"{key}: given twice")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            inside = [part.strip() for part in value[1:-1].split(",") if part.strip()]
            if len(inside) != 1:
                raise UsageError(f"{key}: one point, one value (e.g. {key}={inside[0] if inside else 4}), got {value}")
            value = inside[0]
        values[key] = parse_value(value)
    return values


def _list_schedules() -> str:
    lines = []
    width = max((len(name) for name in SCHEDULES), default=0)
    for name, schedule in SCHEDULES.items():
        options = ", ".join(f"{k}={v}" for k, v in schedule.option_names.items()) or "none"
        lines.append(f"{name:<{width}}  {schedule.description}  [options: {options}]")
    return "\n".join(lines)


def _number(value: float, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.{digits}f}"


def header(table: ScheduleTable, bubble_by_formula: float, peak_by_formula: float, source: str = "") -> str:
    """The one-line summary printed above the grid."""
    options = " ".join(f"{k}={v}" for k, v in table.options.items()) or "none"
    return (
        f"schedule={table.name}{source} p={table.p} m={table.m} options: {options} "
        f"(f_slots={table.f_slots}, b_slots={table.b_slots}) | T={table.length} | "
        f"bubble: table {_number(table.bubble_ratio())}, formula {_number(bubble_by_formula)} | "
        f"peak activations: table {table.peak_activations()}, formula {_number(peak_by_formula)}"
    )


def _run(args: argparse.Namespace) -> str:
    """Everything but printing errors: returns the text to print."""
    if args.list:
        return _list_schedules()
    if args.from_csv is not None:
        if args.schedule is not None:
            raise UsageError(f"give either SCHEDULE or --from-csv, not both (got SCHEDULE {args.schedule!r})")
        try:
            table = read_csv(args.from_csv, f_slots=args.f_slots, b_slots=args.b_slots)
        except OSError as exc:
            raise UsageError(f"--from-csv: cannot read {args.from_csv!r}: {exc.strerror or exc}") from None
        text = header(table, math.nan, math.nan, source=f" (from {args.from_csv})")
    else:
        if args.schedule is None:
            raise UsageError(
                f"SCHEDULE: required, one of {', '.join(SCHEDULES)} (or --list, or --from-csv PATH)"
            )
        values = parse_assignments(args.assignments)
        for field in ("p", "m"):
            if field not in values:
                raise UsageError(f"{field}: required, give {field}=N (p >= 2, m >= 1), e.g. p=4 m=8")
        p, m = values.pop("p"), values.pop("m")
        from ppsweep.sweep.estimate import check_table

        check_table(args.schedule, p, m, args.f_slots, args.b_slots, **values)  # before building it
        table = build_schedule(args.schedule, p, m, f_slots=args.f_slots, b_slots=args.b_slots, **values)
        text = header(
            table,
            bubble_formula(args.schedule, table.p, m, **values),  # m as given: a table may run
            peak_activations_formula(args.schedule, table.p, m, **values),  # half-microbatches (2m)
        )
    text += "\n" + format_table(table)
    if args.csv is not None:
        try:
            write_csv(table, args.csv)
        except OSError as exc:
            raise UsageError(f"--csv: cannot write {args.csv!r}: {exc.strerror or exc}") from None
        text += f"\nwrote {args.csv} (PyTorch pipeline CSV: {table.p} rows, {table.length} columns)"
    return text


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0, or 2 after one ``error:`` line on stderr)."""
    return run_command(lambda: _run(_parser().parse_intermixed_args(argv)), (UnsupportedPointError, ValueError, TypeError))


if __name__ == "__main__":
    sys.exit(main())
