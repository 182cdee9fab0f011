"""A store's layout: coordinates, empty arrays (one chunk per unit), ``done``, ``checksum``, the root
attributes and the integrity record (:mod:`ppsweep.store.integrity`), built whole or not at all.

The layout is built in a temporary directory beside the store and renamed into place
(:func:`create_store`), so it appears whole or not at all, and when several processes create it at
once exactly one rename wins and the others open the winner's. Coordinates are written as xarray
writes them, with zarr alone (:func:`_write_coordinates`). :func:`restore_layout` rewrites a damaged
layout from the recorded config; :func:`finish_store` marks a store complete.

Root attributes: ``config`` (resolved YAML), ``ppsweep_version``, ``store_format``,
``fingerprint`` (digest of the identity), ``identity`` (JSON), ``schedule_options``, ``base_dir``,
``integrity`` (the layout's record), ``generation``, ``created``, ``finished`` and ``complete``.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import shutil
import time
import uuid
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import numpy as np
import zarr
from zarr.codecs import BloscCodec

from ppsweep.store.errors import StoreError
from ppsweep.store.identity import STORE_FORMAT, fingerprint, identity
from ppsweep.store.schema import booleans, variables
from ppsweep.store.units import CHECKSUM, done_units
from ppsweep.sweep.config import DIMENSIONS, SweepSpec


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
    build_and_move(path, spec, config_yaml, replace=True)
    return zarr.open_group(str(path), mode="r+")


def build_and_move(path: Path, spec: SweepSpec, config_yaml: str, replace: bool) -> bool:
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
        _write_layout(tmp, spec, config_yaml)
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


#: Compressor of the float data variables (README, "The results store"): blosc's lz4 after a byte
#: shuffle, which on step times compresses better than zarr's default (zstd without shuffle,
#: ~2.8x against ~2.1x on the million sweep) at a fraction of its CPU time. Only new stores use
#: it: a store records its codecs, and one written with the default reads and resumes as before.
FLOAT_COMPRESSOR = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")


#: ``_FillValue`` of a float coordinate as xarray encodes it in zarr 3 (NaN's eight bytes, base64).
_NAN_FILL = base64.b64encode(np.array(np.nan, dtype="<f8").tobytes()).decode()


def _write_coordinates(group: zarr.Group, spec: SweepSpec) -> None:
    """Every coordinate of ``spec`` as the one-chunk array xarray's ``to_zarr`` writes for it.

    Written with zarr alone, so that creating a store imports neither xarray nor pandas nor dask:
    the same data type, fill value, codecs and attributes as xarray's (``units``; ``_FillValue``
    for floats, its CF encoding), so that xarray reads them back as it reads its own
    (tests/test_store_writes.py compares the two layouts).
    """
    for name, values in spec.coords().items():
        text = values.dtype == object
        attributes = {} if DIMENSIONS[name] is None else {"units": DIMENSIONS[name]}
        if values.dtype.kind == "f":
            attributes["_FillValue"] = _NAN_FILL
        array = group.create_array(
            name,
            shape=values.shape,
            chunks=values.shape,
            dtype=str if text else values.dtype,
            fill_value="" if text else (np.nan if values.dtype.kind == "f" else 0),
            dimension_names=(name,),
            attributes=attributes,
        )
        array[...] = values


def _write_layout(path: Path, spec: SweepSpec, config_yaml: str, base_dir: str | None = None) -> None:
    """Coordinates, empty arrays (one chunk per unit), ``done``, the attributes and the integrity
    record (:mod:`ppsweep.store.integrity`), at ``path``.

    ``base_dir``: the directory relative input paths of the config were resolved in (the attribute
    ``base_dir``; None: the current one).
    """
    group = zarr.open_group(str(path), mode="w-", zarr_format=3)
    _write_coordinates(group, spec)
    for name, (kind, unit, long_name) in {**variables(spec), **booleans(spec)}.items():
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
            compressors="auto" if boolean else FLOAT_COMPRESSOR,
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
    group.create_array(
        CHECKSUM,
        shape=spec.shape(("p", "m")),
        chunks=(1, 1),
        dtype="uint64",
        fill_value=0,
        dimension_names=("p", "m"),
        attributes={"long_name": "digest of the unit's values, written just before its done flag (ppsweep.store.verify)"},
    )
    from ppsweep import __version__

    group.attrs.update(
        {
            "sweep": spec.name,
            "config": config_yaml,
            "ppsweep_version": __version__,
            "store_format": STORE_FORMAT,
            "fingerprint": fingerprint(spec),
            "identity": json.dumps(identity(spec), sort_keys=True),
            "generation": uuid.uuid4().hex,
            "created": _now(),
            "complete": False,
            "schedule_options": _schedule_options(spec),
            "base_dir": base_dir if base_dir is not None else os.getcwd(),
        }
    )
    from ppsweep.store.integrity import record_layout

    record_layout(path)
    _consolidate(path)


@contextlib.contextmanager
def fresh_layout(path: str | os.PathLike, spec: SweepSpec, config_yaml: str, base_dir: str | None) -> Iterator[Path]:
    """An empty layout of ``spec`` built in a temporary directory beside ``path`` (removed after)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.creating-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        _write_layout(tmp, spec, config_yaml, base_dir)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def restore_layout(path: str | os.PathLike, spec: SweepSpec) -> None:
    """Rewrite the coordinates, metadata and covered attributes of the store at ``path`` from its
    recorded config (which must be ``spec``'s), keeping its values and done flags."""
    from ppsweep.store import integrity

    attrs = integrity.trusted_attributes(path)
    if attrs is None:
        raise StoreError(f"{path}: its attributes and its integrity record were both edited; re-run the sweep with overwrite=true")
    with fresh_layout(path, spec, str(attrs.get("config", "")), attrs.get("base_dir")) as fresh:
        integrity.restore_layout(path, fresh)
    _consolidate(Path(path))


def _schedule_options(spec: SweepSpec) -> str:
    """JSON: every schedule coordinate value (a name or variant label) -> its resolved options."""
    from ppsweep.tables.build import resolve_options

    resolved = {name: resolve_options(name, spec.options_for(name)) for name in spec.schedules}
    return json.dumps(resolved, sort_keys=True, default=str)


def is_ppsweep_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory that ppsweep wrote as a store (any format; damaged units or
    not): a zarr group whose root attributes hold ``fingerprint`` and ``store_format``, with a
    ``done`` array. Only such a directory is ever replaced by ``overwrite=true``."""
    path = Path(path)
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        with open(path / "zarr.json", encoding="utf-8") as f:
            attributes = json.load(f).get("attributes", {})
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(attributes, dict) and {"fingerprint", "store_format"} <= set(attributes) and (path / "done" / "zarr.json").is_file()


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
