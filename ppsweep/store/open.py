"""Opening a store: for a sweep (:func:`open_for_sweep`: create it or resume it, checked against the
sweep's identity and its integrity record, :func:`check_store`), and for reading
(:func:`open_results`: an xarray Dataset, after checking it; :func:`open_store`: the zarr group).

Resume (:func:`pending_units`), :func:`open_results` and ``python -m ppsweep.verify`` compare every
finished unit with its checksum (:func:`ppsweep.store.units.damaged_units`), and the layout
(coordinates, metadata, attributes) with the record written when it was created
(:mod:`ppsweep.store.integrity`); a re-run rewrites a damaged layout from the recorded config
(:func:`check_store`). ``overwrite`` replaces only a ppsweep store
(:func:`ppsweep.store.layout.is_ppsweep_store`), and never while another run is writing it
(:mod:`ppsweep.store.locks`).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zarr

from ppsweep.store.errors import IncompleteStoreWarning, StoreError
from ppsweep.store.identity import STORE_FORMAT, fingerprint, identity, identity_difference
from ppsweep.store.integrity import attribute_problems, damage_line, layout_problems
from ppsweep.store.layout import build_and_move, is_ppsweep_store, restore_layout
from ppsweep.store.locks import active_writers, registry_lock
from ppsweep.store.units import damaged_units, describe_units, done_units, unit_done, unreadable_done_units
from ppsweep.sweep.config import SweepSpec

if TYPE_CHECKING:
    import xarray as xr


def open_for_sweep(
    path: str | os.PathLike,
    spec: SweepSpec,
    config_yaml: str,
    overwrite: bool = False,
    units: list[tuple[int, int]] | None = None,
    say: Any = None,
) -> tuple[zarr.Group, list[tuple[int, int]]]:
    """Open (or create) the store of ``spec`` and list the units still to run.

    A store written by the same sweep resumes: finished units whose values match their checksum
    are skipped; damaged ones are run again. A store of another identity or format is refused,
    naming what differs. Safe to call from several processes at once (shards): the layout is
    created by exactly one of them. ``overwrite`` refuses while another run writes the store.

    Args:
      path: the ``.zarr`` directory.
      spec: the sweep.
      config_yaml: the resolved config, kept in the attributes of a new store.
      overwrite: replace whatever is at ``path`` with an empty layout first.
      units: the ``(p index, m index)`` units this caller is responsible for (a shard's);
        None: all of them.
      say: called with one line when a damaged layout is restored (:func:`check_store`).

    Returns:
      The open group and those of ``units`` not yet done (or damaged).

    Raises:
      StoreError: the store belongs to another sweep or format, is not a ppsweep store, or
        another run is writing it while ``overwrite`` asks to replace it.
    """
    path = Path(path)
    units = spec.units() if units is None else list(units)
    if overwrite:
        if (path.exists() or path.is_symlink()) and not is_ppsweep_store(path):
            raise StoreError(
                f"{path}: exists and is not a ppsweep store (no ppsweep metadata); overwrite=true replaces only "
                "a ppsweep store: choose another name=... or results_dir=..."
            )
        with registry_lock(path):
            writers = active_writers(path)
            if writers:
                raise StoreError(
                    f"{path}: another run is writing this store ({writers} writer{'s' if writers > 1 else ''} active); "
                    "overwrite=true refuses to replace it under them: wait for it to end, or stop it first"
                )
            build_and_move(path, spec, config_yaml, replace=True)
    elif not path.exists():  # replace=False: another process may have made it first
        build_and_move(path, spec, config_yaml, replace=False)
    group = check_store(path, spec, say)
    return group, pending_units(group, units)


def pending_units(group: zarr.Group, units: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Those of ``units`` not done, or done but damaged (:func:`damaged_units`).

    One unit (a run claiming it, :mod:`ppsweep.sweep.runner`) reads its own ``done`` chunk alone,
    not the whole ``done`` array.
    """
    if len(units) == 1:
        finished = [unit for unit in units if unit_done(group, *unit)]
    else:
        done = done_units(group)
        finished = [(i, j) for i, j in units if done[i, j]]
    damaged = set(damaged_units(group, finished)) if finished else set()
    return [unit for unit in units if unit not in finished or unit in damaged]


def check_store(path: str | os.PathLike, spec: SweepSpec, say: Any = None) -> zarr.Group:
    """Open the existing store at ``path`` for writing, if it is ``spec``'s.

    Its layout is checked against its integrity record first (:mod:`ppsweep.store.integrity`):
    damaged coordinates or array metadata are rewritten from the recorded config (the same sweep's:
    nothing a reader sees changes but the damage), with a line to ``say``; edited attributes are
    refused (``python -m ppsweep.verify --repair`` restores them).

    Raises:
      StoreError: unreadable, not a ppsweep store, another format, another sweep (naming the
        first setting that differs), or edited attributes.
    """
    path = Path(path)
    group = open_store(path, mode="r+")
    problems = layout_problems(path)
    if attribute_problems(problems):
        raise StoreError(f"{path}: {damage_line(attribute_problems(problems))}; {_REPAIR.format(path=path)}")
    attrs = dict(group.attrs)
    if attrs["fingerprint"] != fingerprint(spec):
        try:
            difference = identity_difference(json.loads(attrs.get("identity", "{}")), identity(spec))
        except (TypeError, ValueError):
            difference = "identity differs"
        raise StoreError(
            f"{path}: written by a different sweep ({difference}); "
            "pass overwrite=true to replace it, or choose another name=..."
        )
    if problems:
        with registry_lock(path):
            if layout_problems(path):  # another run may have restored it meanwhile
                restore_layout(path, spec)
        left = layout_problems(path)
        if left:
            raise StoreError(f"{path}: {damage_line(left)}; {_REPAIR.format(path=path)}")
        if say is not None:
            say(f"restored the layout from the recorded config: {damage_line(problems)}")
        group = open_store(path, mode="r+")
    return group


#: Advice after a damaged layout.
_REPAIR = "python -m ppsweep.verify {path} --repair restores it from the recorded config (overwrite=true recomputes the store)"


def open_store(path: str | os.PathLike, mode: str = "r") -> zarr.Group:
    """The zarr group of the ppsweep store at ``path``.

    Args:
      path: the ``.zarr`` directory.
      mode: zarr's open mode (``r`` or ``r+``).

    Returns:
      The open group.

    Raises:
      StoreError: one line: no store there, unreadable, not a ppsweep store, or another format.
    """
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: no such store; run a sweep first (python -m ppsweep +sweep=...)")
    try:
        group = zarr.open_group(str(path), mode=mode)
        attrs = dict(group.attrs)
    except Exception as error:  # noqa: BLE001 - any unreadable store gets the same advice
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise StoreError(f"{path}: not a readable ppsweep store ({type(error).__name__}: {reason}); choose another name=... or results_dir=...") from None
    if "fingerprint" not in attrs or "done" not in group:
        raise StoreError(f"{path}: not a ppsweep results store; choose another name=... or results_dir=...")
    if attrs.get("store_format") != STORE_FORMAT:
        raise StoreError(
            f"{path}: store format {attrs.get('store_format')!r} (ppsweep {attrs.get('ppsweep_version')}) "
            f"cannot be resumed by this ppsweep (format {STORE_FORMAT}); pass overwrite=true to recompute it"
        )
    return group


def missing_units(dataset: xr.Dataset) -> int:
    """Units of work not yet written in an opened results dataset."""
    return int((~dataset["done"].values).sum())


def open_results(path: str | os.PathLike, *, allow_incomplete: bool = True, verify: bool = True, chunks: Any = None) -> xr.Dataset:
    """Open a results store lazily with xarray, after checking it.

    Args:
      path: the ``.zarr`` directory.
      allow_incomplete: open an unfinished store with an :class:`IncompleteStoreWarning`
        saying how much is missing (its unfinished units read as NaN / not valid); if False,
        raise :class:`StoreError` instead.
      verify: check every finished unit against its checksum first (reads the whole store once).
      chunks: passed to :func:`xarray.open_zarr`: None (default) for no dask, ``{}`` for dask
        arrays with the store's own chunks (one per unit), or a mapping of dimension to size.

    Returns:
      The dataset (lazily loaded; dask-backed unless ``chunks`` is None).

    Raises:
      StoreError: no store, not a ppsweep store (or unreadable), or damaged units (named, with
        the command that repairs them); always one line.
    """
    path = Path(path)
    group = open_store(path)
    problems = layout_problems(path)
    if problems:  # coordinates, metadata or attributes: every value would be read wrong
        raise StoreError(f"{path}: {damage_line(problems)}; {_REPAIR.format(path=path)}")
    unreadable = unreadable_done_units(group)
    if unreadable:  # a damaged done chunk would raise inside the analysis later
        raise StoreError(
            f"{path}: the done flags of units {describe_units(group, unreadable)} are unreadable; "
            "re-run the sweep's command to recompute those units"
        ) from None
    if verify:
        damaged = damaged_units(group)
        if damaged:
            raise StoreError(
                f"{path}: {len(damaged)} damaged unit{'s' if len(damaged) > 1 else ''} {describe_units(group, damaged)}: "
                f"the chunks do not match the checksum written with them; "
                f"python -m ppsweep.verify {path} --repair recomputes them"
            )
    import xarray as xr  # here: writing a store needs neither xarray nor its imports (pandas, dask)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)
            dataset = xr.open_zarr(str(path), chunks=chunks)
    except Exception as error:  # noqa: BLE001 - one line whatever xarray or zarr raise
        reason = str(error).splitlines()[0] if str(error) else ""
        raise StoreError(f"{path}: not a readable ppsweep store ({type(error).__name__}: {reason})") from None
    missing = missing_units(dataset)
    if missing:
        total = int(dataset["done"].size)
        message = (
            f"{path}: sweep incomplete, {missing} of {total} (p, m) units missing "
            "(they read as NaN and not done); re-run the sweep's command to finish it"
        )
        if not allow_incomplete:
            raise StoreError(message)
        warnings.warn(message, IncompleteStoreWarning, stacklevel=2)
    return dataset


def describe(attrs: dict[str, Any]) -> str:
    """One line about a store's provenance."""
    return f"sweep {attrs.get('sweep')!r}, ppsweep {attrs.get('ppsweep_version')}, created {attrs.get('created')}"
