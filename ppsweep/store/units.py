"""A unit of work ``(p, m)`` in the store: its chunks (one per variable), its checksum and its done flag.

A unit writes its chunks, then its ``checksum`` (:func:`unit_checksum`, keyed by the unit's place
and the store's fingerprint), then its ``done`` flag (:func:`write_unit`, :class:`UnitWriter`), so a
store killed at any moment reads back with every unfinished unit still NaN and marked not done.
:func:`damaged_units` compares finished units with their checksums.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.core.sync import sync

from ppsweep.store.locks import check_generation
from ppsweep.store.schema import LAYOUT_VARIABLES, NOISE_VARIABLES, VARIABLES
from ppsweep.sweep.config import SweepSpec, unit_region


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
