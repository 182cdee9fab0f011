"""The results store: one xarray Dataset in zarr per sweep (docs/contract.md §5), written unit by unit.

Layout: coordinates are written by xarray; every data variable is created empty (NaN, or False
for ``valid``) with one chunk per unit of work, and ``done`` ``(p, m)`` records which units are
complete. A unit writes its chunks, then marks itself done, so a store killed at any moment
reads back with every unfinished unit still NaN and marked not done. Re-running the same sweep
resumes with the units not done; a different grid or config is refused.

Concurrency (shards, :mod:`ppsweep.shards`): the layout is built in a temporary directory beside
the store and renamed into place, so it appears whole or not at all, and when several processes
create it at once exactly one rename wins and the others open the winner's (checking its
fingerprint). After that, each process writes only the chunks of its own units (and their
``done`` chunks): no two writers ever touch the same file. zarr writes every file to a
temporary name and renames it into place, so a kill, a full disk or an I/O error leaves each
chunk either old or new, never torn.

Root attributes: ``config`` (resolved YAML), ``ppsweep_version``, ``store_format``,
``fingerprint`` (hash of everything that shapes the numbers), ``created``, ``finished`` and
``complete``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
import uuid
import warnings
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr

from ppsweep.config import DIMENSIONS, SweepSpec, unit_region

#: Version of the store layout; a store of another format is refused.
STORE_FORMAT = 1

#: Variables of the results dataset (docs/contract.md §5): dims kind, units, long name.
#: Dimensions by kind: ``SweepSpec.dims_of(kind)`` ("point", "table", "memory": per recomputation mode).
VARIABLES: dict[str, tuple[str, str, str]] = {
    "t_sim": ("point", "s", "simulated step time"),
    "throughput": ("point", "sequences/s", "global batch / step time"),
    "idle_sim": ("point", "1", "idle fraction of the simulated step"),
    "comm_time": ("point", "s", "time the critical path spends in messages"),
    "rank_sim": ("point", "1", "rank by simulated step time among valid schedules (1 = best)"),
    "bubble_formula": ("table", "1", "closed-form bubble ratio"),
    "bubble_table": ("table", "1", "idle cells / cells of the idealized table"),
    "length_table": ("table", "slots", "slots of the idealized table"),
    "peak_activation_bytes": ("memory", "bytes", "bottleneck worker's peak activation memory"),
    "persistent_bytes": ("memory", "bytes", "bottleneck worker's parameters, gradients, optimizer state"),
    "peak_memory_bytes": ("memory", "bytes", "bottleneck worker's peak memory"),
    "rank_formula": ("table", "1", "rank by closed-form bubble among valid schedules (1 = best)"),
    "rank_table": ("table", "1", "rank by table bubble among valid schedules (1 = best)"),
}
#: The ``valid`` variable (boolean, table dimensions).
VALID = ("table", "1", "schedule can run at this point; other variables are NaN where False")
#: The ``fits`` variable (boolean; only in sweeps with a ``memory_capacity`` dimension).
FITS = ("fits", "1", "valid and the bottleneck worker's peak memory within memory_capacity")


def booleans(spec: SweepSpec) -> dict[str, tuple[str, str, str]]:
    """The boolean variables of ``spec``'s store: ``valid``, and ``fits`` with a capacity dimension."""
    return {"valid": VALID, **({"fits": FITS} if spec.memory_capacity is not None else {})}


class StoreError(RuntimeError):
    """A store that cannot be used as asked; the message says why and what to do."""


class IncompleteStoreWarning(UserWarning):
    """Opening a store whose sweep has not finished."""


