"""The results store: one xarray Dataset in zarr per sweep (docs/contract.md §5), written unit by unit.

Layout: coordinates are written as xarray writes them (with zarr alone, :func:`_write_coordinates`);
every data variable is created empty (NaN, or False for ``valid``) with one chunk per unit of work, and ``done`` ``(p, m)`` records which units are
complete. A unit writes its chunks, then marks itself done, so a store killed at any moment
reads back with every unfinished unit still NaN and marked not done. Re-running the same sweep
resumes with the units not done; a different grid or config is refused.

Concurrency (shards, :mod:`ppsweep.sweep.shards`): the layout is built in a temporary directory beside
the store and renamed into place, so it appears whole or not at all, and when several processes
create it at once exactly one rename wins and the others open the winner's (checking its
fingerprint). After that, each process writes only the chunks of its own units (and their
``done`` chunks): no two writers ever touch the same file. zarr writes every file to a
temporary name and renames it into place, so a kill, a full disk or an I/O error leaves each
chunk either old or new, never torn.

Identity (:func:`identity`): every field of the :class:`SweepSpec` (generically; only
``ppsweep.sweep.config.NOT_IN_IDENTITY`` is left out; the spec's ``inputs`` hold every input file's
absolute path and digest), the store format, the ppsweep version and the digest of the package's
code. A run of another identity is refused, naming the first setting that differs.

Integrity: a unit writes its chunks, then its ``checksum`` (:func:`unit_checksum`, keyed by the
unit's place and the store's fingerprint), then its ``done`` flag. Resume (:func:`pending_units`),
:func:`open_results` and ``python -m ppsweep.verify`` compare every finished unit with its
checksum (:func:`damaged_units`), and the layout (coordinates, metadata, attributes) with the
record written when it was created (:mod:`ppsweep.store.integrity`); a re-run rewrites a damaged
layout from the recorded config (:func:`check_store`, :func:`restore_layout`). ``overwrite``
replaces only a ppsweep store (:func:`is_ppsweep_store`).

Writers (:mod:`ppsweep.sweep.runner`): a run registers itself (:func:`registered_writer`) and locks each
unit while it computes and writes it (:func:`unit_lock`), in ``.NAME.zarr.locks/`` beside the
store; ``overwrite`` refuses while a writer is registered; each layout has a new ``generation``,
checked before a unit's values and before its done flag (:func:`check_generation`).

Root attributes: ``config`` (resolved YAML), ``ppsweep_version``, ``store_format``,
``fingerprint`` (digest of the identity), ``identity`` (JSON), ``schedule_options``, ``base_dir``,
``integrity`` (the layout's record), ``generation``, ``created``, ``finished`` and ``complete``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import hashlib
import json
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import filelock
import numpy as np
import zarr
from zarr.codecs import BloscCodec
from zarr.core.sync import sync

from ppsweep.store.schema import FITS, LAYOUT_VARIABLES, NOISE_VARIABLES, VALID, VARIABLES, booleans, variables  # noqa: F401 - re-exported
from ppsweep.sweep.config import ABSENT_WHEN_NONE, DIMENSIONS, NOT_IN_IDENTITY, SweepSpec, unit_region

if TYPE_CHECKING:
    import xarray as xr

#: Version of the store layout; a store of another format is refused.
#: 2: ``checksum`` per unit, ``identity`` and ``generation`` attributes.
#: 3: checksums keyed by the unit's place and the fingerprint; the ``integrity`` record
#: (:mod:`ppsweep.store.integrity`); the code's digest and the input files in the identity.
STORE_FORMAT = 3


class StoreError(RuntimeError):
    """A store that cannot be used as asked; the message says why and what to do."""


class IncompleteStoreWarning(UserWarning):
    """Opening a store whose sweep has not finished."""


#: Config names of SweepSpec fields whose config key differs from the field's name (messages only).
_CONFIG_NAMES = {
    "comm": "comm.mode",
    "profile": "costs.profile (the file's values)",
    "comm_axis": "comm.mode (a list: a comm dimension)",
    "f_slots": "slots.f",
    "b_slots": "slots.b",
    "dtype": "engine.dtype",
    "chunk": "engine.chunk",
    "method": "engine.method",
    "code": "ppsweep's code (digest of its source)",
    "inputs": "input file",
}


def _canonical(value: Any, where: str) -> Any:
    """``value`` as plain JSON data, exactly (floats by ``repr``, so every bit counts)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name), f"{where}.{f.name}") for f in fields(value)
                if not _absent(f, getattr(value, f.name))}
    if isinstance(value, np.ndarray):
        return [_canonical(x, where) for x in value.tolist()]
    if isinstance(value, Mapping):
        return {str(k): _canonical(v, f"{where}.{k}") for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(x, where) for x in value]
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, str):
        return value if not isinstance(value, np.bool_) else bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    raise TypeError(f"{where}: cannot put a {type(value).__name__} into the store's identity; teach ppsweep.store.results._canonical")


