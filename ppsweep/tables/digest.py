"""A table's content digest: the key under which the engine's on-disk caches keep what they derive
from a table (its program, routings, the compiled scan's steps, envelopes).

Computed once per table object; a table read from the table cache (:mod:`ppsweep.tables.cache`)
comes with the digest computed when it was written (:func:`remember_digest`), so a warm run does
not hash every cell of every table again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import weakref
from typing import Any

import numpy as np

from ppsweep import disk_cache
from ppsweep.tables.fast_realize import split_pairs
from ppsweep.tables.table import ScheduleTable


def table_digest(table: ScheduleTable, narrowed: dict[str, np.ndarray] | None = None) -> str:
    """Hash of a table's content: every field, arrays by their values in the smallest integer type
    that holds them (:func:`ppsweep.disk_cache.narrow`: a quarter of the bytes to hash, and the
    table cache writes them so), their dtype and shape; a set of split backwards by its pairs in
    order (:func:`ppsweep.tables.fast_realize.split_pairs`).

    Args:
      table: the table.
      narrowed: the table's arrays already narrowed, by field name, where the caller has them (the
        table cache's writer); the others are narrowed here.

    Returns:
      32 hexadecimal digits.
    """
    known = _DIGESTS.get(table)
    if known is not None:
        return known
    digest = hashlib.sha256()
    for field in dataclasses.fields(table):
        value = getattr(table, field.name)
        digest.update(field.name.encode())
        if isinstance(value, np.ndarray):
            small = narrowed.get(field.name) if narrowed else None
            small = disk_cache.narrow(value) if small is None else small
            digest.update(f"{small.dtype.str}{small.shape}".encode())
            digest.update(np.ascontiguousarray(small).tobytes())
        elif field.name == "split_backward" and not isinstance(value, (bool, np.bool_)):
            pairs = split_pairs(value)  # thousands of pairs in DualPipe's tables: hashed as an array
            digest.update(f"pairs{pairs.shape}".encode())
            digest.update(pairs.tobytes())
        else:
            digest.update(json.dumps(_canonical(value), sort_keys=True, default=repr).encode())
    _DIGESTS[table] = digest.hexdigest()[:32]
    return _DIGESTS[table]


def remember_digest(table: ScheduleTable, digest: str) -> None:
    """Take ``digest`` as :func:`table_digest` of ``table`` (the table cache stores it beside the
    table it was computed from)."""
    _DIGESTS[table] = digest


#: Digests of tables already hashed (or read with theirs), held as long as the table lives.
_DIGESTS: "weakref.WeakKeyDictionary[ScheduleTable, str]" = weakref.WeakKeyDictionary()


def _canonical(value: Any) -> Any:
    """``value`` in a JSON form that does not depend on set order."""
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    return value