def fingerprint(spec: SweepSpec) -> str:
    """Hash of every input that shapes the store's numbers (grid, costs, slots, options, dtype)."""
    from ppsweep import __version__

    data = {
        "coords": {k: [str(x) for x in v.tolist()] for k, v in spec.coords().items()},
        "model": asdict(spec.model),
        "system": asdict(spec.system),
        "options": spec.schedule_options,
        "slots": [spec.f_slots, spec.b_slots],
        "dtype": spec.dtype,
        "store_format": STORE_FORMAT,
        "version": __version__,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _consolidate(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # consolidated metadata is not yet part of the zarr 3 spec
        zarr.consolidate_metadata(str(path))


def create_store(path: str | os.PathLike, spec: SweepSpec, config_yaml: str) -> zarr.Group:
    """Create an empty store for ``spec`` at ``path``, replacing whatever is there.

    The new layout is built beside ``path`` and renamed into place; the old store (if any) is
    moved aside first and deleted after, so ``path`` never holds a half-built layout.

    Args:
      path: the ``.zarr`` directory.
      spec: the sweep.
      config_yaml: the resolved config, kept in the attributes.

    Returns:
      The open zarr group.
    """
    path = Path(path)
    _build_and_move(path, spec, config_yaml, fingerprint(spec), replace=True)
    return zarr.open_group(str(path), mode="r+")


def _build_and_move(path: Path, spec: SweepSpec, config_yaml: str, identity: str, replace: bool) -> bool:
    """Build the layout in a temporary directory and rename it to ``path``.

    Returns:
      True if this call put its layout in place; False if ``path`` already existed (another
      process won the race) and ``replace`` is False.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp = path.with_name(f".{path.name}.creating-{tag}")
    try:
        _write_layout(tmp, spec, config_yaml, identity)
        if replace and (path.exists() or path.is_symlink()):
            trash = path.with_name(f".{path.name}.replaced-{tag}")
            os.rename(path, trash)
            os.rename(tmp, path)
            shutil.rmtree(trash, ignore_errors=True)
            return True
        try:
            os.rename(tmp, path)
        except OSError as error:
            if error.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                return False
            raise
        return True
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _remove_stale_temporaries(path: Path, age_s: float = 3600.0) -> None:
    """Delete layouts that a killed process left half-built beside ``path`` (older than ``age_s``)."""
    now = time.time()
    for pattern in (f".{path.name}.creating-*", f".{path.name}.replaced-*"):
        for stale in path.parent.glob(pattern):
            try:
                if now - stale.stat().st_mtime > age_s:
                    shutil.rmtree(stale, ignore_errors=True)
            except OSError:
                pass


def _write_layout(path: Path, spec: SweepSpec, config_yaml: str, identity: str) -> None:
    """Coordinates, empty arrays (one chunk per unit), ``done`` and the attributes, at ``path``."""
    dataset = xr.Dataset(coords=spec.coords())
    for name in dataset.coords:
        if DIMENSIONS[name] is not None:
            dataset[name].attrs["units"] = DIMENSIONS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset.to_zarr(str(path), mode="w-", zarr_format=3, consolidated=False)
    group = zarr.open_group(str(path), mode="r+")
    for name, (kind, unit, long_name) in {**VARIABLES, **booleans(spec)}.items():
        dims = spec.dims_of(kind)
        shape = spec.shape(dims)
        chunks = tuple(1 if d in ("p", "m") else n for d, n in zip(dims, shape))  # one chunk per unit
        boolean = name in booleans(spec)
        group.create_array(
            name,
            shape=shape,
            chunks=chunks,
            dtype="bool" if boolean else "float64",
            fill_value=False if boolean else np.nan,
            dimension_names=dims,
            attributes={"units": unit, "long_name": long_name},
        )
    group.create_array(
        "done",
        shape=spec.shape(("p", "m")),
        chunks=(1, 1),
        dtype="bool",
        fill_value=False,
        dimension_names=("p", "m"),
        attributes={"long_name": "unit of work (p, m) completely written"},
    )
    from ppsweep import __version__

    group.attrs.update(
        {
            "sweep": spec.name,
            "config": config_yaml,
            "ppsweep_version": __version__,
            "store_format": STORE_FORMAT,
            "fingerprint": identity,
            "created": _now(),
            "complete": False,
            "schedule_options": _schedule_options(spec),
        }
    )
    _consolidate(path)


def _schedule_options(spec: SweepSpec) -> str:
    """JSON: every schedule coordinate value (a name or variant label) -> its resolved options."""
    from ppsweep.build import resolve_options

    resolved = {name: resolve_options(name, spec.options_for(name)) for name in spec.schedules}
    return json.dumps(resolved, sort_keys=True, default=str)


def open_for_sweep(
    path: str | os.PathLike,
    spec: SweepSpec,
    config_yaml: str,
    overwrite: bool = False,
    units: list[tuple[int, int]] | None = None,
) -> tuple[zarr.Group, list[tuple[int, int]]]:
    """Open (or create) the store of ``spec`` and list the units still to run.

    A store written by the same sweep resumes: finished units are skipped. A store of another
    grid, config or format is refused. Safe to call from several processes at once (shards):
    the layout is created by exactly one of them.

    Args:
      path: the ``.zarr`` directory.
      spec: the sweep.
      config_yaml: the resolved config, kept in the attributes of a new store.
      overwrite: replace whatever is at ``path`` with an empty layout first.
      units: the ``(p index, m index)`` units this caller is responsible for (a shard's);
        None: all of them.

    Returns:
      The open group and those of ``units`` not yet done.

    Raises:
      StoreError: the store belongs to another sweep or format, or is not a ppsweep store
        (the message says how to proceed).
    """
    path = Path(path)
    units = spec.units() if units is None else list(units)
    identity = fingerprint(spec)
    if overwrite or not path.exists():  # replace=False: another process may have made it first
        _build_and_move(path, spec, config_yaml, identity, replace=overwrite)
    group = _check_store(path, identity)
    done = np.asarray(group["done"][...])
    pending = [(i, j) for i, j in units if not done[i, j]]
    return group, pending


def check_store(path: str | os.PathLike, spec: SweepSpec) -> zarr.Group:
    """Open the existing store at ``path`` for writing, if it is ``spec``'s.

    Raises:
      StoreError: unreadable, not a ppsweep store, another format, or another sweep.
    """
    return _check_store(Path(path), fingerprint(spec))


def _check_store(path: Path, identity: str) -> zarr.Group:
    """:func:`check_store` against the fingerprint ``identity``."""
    try:
        group = zarr.open_group(str(path), mode="r+")
        attrs = dict(group.attrs)
    except Exception as error:  # noqa: BLE001 - any unreadable store gets the same advice
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise StoreError(f"{path}: not a readable ppsweep store ({reason}); pass overwrite=true to replace it") from None
    if "done" not in group or "fingerprint" not in attrs:
        raise StoreError(f"{path}: not a ppsweep results store; pass overwrite=true to replace it, or choose another name=...")
    if attrs.get("store_format") != STORE_FORMAT:
        raise StoreError(
            f"{path}: store format {attrs.get('store_format')!r} (ppsweep {attrs.get('ppsweep_version')}) "
            f"cannot be resumed by this ppsweep (format {STORE_FORMAT}); pass overwrite=true to recompute it"
        )
    if attrs["fingerprint"] != identity:
        raise StoreError(
            f"{path}: written by a different sweep (grid, costs or options differ); "
            "pass overwrite=true to replace it, or choose another name=..."
        )
    return group


def done_units(group: zarr.Group) -> np.ndarray:
    """The ``(p, m)`` boolean array of finished units."""
    return np.asarray(group["done"][...], dtype=bool)


def write_unit(group: zarr.Group, spec: SweepSpec, p_index: int, m_index: int, results: dict[str, np.ndarray]) -> None:
    """Write one unit's chunks, then mark the unit done (so a kill never leaves it half-marked).

    Args:
      group: the open store.
      spec: its sweep.
      p_index, m_index: the unit.
      results: :func:`ppsweep.sweep.evaluate_unit`'s arrays (dimensions ``spec.point_dims`` or
        ``spec.table_dims``, as the store's arrays are named).
    """
    for name in list(VARIABLES) + list(booleans(spec)):
        array = group[name]
        array[unit_region(array.metadata.dimension_names, p_index, m_index)] = results[name]
    group["done"][p_index, m_index] = True


def finish_store(group: zarr.Group, path: str | os.PathLike) -> bool:
    """Mark the store complete when every unit is done; returns whether it is.

    Idempotent and safe when several finishing shards call it at once: the attributes are
    written only while the store on disk does not yet say ``complete``, and every metadata
    write replaces its file whole.
    """
    complete = bool(np.all(done_units(group)))
    if complete:
        current = zarr.open_group(str(path), mode="r+")
        if current.attrs.get("complete") is not True:
            current.attrs.update({"complete": True, "finished": _now()})
            _consolidate(Path(path))
    return complete


def missing_units(dataset: xr.Dataset) -> int:
    """Units of work not yet written in an opened results dataset."""
    return int((~dataset["done"].values).sum())


def open_results(path: str | os.PathLike, *, allow_incomplete: bool = True, chunks: Any = None) -> xr.Dataset:
    """Open a results store lazily with xarray.

    Args:
      path: the ``.zarr`` directory.
      allow_incomplete: open an unfinished store with an :class:`IncompleteStoreWarning`
        saying how much is missing (its unfinished units read as NaN / not valid); if False,
        raise :class:`StoreError` instead.
      chunks: passed to :func:`xarray.open_zarr`: None (default) for no dask, ``{}`` for dask
        arrays with the store's own chunks (one per unit), or a mapping of dimension to size.

    Returns:
      The dataset (lazily loaded; dask-backed unless ``chunks`` is None).
    """
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: no such store; run a sweep first (python -m ppsweep +sweep=...)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        dataset = xr.open_zarr(str(path), chunks=chunks)
    if "done" not in dataset:
        raise StoreError(f"{path}: not a ppsweep results store (no 'done' variable)")
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