def _absent(f: Any, value: Any) -> bool:
    """A field added after stores existed (metadata ``identity: when_set``) left at its default: not in the identity."""
    if f.metadata.get("identity") != "when_set":
        return False
    return value is None if f.default is None else (value is not None and value == f.default)


def identity(spec: SweepSpec) -> dict[str, Any]:
    """Everything that can change one of the store's bits, as plain JSON data.

    Every field of ``spec`` is in it (generically: a field added to :class:`SweepSpec` is covered
    without being named here) except those of :data:`ppsweep.sweep.config.NOT_IN_IDENTITY` (the
    spec's ``inputs``: every user schedule's and input file's absolute path and content digest), those of
    :data:`~ppsweep.sweep.config.ABSENT_WHEN_NONE` while None and system/model fields marked absent at their
    default; plus the store format, the ppsweep version and ``code``, the digest of the package's code
    (:func:`ppsweep.disk_cache.code_digest`).
    """
    from ppsweep import __version__

    from ppsweep.disk_cache import code_digest

    data = {f.name: _canonical(getattr(spec, f.name), f.name) for f in fields(spec)
            if f.name not in NOT_IN_IDENTITY and not (f.name in ABSENT_WHEN_NONE and getattr(spec, f.name) is None)
            and not _absent(f, getattr(spec, f.name))}
    data["store_format"] = STORE_FORMAT
    data["ppsweep_version"] = __version__
    data["code"] = code_digest()
    return data


def fingerprint(spec: SweepSpec) -> str:
    """Digest of :func:`identity`: equal exactly when two sweeps write the same values."""
    return _digest(identity(spec))


def _digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def identity_difference(stored: dict[str, Any], current: dict[str, Any]) -> str:
    """The first setting that differs, ``"comm.mode: store has contention, this run overlap"``."""

    def flat(data: Any, prefix: str) -> dict[str, Any]:
        if isinstance(data, dict):
            out: dict[str, Any] = {}
            for key, value in data.items():
                out.update(flat(value, f"{prefix}.{key}" if prefix else key))
            return out
        return {prefix: data}

    a, b = flat(stored, ""), flat(current, "")
    for key in sorted(set(a) | set(b), key=lambda k: (k.split(".")[0] not in ("schedules", "p", "m"), k)):
        if a.get(key, "(absent)") != b.get(key, "(absent)"):
            head, _, rest = key.partition(".")
            name = _CONFIG_NAMES.get(head, head) + (f".{rest}" if rest else "")
            return f"{name}: store has {_show(a.get(key, '(absent)'))}, this run {_show(b.get(key, '(absent)'))}"
    return "identity differs"


