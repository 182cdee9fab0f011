"""``python -m ppsweep.verify STORE [--repair]``: check everything a reader of a store sees.

The layout (coordinates, every array's metadata, the store's attributes) is compared with the
integrity record written with it (:mod:`ppsweep.store.integrity`), and every finished unit with
its checksum (:func:`ppsweep.store.units.unit_checksum`, keyed by the unit's place and the
store's fingerprint; a unit whose ``done`` chunk is unreadable counts as damaged too):

- all match: one line, exit 0;
- anything wrong (a coordinate rewritten, ``scale_factor`` added to a variable, an attribute
  edited, a chunk deleted or truncated, units swapped or copied from another store): one
  ``error:`` line naming it, exit 1;
- ``--repair``: check the recorded config first (:func:`recorded_spec`: nothing is imported or
  evaluated before it matches the store), rewrite coordinates, metadata and attributes from it,
  recompute the damaged units, then verify again; exit 0 when the store is whole.

Bad input (no store, not a ppsweep store) is one ``error:`` line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ppsweep.cli.support import UsageError, command_parser, check_arguments, display


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("verify", "Check every finished unit of a ppsweep store against its checksum; --repair recomputes damaged ones.",
                            "results/bandwidth.zarr --repair", store=True)
    parser.add_argument("--repair", action="store_true", help="recompute damaged units from the store's recorded config")
    return parser


def verify(path: str | Path, repair: bool = False) -> tuple[int, str]:
    """Check (and with ``repair``, fix) the store at ``path``.

    Args:
      path: the ``.zarr`` directory.
      repair: rewrite coordinates, metadata and attributes from the recorded config and
        recompute damaged units (:func:`recorded_spec` checks the config first).

    Returns:
      ``(status, line)``: 0 and a summary when the layout matches its integrity record and every
      finished unit its checksum (after repair, if asked); 1 and one ``error:`` line naming what
      is wrong otherwise (coordinates, metadata, attributes, units).

    Raises:
      StoreError: no store, not a ppsweep store, or (``repair``) a store that cannot be
        repaired by this code (another code version, changed input files, edited config).
    """
    from ppsweep.store.integrity import layout_problems
    from ppsweep.store.integrity import damage_line
    from ppsweep.store.layout import restore_layout
    from ppsweep.store.open import open_store
    from ppsweep.store.units import damaged_units, describe_units, done_units, unreadable_done_units

    def damage(group) -> list[tuple[int, int]]:  # checksum mismatches and unreadable done flags
        return sorted(set(damaged_units(group)) | set(unreadable_done_units(group)))

    path = Path(path)
    group = open_store(path)
    problems = layout_problems(path)
    damaged = damage(group)
    repaired = 0
    if (problems or damaged) and repair:
        spec, config_yaml = recorded_spec(path)
        if problems:
            restore_layout(path, spec)
            problems = layout_problems(path)
        group = open_store(path)
        damaged = damage(group)
        if damaged and not problems:
            repaired = _recompute(path, spec, config_yaml, damaged)
            group = open_store(path)
            damaged = damage(group)
    done = done_units(group)
    where = display(path)
    advice = "" if repair else f"; python -m ppsweep.verify {where} --repair {'restores it' if problems else 'recomputes them'}"
    if problems or damaged:
        parts = [damage_line(problems)] if problems else []
        if damaged:
            parts.append(
                f"{len(damaged)} damaged unit{'s' if len(damaged) > 1 else ''} {describe_units(group, damaged)}: "
                "chunks unreadable or not matching their checksums"
            )
        return 1, f"error: {where}: {'; '.join(parts)}{advice}"
    line = f"{where}: coordinates, metadata and attributes as recorded; {int(done.sum())} finished units match their checksums"
    if repaired:
        line += f" ({repaired} repaired)"
    if not done.all():
        line += f"; {int((~done).sum())} of {done.size} units not yet computed (re-run the sweep to finish it)"
    return 0, line


def recorded_spec(path: Path) -> tuple[Any, str]:
    """The sweep of the store at ``path`` from its recorded config, checked before anything runs.

    In this order, each refusal one line: the recorded attributes are trusted (they match the
    integrity record, :func:`ppsweep.store.integrity.trusted_attributes`); the store was written by
    this code (the identity's ``code`` digest); every recorded input file (user schedules, input
    files of the config) still has the digest recorded, at the absolute path recorded; the
    config holds no interpolation (it was stored resolved). Only then is the config evaluated,
    with user schedules loaded from their recorded absolute paths (never a relative import), in
    the recorded ``base_dir``; its fingerprint must equal the store's.

    Returns:
      ``(spec, config_yaml)``.

    Raises:
      StoreError: naming what prevents the repair.
    """
    from omegaconf import OmegaConf

    from ppsweep.disk_cache import code_digest, file_digest
    from ppsweep.schedules.user import pin_schedule_files
    from ppsweep.store.integrity import trusted_attributes
    from ppsweep.store.errors import StoreError
    from ppsweep.store.identity import fingerprint, identity, identity_difference
    from ppsweep.sweep.config import spec_from_config

    trusted = trusted_attributes(path)
    if trusted is None:
        raise StoreError(f"{path}: cannot repair: its attributes and its integrity record were both edited; re-run the sweep with overwrite=true")
    try:
        stored = json.loads(trusted["identity"])
    except (TypeError, ValueError):
        raise StoreError(f"{path}: cannot repair: its recorded identity is unreadable; re-run the sweep with overwrite=true") from None
    if stored.get("code") != code_digest():
        raise StoreError(
            f"{path}: cannot repair: written by another version of ppsweep's code (code digest {stored.get('code')}, "
            f"this code {code_digest()}); re-run the sweep with overwrite=true"
        )
    inputs = stored.get("inputs") or {}
    for label, entry in sorted(inputs.items()):
        file = Path(str(entry.get("path", "")))
        if not file.is_absolute() or not file.is_file() or file_digest(file) != entry.get("sha256"):
            raise StoreError(
                f"{path}: cannot repair: input {label} ({file}) is missing or changed since the store was written; "
                "restore it, or re-run the sweep with overwrite=true"
            )
    config_yaml = str(trusted.get("config") or "")
    if "${" in config_yaml:
        raise StoreError(f"{path}: cannot repair: the recorded config holds an interpolation (${{...}}); a store records its config resolved")
    pin_schedule_files({label: entry["path"] for label, entry in inputs.items()})
    base_dir = trusted.get("base_dir")
    here = os.getcwd()
    try:
        if base_dir and os.path.isdir(base_dir):
            os.chdir(base_dir)
        spec = spec_from_config(OmegaConf.create(config_yaml))
    except Exception as error:  # noqa: BLE001 - any unusable recorded config gets one line
        raise StoreError(f"{path}: cannot repair: the recorded config is not usable ({error})") from None
    finally:
        os.chdir(here)
    if fingerprint(spec) != trusted.get("fingerprint"):
        raise StoreError(
            f"{path}: cannot repair: its recorded config does not reproduce the store's identity "
            f"({identity_difference(stored, identity(spec))}); re-run the sweep with overwrite=true"
        )
    return spec, config_yaml


def _recompute(path: Path, spec: Any, config_yaml: str, damaged: list[tuple[int, int]]) -> int:
    """Recompute ``damaged`` units of ``spec``; returns how many were recomputed."""
    from ppsweep.sweep.runner import configure_jax, run_sweep

    configure_jax(None)
    report = run_sweep(spec, path, config_yaml, progress=False, units=damaged)
    return report.units_run


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0 whole, 1 damaged, 2 bad input)."""
    status = check_arguments(_parser(), argv)
    if status is not None:
        return status
    args = _parser().parse_args(argv)
    from ppsweep.store.errors import StoreError

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
