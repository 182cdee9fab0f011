"""Built tables cached on disk, shared by runs, shards and processes.

A table is a function of ``(schedule, p, m, options, f_slots, b_slots)`` and of the code that
builds it. :func:`cached_table` keeps each built table in one file named by a hash of all of
that, the code included (:func:`code_version`: the source of every module that takes part in
building a table), so a change to any of them starts a fresh set of files: nothing is ever read
back for a different table or a different code.

Where: ``$PPSWEEP_TABLE_CACHE`` if set, else ``~/.cache/ppsweep/tables``; ``PPSWEEP_TABLE_CACHE=off``
turns the cache off. Files are written under a temporary name in the same directory and renamed
into place, so concurrent writers (shards, worker processes) never expose a partial file, and a
file that cannot be read (damaged, foreign) is rebuilt and replaced (:mod:`ppsweep.disk_cache`,
shared with the envelope cache). Old files are never used by newer code; delete the directory to
reclaim the space.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Callable

import numpy as np

from ppsweep import disk_cache, import_graph
from ppsweep.tables.fast_realize import split_pairs, table_ops
from ppsweep.tables.digest import remember_digest, table_digest
from ppsweep.tables.op_arrays import OpArrays, remember_ops
from ppsweep.tables.table import ScheduleTable

#: Environment variable naming the cache directory (``off``: no cache).
CACHE_ENV = "PPSWEEP_TABLE_CACHE"

#: Tables with fewer cells than this are rebuilt rather than read (reading costs about as much).
MIN_CELLS = 1 << 14

_ARRAYS = ("kind", "micro", "stage", "replica", "placement", "micro_replica", "stage_fractions")
#: The arrays of a table with pairs F&B (their backward halves), stored beside the others.
_PAIR_ARRAYS = ("pair_micro", "pair_stage")
#: A set of split backwards, stored as an array of its pairs (:func:`split_pairs`; the metadata says
#: this name in place of True or False).
_SPLIT = "split_pairs"
#: Prefix of the table's operations (:func:`table_ops`, each field of :class:`OpArrays` that is
#: not None), stored beside it.
_OP = "op_"

#: Modules whose source defines a built table (the schedules package is added whole).


def cache_dir() -> Path | None:
    """The cache directory, or None when the cache is off."""
    return disk_cache.cache_dir(CACHE_ENV, "tables")


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the source of every module that builds a table: :mod:`ppsweep.tables.build` and all it
    imports, schedules included (:func:`ppsweep.import_graph.source_version`)."""
    return import_graph.source_version("ppsweep.tables.build")


def table_key(name: str, p: int, m: int, f_slots: int, b_slots: int, options: tuple) -> str:
    """File name of a table: a hash of everything that defines it, the code's version included."""
    return disk_cache.key_name([name, p, m, f_slots, b_slots, [list(o) for o in options], code_version()])


def cached_table(
    name: str, p: int, m: int, f_slots: int, b_slots: int, options: tuple, build: Callable[[], ScheduleTable]
) -> ScheduleTable:
    """The table from the cache, or ``build()`` (then stored when the table is large enough).

    Args:
      name, p, m, f_slots, b_slots: the table's definition.
      options: the schedule's options as ``((key, type name, value), ...)``, sorted.
      build: builds (and validates) the table when it is not cached.

    Returns:
      The table, equal array for array to what ``build()`` returns.
    """
    directory = cache_dir()
    if directory is None:
        return build()
    path = directory / table_key(name, p, m, f_slots, b_slots, options)
    if path.exists():
        table = _read(path)
        if table is not None:
            return table
    table = build()
    # The file keeps the arrays the array paths read (tables they leave to the references are not stored).
    if table.kind.size >= MIN_CELLS and table_ops(table) is not None:
        _write(path, table)
    return table


def _read(path: Path) -> ScheduleTable | None:
    read = disk_cache.read_entry(path)
    if read is None:
        return None  # damaged or foreign: rebuilt and replaced
    meta, stored = read
    try:
        names = _ARRAYS + (_PAIR_ARRAYS if meta["pairs"] else ())
        arrays = {key: stored[key].astype(meta["dtypes"][key], copy=False) for key in names}
        split = meta["split_backward"]
        if not isinstance(split, bool):
            split = frozenset(map(tuple, stored[_SPLIT].tolist()))
        table = ScheduleTable(
            name=meta["name"], p=meta["p"], m=meta["m"], n_stages=meta["n_stages"],
            split_backward=split,
            f_slots=meta["f_slots"], b_slots=meta["b_slots"], options=meta["options"], **arrays,
        )
        remember_ops(table, OpArrays(**{key[len(_OP):]: a.astype(np.int64) for key, a in stored.items() if key.startswith(_OP)}))
        remember_digest(table, str(meta["digest"]))
        return table
    except (KeyError, TypeError, ValueError):
        return None


def _write(path: Path, table: ScheduleTable) -> None:
    """Write ``table`` to ``path`` atomically (temporary file in the same directory, then rename)."""
    pairs = table.pair_micro is not None
    arrays = {key: np.asarray(getattr(table, key)) for key in _ARRAYS + (_PAIR_ARRAYS if pairs else ())}
    split = table.split_backward
    uniform = isinstance(split, (bool, np.bool_))  # every backward split or none; else a set of pairs
    meta = {
        "name": table.name, "p": table.p, "m": table.m, "n_stages": table.n_stages,
        "split_backward": bool(split) if uniform else _SPLIT,
        "f_slots": table.f_slots, "b_slots": table.b_slots, "options": table.options, "pairs": pairs,
        "dtypes": {key: a.dtype.str for key, a in arrays.items()},
    }
    if not uniform:
        arrays[_SPLIT] = split_pairs(split)
    ops = table_ops(table)
    arrays |= {_OP + f.name: getattr(ops, f.name) for f in dataclasses.fields(ops) if getattr(ops, f.name) is not None}
    stored = {key: disk_cache.narrow(a) for key, a in arrays.items()}
    meta["digest"] = table_digest(table, narrowed=stored)  # the engine caches' key of this table (ppsweep.tables.digest)
    disk_cache.write_entry(path, meta, stored)
