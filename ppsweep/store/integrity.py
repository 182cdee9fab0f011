"""Integrity of everything a reader sees besides the units' values: coordinates, metadata, attributes.

A unit's values are covered by its checksum (:func:`ppsweep.store.units.unit_checksum`, keyed by
the unit's place and the store's fingerprint). Everything else a reader of the store sees is
recorded when the layout is created, in the root attribute ``integrity`` (:func:`record_layout`):

- ``arrays``: every array's metadata as its ``zarr.json`` holds it (data type, fill value,
  codecs, chunks, dimension names and attributes: ``units``, ``_FillValue``, and any
  ``scale_factor`` / ``add_offset`` that would change how xarray decodes it);
- ``coordinates``: a digest of every coordinate's values;
- ``attributes``: a copy of each attribute that describes the store (:data:`COVERED`: the recorded
  config, the identity and its fingerprint, the format, ...), from which ``--repair`` restores them;
- ``seal``: a digest of the three above, so an edit of the record itself is seen too.

:func:`layout_problems` compares the store on disk (each array's ``zarr.json`` and its copy in the
consolidated metadata, which xarray reads) with the record and returns one line per problem.
:func:`restore_layout` rewrites coordinates, metadata and attributes from a fresh layout built from
the recorded config (``python -m ppsweep.verify --repair``, or a re-run of the same sweep).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import zarr

#: Root attributes covered by the record. ``generation``, ``created``, ``finished`` and ``complete``
#: change during a store's life (a new layout, the last unit) and change no value a reader sees.
COVERED = ("sweep", "config", "identity", "fingerprint", "store_format", "ppsweep_version", "schedule_options", "base_dir")
#: Name of the root attribute holding the record.
RECORD = "integrity"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def coordinate_digest(values: np.ndarray) -> str:
    """Digest of a coordinate's values: strings as JSON, numbers as their dtype and bytes."""
    values = np.asarray(values)
    if values.dtype.kind in "OUST":
        return _sha(_json([str(v) for v in values.tolist()]))
    return _sha(values.dtype.str.encode() + np.ascontiguousarray(values).tobytes())


def _read_json(file: Path) -> Any:
    with open(file, encoding="utf-8") as f:
        return json.load(f)


def _array_names(path: Path) -> list[str]:
    return sorted(child.name for child in path.iterdir() if (child / "zarr.json").is_file())


def _coordinate_names(arrays: dict[str, Any]) -> list[str]:
    """Arrays whose single dimension is their own name (xarray's coordinates)."""
    return sorted(name for name, meta in arrays.items() if meta.get("dimension_names") == [name])


def _seal(record: dict[str, Any]) -> str:
    return _sha(_json({key: record[key] for key in ("arrays", "coordinates", "attributes")}))


def build_record(path: str | Path, attributes: dict[str, Any]) -> dict[str, Any]:
    """The integrity record of the layout at ``path`` whose root attributes will be ``attributes``."""
    path = Path(path)
    group = zarr.open_group(str(path), mode="r", use_consolidated=False)
    arrays = {name: _read_json(path / name / "zarr.json") for name in _array_names(path)}
    record = {
        "arrays": arrays,
        "coordinates": {name: coordinate_digest(group[name][...]) for name in _coordinate_names(arrays)},
        "attributes": {key: attributes.get(key) for key in COVERED},
    }
    record["seal"] = _seal(record)
    return record


def record_layout(path: str | Path) -> None:
    """Record the layout at ``path`` as it is now (a new store, or one made by hand in a test)."""
    path = Path(path)
    root = _read_json(path / "zarr.json")
    attributes = dict(root.get("attributes", {}))
    group = zarr.open_group(str(path), mode="r+", use_consolidated=False)
    group.attrs[RECORD] = build_record(path, attributes)