def _show(value: Any) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, list):
        text = ", ".join(str(x) for x in value)
        return f"[{text}]" if len(text) <= 60 else f"{len(value)} values [{value[0]} ... {value[-1]}]"
    return str(value)


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
    _build_and_move(path, spec, config_yaml, replace=True)
    return zarr.open_group(str(path), mode="r+")


def _build_and_move(path: Path, spec: SweepSpec, config_yaml: str, replace: bool) -> bool:
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
        with _registry(path):
            writers = active_writers(path)
            if writers:
                raise StoreError(
                    f"{path}: another run is writing this store ({writers} writer{'s' if writers > 1 else ''} active); "
                    "overwrite=true refuses to replace it under them: wait for it to end, or stop it first"
                )
            _build_and_move(path, spec, config_yaml, replace=True)
    elif not path.exists():  # replace=False: another process may have made it first
        _build_and_move(path, spec, config_yaml, replace=False)
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
    from ppsweep.store.integrity import attribute_problems, layout_problems

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
        with _registry(path):
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


def damage_line(problems: list[str], most: int = 2) -> str:
    """``"coordinate bandwidth: values changed (...); metadata of t_sim: ... and 3 more"``."""
    text = "; ".join(problems[:most])
    return text + (f" and {len(problems) - most} more" if len(problems) > most else "")


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


def unit_done(group: zarr.Group, p_index: int, m_index: int) -> bool:
    """Whether unit ``(p_index, m_index)`` is finished (its ``done`` chunk alone; unreadable: not done)."""
    try:
        return bool(group["done"][p_index, m_index])
    except Exception:  # noqa: BLE001 - a damaged done chunk: not done, as in done_units
        return False


def done_units(group: zarr.Group) -> np.ndarray:
    """The ``(p, m)`` boolean array of finished units (a unit whose ``done`` chunk is unreadable is not)."""
    array = group["done"]
    try:
        return np.asarray(array[...], dtype=bool)
    except Exception:  # noqa: BLE001 - a damaged done chunk: that unit is not done, the others are read one by one
        done = np.zeros(array.shape, dtype=bool)
        for i, j in np.ndindex(*array.shape):
            with contextlib.suppress(Exception):
                done[i, j] = bool(array[i, j])
        return done


# ---- integrity: one checksum per unit, written just before its done flag -------------------------
#: The per-unit digest array.
CHECKSUM = "checksum"


def stored_variables(present: Any = None) -> list[str]:
    """Names of the arrays a unit writes (and its checksum covers), in a fixed order.

    Args:
      present: a store (group), a unit's results or any container of names: only the names in it
        (a store has ``t_sim_nominal`` only with noise and ``fits`` only with a capacity axis);
        None: every name a store can have.
    """
    names = [*VARIABLES, *NOISE_VARIABLES, "valid", "fits", *LAYOUT_VARIABLES, "dp"]
    return [name for name in names if present is None or name in present]


def unit_checksum(values: Mapping[str, np.ndarray], p_index: int, m_index: int, store_fingerprint: str) -> int:
    """Digest of one unit's values as the store holds them (float64 / bool; every NaN alike),
    keyed by the unit's place and the store's fingerprint: a unit swapped with another, or copied
    in from a store of another sweep, does not match.

    Args:
      values: ``name -> array`` for every name of :func:`stored_variables`.
      p_index, m_index: the unit's place in the store.
      store_fingerprint: the store's ``fingerprint`` attribute.

    Returns:
      A non-zero 64-bit integer (0 is the checksum array's fill value: "none written").
    """
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{int(p_index)},{int(m_index)},{store_fingerprint};".encode())
    for name in stored_variables(values):
        boolean = name in ("valid", "fits")
        array = np.asarray(values[name], dtype=bool if boolean else np.float64)
        if not boolean:
            array = np.where(np.isnan(array), np.nan, array)  # one NaN bit pattern (empty chunks read as the fill)
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return int.from_bytes(digest.digest(), "little") or 1


