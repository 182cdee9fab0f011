"""A store's identity (:func:`identity`): everything that can change one of its bits, as plain JSON data.

Every field of the :class:`~ppsweep.sweep.config.SweepSpec` (generically; only
``ppsweep.sweep.config.NOT_IN_IDENTITY`` is left out; the spec's ``inputs`` hold every input file's
absolute path and digest), the store format, the ppsweep version and the digest of the package's
code. Its digest is the store's ``fingerprint``; a run of another identity is refused, naming the
first setting that differs (:func:`identity_difference`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

from ppsweep.sweep.config import ABSENT_WHEN_NONE, NOT_IN_IDENTITY, SweepSpec


#: Version of the store layout; a store of another format is refused.
#: 2: ``checksum`` per unit, ``identity`` and ``generation`` attributes.
#: 3: checksums keyed by the unit's place and the fingerprint; the ``integrity`` record
#: (:mod:`ppsweep.store.integrity`); the code's digest and the input files in the identity.
STORE_FORMAT = 3


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
    raise TypeError(f"{where}: cannot put a {type(value).__name__} into the store's identity; teach ppsweep.store.identity._canonical")


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