def _first_difference(recorded: Any, current: Any, where: str = "") -> str:
    """``"attributes.scale_factor: recorded (absent), now 2"`` for the first differing key."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        for key in sorted(set(recorded) | set(current)):
            if recorded.get(key, "(absent)") != current.get(key, "(absent)"):
                return _first_difference(recorded.get(key, "(absent)"), current.get(key, "(absent)"), f"{where}.{key}" if where else key)
    if isinstance(recorded, str) and isinstance(current, str) and ("\n" in recorded or "\n" in current):
        old, new = recorded.splitlines(), current.splitlines()
        k = next((k for k, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        line_old = old[k] if k < len(old) else "(absent)"
        line_new = new[k] if k < len(new) else "(absent)"
        return f"{where or 'value'} line {k + 1}: recorded {_short(line_old.strip())}, now {_short(line_new.strip())}"
    return f"{where or 'value'}: recorded {_short(recorded)}, now {_short(current)}"


def _short(value: Any) -> str:
    text = " ".join((value if isinstance(value, str) else json.dumps(value)).split())
    return text if len(text) <= 60 else text[:57] + "..."


def layout_problems(path: str | Path) -> list[str]:
    """What differs between the store at ``path`` and its integrity record, one line each.

    Returns:
      ``[]`` when coordinates, metadata and covered attributes all match; otherwise lines such as
      ``"metadata of t_sim: attributes.scale_factor: recorded (absent), now 2"``,
      ``"coordinate bandwidth: values changed (now [3e10, 1e11])"``,
      ``"attribute config edited"``.
    """
    path = Path(path)
    root = _read_json(path / "zarr.json")
    attributes = root.get("attributes", {})
    record = attributes.get(RECORD)
    if not isinstance(record, dict) or not {"arrays", "coordinates", "attributes", "seal"} <= set(record):
        return ["integrity record missing (a store written by hand or by an older ppsweep)"]
    problems = []
    if _seal(record) != record["seal"]:
        problems.append("integrity record edited (its seal does not match)")
    for key in COVERED:
        if record["attributes"].get(key) != attributes.get(key):
            problems.append(f"attribute {key} edited ({_first_difference(record['attributes'].get(key), attributes.get(key))})")
    with_identity = attributes.get("identity")
    try:
        if hashlib.sha256(json.dumps(json.loads(with_identity), sort_keys=True).encode()).hexdigest()[:16] != attributes.get("fingerprint"):
            problems.append("attributes identity and fingerprint disagree")
    except (TypeError, ValueError):
        problems.append("attribute identity unreadable")
    consolidated = (root.get("consolidated_metadata") or {}).get("metadata") or {}
    present = _array_names(path)
    for name in sorted(set(record["arrays"]) | set(present) | set(consolidated)):
        recorded = record["arrays"].get(name)
        if recorded is None:
            problems.append(f"array {name}: not in the recorded layout")
            continue
        if name not in present:
            problems.append(f"array {name}: missing (its zarr.json is gone)")
            continue
        try:
            current = _read_json(path / name / "zarr.json")
        except (OSError, ValueError):
            problems.append(f"metadata of {name}: unreadable")
            continue
        if current != recorded:
            problems.append(f"metadata of {name}: {_first_difference(recorded, current)}")
        elif consolidated and consolidated.get(name) != recorded:
            problems.append(f"consolidated metadata of {name}: {_first_difference(recorded, consolidated.get(name, '(absent)'))}")
    if present:
        group = zarr.open_group(str(path), mode="r", use_consolidated=False)
        for name, digest in sorted(record["coordinates"].items()):
            if name not in present:
                continue
            try:
                values = group[name][...]
            except Exception as error:  # noqa: BLE001 - an unreadable chunk is damage
                problems.append(f"coordinate {name}: unreadable ({type(error).__name__})")
                continue
            if coordinate_digest(values) != digest:
                problems.append(f"coordinate {name}: values changed (now {_short([str(v) for v in np.asarray(values).tolist()])})")
    return problems


def trusted_attributes(path: str | Path) -> dict[str, Any] | None:
    """The covered attributes as the store was created: the record's copies when its seal holds,
    else the attributes themselves when they equal those copies; None when neither can be trusted."""
    attributes = _read_json(Path(path) / "zarr.json").get("attributes", {})
    record = attributes.get(RECORD)
    if not isinstance(record, dict) or not isinstance(record.get("attributes"), dict):
        return None
    copies = record["attributes"]
    if record.get("seal") == _seal(record) or all(copies.get(key) == attributes.get(key) for key in COVERED):
        return {key: copies.get(key) for key in COVERED}
    return None


def attribute_problems(problems: list[str]) -> list[str]:
    """Those of ``problems`` about the root attributes or the record (not repairable by a re-run)."""
    return [line for line in problems if line.startswith(("attribute", "integrity record"))]


def restore_layout(path: str | Path, fresh: str | Path) -> None:
    """Rewrite the store at ``path``'s coordinates, array metadata, covered attributes and record
    from ``fresh``, a layout built from the same recorded config (values and done flags kept).

    Args:
      path: the damaged store.
      fresh: an empty layout of the same sweep (:func:`ppsweep.store.layout.fresh_layout`).
    """
    path, fresh = Path(path), Path(fresh)
    record = _read_json(fresh / "zarr.json")["attributes"][RECORD]
    for name, meta in record["arrays"].items():
        if name in record["coordinates"]:  # values and metadata: the whole (one-chunk) array
            tmp = path / f".{name}.restoring-{uuid.uuid4().hex[:8]}"
            shutil.copytree(fresh / name, tmp)
            if (path / name).exists():
                shutil.rmtree(path / name)
            tmp.rename(path / name)
        else:
            (path / name).mkdir(exist_ok=True)
            (path / name / "zarr.json").write_text(json.dumps(meta, indent=2))
    for name in _array_names(path):
        if name not in record["arrays"]:
            shutil.rmtree(path / name)
    attributes = _read_json(fresh / "zarr.json")["attributes"]
    group = zarr.open_group(str(path), mode="r+", use_consolidated=False)
    group.attrs.update({**{key: attributes[key] for key in COVERED if key in attributes}, RECORD: record})


def damage_line(problems: list[str], most: int = 2) -> str:
    """``"coordinate bandwidth: values changed (...); metadata of t_sim: ... and 3 more"``."""
    text = "; ".join(problems[:most])
    return text + (f" and {len(problems) - most} more" if len(problems) > most else "")