def read_unit(group: zarr.Group, p_index: int, m_index: int) -> dict[str, np.ndarray]:
    """One unit's values as stored (``name -> array``, ``p`` and ``m`` of length 1), its chunks read together."""
    names = stored_variables(group)
    arrays = [group[name].async_array for name in names]

    async def read_all() -> list:
        return await asyncio.gather(*(
            array.getitem(unit_region(array.metadata.dimension_names, p_index, m_index)) for array in arrays
        ))

    return {name: np.asarray(value) for name, value in zip(names, sync(read_all()))}


def damaged_units(group: zarr.Group, units: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """Finished units whose chunks do not match their checksum (or cannot be read).

    Args:
      group: an open store.
      units: the units to check; None: every finished unit.

    Returns:
      The damaged ones, in the order given.
    """
    if units is None:
        units = [tuple(u) for u in np.argwhere(done_units(group)).tolist()]
    if not units:
        return []
    try:
        stored = np.asarray(group[CHECKSUM][...], dtype=np.uint64)
    except Exception:  # noqa: BLE001 - an unreadable checksum chunk: check unit by unit below
        stored = None
    damaged = []
    key = str(group.attrs.get("fingerprint"))
    for i, j in units:
        try:
            expected = int(stored[i, j]) if stored is not None else int(group[CHECKSUM][i, j])
            ok = expected != 0 and unit_checksum(read_unit(group, i, j), i, j, key) == expected
        except Exception:  # noqa: BLE001 - a truncated or foreign chunk is damage, whatever the codec says
            ok = False
        if not ok:
            damaged.append((i, j))
    return damaged


def unreadable_done_units(group: zarr.Group) -> list[tuple[int, int]]:
    """Units whose ``done`` chunk cannot be read (they count as not done, see :func:`done_units`)."""
    array = group["done"]
    try:
        array[...]
        return []
    except Exception:  # noqa: BLE001 - find which
        pass
    out = []
    for i, j in np.ndindex(*array.shape):
        try:
            array[i, j]
        except Exception:  # noqa: BLE001 - any decoding error
            out.append((i, j))
    return out


def describe_units(spec_or_group: Any, units: list[tuple[int, int]], most: int = 4) -> str:
    """``"(p=4, m=8), (p=8, m=16)"`` for the units ``(p index, m index)`` (the first ``most``)."""
    p, m = np.asarray(spec_or_group["p"][...]), np.asarray(spec_or_group["m"][...])
    text = ", ".join(f"(p={int(p[i])}, m={int(m[j])})" for i, j in units[:most])
    return text + (f" and {len(units) - most} more" if len(units) > most else "")


def write_unit(
    group: zarr.Group,
    spec: SweepSpec,
    p_index: int,
    m_index: int,
    results: dict[str, np.ndarray],
    generation: tuple[Path, str] | None = None,
) -> None:
    """Write one unit's chunks, then its checksum, then mark it done (a kill never leaves it half-marked).

    Args:
      group: the open store.
      spec: its sweep.
      p_index, m_index: the unit.
      results: :func:`ppsweep.sweep.evaluate.evaluate_unit`'s arrays (dimensions ``spec.point_dims`` or
        ``spec.table_dims``, as the store's arrays are named).
      generation: ``(path, generation)``: checked before the values and before the done flag;
        the store must still be the one this run opened (:func:`check_generation`).

    Raises:
      StoreError: the store was replaced since it was opened.
    """
    UnitWriter(group).write(p_index, m_index, results, generation)


class UnitWriter:
    """Writes units into one open store (:func:`write_unit`), keeping its arrays open between units.

    A unit's chunks (one per variable) are written together, in one call into zarr's event loop
    (zarr encodes and stores them concurrently); then its checksum; then its done flag. Each of
    the three steps ends before the next starts, so a kill leaves the unit either not marked done
    or whole.

    Args:
      group: the open store.
    """

    def __init__(self, group: zarr.Group) -> None:
        self.group = group
        self._fingerprint = str(group.attrs.get("fingerprint"))
        self._arrays: dict[str, zarr.Array] = {}

    def _array(self, name: str) -> zarr.Array:
        if name not in self._arrays:
            self._arrays[name] = self.group[name]
        return self._arrays[name]

    def write(
        self, p_index: int, m_index: int, results: Mapping[str, np.ndarray], generation: tuple[Path, str] | None = None
    ) -> None:
        """Write unit ``(p_index, m_index)``: as :func:`write_unit` (whose arguments these are)."""
        if generation is not None:
            check_generation(*generation)
        arrays = {name: self._array(name).async_array for name in stored_variables(results)}

        async def write_all() -> None:
            await asyncio.gather(*(
                array.setitem(unit_region(array.metadata.dimension_names, p_index, m_index), results[name])
                for name, array in arrays.items()
            ))

        sync(write_all())
        if generation is not None:
            check_generation(*generation)
        self._array(CHECKSUM)[p_index, m_index] = unit_checksum(results, p_index, m_index, self._fingerprint)
        self._array("done")[p_index, m_index] = True


# ---- writers: a generation per layout, a lock per unit, a registration per run --------------------
def store_generation(path: str | os.PathLike) -> str | None:
    """The ``generation`` attribute on disk now (a new one each time a layout is created), or None."""
    try:
        with open(Path(path) / "zarr.json", encoding="utf-8") as f:
            return json.load(f).get("attributes", {}).get("generation")
    except (OSError, ValueError):
        return None


def check_generation(path: str | os.PathLike, generation: str) -> None:
    """Raise :class:`StoreError` unless the store at ``path`` is still the layout of ``generation``."""
    if store_generation(path) != generation:
        raise StoreError(
            f"{path}: the store was replaced or removed while this run was writing it (another run with "
            "overwrite=true?); this run stopped before writing into it"
        )


def locks_dir(path: str | os.PathLike) -> Path:
    """Directory of the store's lock files, beside it (``.NAME.zarr.locks``): replacing the store keeps it."""
    path = Path(path)
    return path.with_name(f".{path.name}.locks")


def _lock(file: Path) -> filelock.BaseFileLock:
    file.parent.mkdir(parents=True, exist_ok=True)
    return filelock.FileLock(str(file), thread_local=False)


@contextlib.contextmanager
def _registry(path: Path) -> Iterator[None]:
    """Held while a writer registers and while ``overwrite`` checks for writers and replaces."""
    with _lock(locks_dir(path) / "registry.lock"):
        yield


def active_writers(path: str | os.PathLike) -> int:
    """Runs writing the store at ``path`` now (their registration locks are held); stale files are removed."""
    count = 0
    for file in sorted(locks_dir(path).glob("writer-*.lock")):
        lock = _lock(file)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            count += 1
            continue
        lock.release()
        with contextlib.suppress(OSError):
            file.unlink()
    return count


@contextlib.contextmanager
def registered_writer(path: str | os.PathLike) -> Iterator[None]:
    """Register this run as a writer of the store at ``path`` for the ``with`` block.

    While registered, ``overwrite=true`` from another run refuses. The registration is a lock
    held by this process: it ends with the process, however that ends.
    """
    path = Path(path)
    with _registry(path):
        lock = _lock(locks_dir(path) / f"writer-{os.getpid()}-{uuid.uuid4().hex[:8]}.lock")
        lock.acquire(timeout=0)
    try:
        yield
    finally:
        lock.release()
        with contextlib.suppress(OSError):
            Path(lock.lock_file).unlink()


def unit_lock(path: str | os.PathLike, p_index: int, m_index: int) -> filelock.BaseFileLock:
    """The lock of unit ``(p_index, m_index)``: held while a run computes and writes it."""
    return _lock(locks_dir(path) / f"unit-{p_index}-{m_index}.lock")


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
    from ppsweep.store.integrity import layout_problems

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
