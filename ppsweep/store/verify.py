"""``python -m ppsweep.verify STORE [--repair]``: check every finished unit of a store against its checksum.

Each unit's checksum (:func:`ppsweep.store.results.unit_checksum`) is written just before its ``done``
flag. ``verify`` reads every finished unit back and compares (a unit whose ``done`` chunk is
unreadable counts as damaged too):

- all match: one line, exit 0;
- some damaged (a chunk deleted, truncated, overwritten): one ``error:`` line naming them, exit 1;
- ``--repair``: recompute the damaged units from the config recorded in the store (refused when
  that config no longer reproduces the store's identity, e.g. another ppsweep version), then
  verify again; exit 0 when the store is whole.

Bad input (no store, not a ppsweep store) is one ``error:`` line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppsweep.cli.support import OneLineParser, UsageError, check_arguments, display


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m ppsweep.verify",
        allow_abbrev=False,
        description="Check every finished unit of a ppsweep store against its checksum; --repair recomputes damaged ones.",
        epilog="example: python -m ppsweep.verify results/bandwidth.zarr --repair",
    )
    parser.add_argument("store", help="a results store written by python -m ppsweep (results/<name>.zarr)")
    parser.add_argument("--repair", action="store_true", help="recompute damaged units from the store's recorded config")
    return parser


def verify(path: str | Path, repair: bool = False) -> tuple[int, str]:
    """Check (and with ``repair``, fix) the store at ``path``.

    Args:
      path: the ``.zarr`` directory.
      repair: recompute damaged units from the store's recorded config.

    Returns:
      ``(status, line)``: 0 and a summary when every finished unit matches its checksum (after
      repair, if asked); 1 and an ``error:`` line naming the damaged units otherwise.

    Raises:
      StoreError: no store, not a ppsweep store, or (``repair``) a recorded config that does
        not reproduce the store's identity.
    """
    from ppsweep.store.results import damaged_units, describe_units, done_units, open_store, unreadable_done_units

    def damage(group) -> list[tuple[int, int]]:  # checksum mismatches and unreadable done flags
        return sorted(set(damaged_units(group)) | set(unreadable_done_units(group)))

    path = Path(path)
    group = open_store(path)
    damaged = damage(group)
    repaired = 0
    if damaged and repair:
        repaired = _repair(path, group, damaged)
        group = open_store(path)
        damaged = damage(group)
    done = done_units(group)
    where = display(path)
    if damaged:
        names = describe_units(group, damaged)
        advice = "" if repair else f"; python -m ppsweep.verify {where} --repair recomputes them"
        return 1, f"error: {where}: {len(damaged)} damaged unit{'s' if len(damaged) > 1 else ''} {names}: chunks unreadable or not matching their checksums{advice}"
    line = f"{where}: {int(done.sum())} finished units match their checksums"
    if repaired:
        line += f" ({repaired} repaired)"
    if not done.all():
        line += f"; {int((~done).sum())} of {done.size} units not yet computed (re-run the sweep to finish it)"
    return 0, line


def _repair(path: Path, group, damaged: list[tuple[int, int]]) -> int:
    """Recompute ``damaged`` from the store's recorded config; returns how many were recomputed."""
    from omegaconf import OmegaConf

    from ppsweep.sweep.config import spec_from_config
    from ppsweep.sweep.runner import configure_jax, run_sweep
    from ppsweep.store.results import StoreError, fingerprint

    config_yaml = str(group.attrs.get("config", ""))
    try:
        spec = spec_from_config(OmegaConf.create(config_yaml))
    except Exception as error:  # noqa: BLE001 - any unusable recorded config gets one line
        raise StoreError(f"{path}: cannot repair: the recorded config is not usable ({error})") from None
    if fingerprint(spec) != group.attrs.get("fingerprint"):
        raise StoreError(
            f"{path}: cannot repair: its recorded config does not reproduce the store's identity "
            "(written by another ppsweep version?); re-run the sweep with overwrite=true"
        )
    configure_jax(None)
    report = run_sweep(spec, path, config_yaml, progress=False, units=damaged)
    return report.units_run


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0 whole, 1 damaged, 2 bad input)."""
    status = check_arguments(_parser(), argv)
    if status is not None:
        return status
    args = _parser().parse_args(argv)
    from ppsweep.store.results import StoreError

    try:
        status, line = verify(args.store, args.repair)
    except (StoreError, UsageError) as error:
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: {args.store}: {error.strerror or error}", file=sys.stderr)
        return 1
    print(line, file=sys.stderr if status else sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main())
