"""Opening a results store for analysis, masked variables, and dask chunking.

:func:`load` opens the store lazily with dask (:func:`ppsweep.store.open.open_results`), by default
one dask chunk per zarr chunk, i.e. per ``(p, m)`` unit: nothing is read until a result is
computed, and the analyses (:mod:`~ppsweep.analysis.ranks`, :mod:`~ppsweep.analysis.stability`,
:mod:`~ppsweep.analysis.crossover`, :mod:`~ppsweep.analysis.sensitivity`) are written with
:func:`xarray.apply_ufunc` on those chunks, so dask computes them chunk by chunk, in parallel
(its threads by default, a ``dask.distributed`` client's workers when one is active) and out of
core. ``load(path, chunks=None)`` gives numpy-backed variables instead (everything read at once).

Masking (:func:`masked`): a schedule's values count only where its unit is finished (``done``) and
the schedule can run there (``valid``); everything else reads as NaN, so it neither gets nor
takes a rank. :func:`iter_units` walks a store one unit at a time in plain numpy.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import xarray as xr

from ppsweep.store.errors import IncompleteStoreWarning, StoreError
from ppsweep.store.open import open_results

#: Chunks :func:`load` asks for by default: the store's own (one dask chunk per unit).
DEFAULT_CHUNKS: dict = {}
#: Dimensions every results store has (docs/contract.md §5).
REQUIRED_DIMS = ("schedule", "p", "m", "bandwidth", "latency")
#: Variables the analysis reads.
REQUIRED_VARIABLES = ("t_sim", "bubble_formula", "bubble_table", "valid", "done")


class AnalysisError(ValueError):
    """A dataset or request the analysis cannot work with; the message says why."""


def load(path: str | os.PathLike, *, allow_incomplete: bool = True, chunks: Any = DEFAULT_CHUNKS, verify: bool = True) -> xr.Dataset:
    """Open a results store lazily and check that it is one the analysis understands.

    Args:
      path: the ``.zarr`` directory a sweep wrote.
      allow_incomplete: open an unfinished store (with an :class:`IncompleteStoreWarning`);
        its unfinished units are masked everywhere.
      chunks: dask chunks, as :func:`xarray.open_zarr` takes them: ``{}`` (default) one chunk per
        ``(p, m)`` unit, a mapping ``{dimension: size}``, or None for numpy-backed variables.
      verify: check every finished unit against its checksum first (reads the whole store once);
        False leaves that to the caller (the served explorer checks each unit as it first reads it).

    Returns:
      The lazily loaded dataset.

    Raises:
      AnalysisError: no store there, not a ppsweep store, or a store missing what is needed.
    """
    path = Path(path)
    try:
        dataset = open_results(path, allow_incomplete=allow_incomplete, chunks=chunks, verify=verify)
    except StoreError as error:
        raise AnalysisError(str(error)) from None
    except Exception as error:  # noqa: BLE001 - any unreadable directory gets the same message
        raise AnalysisError(f"{path}: not a readable zarr store ({type(error).__name__}: {error})") from None
    check_dataset(dataset, str(path))
    return dataset


def check_dataset(dataset: xr.Dataset, where: str = "dataset") -> None:
    """Raise :class:`AnalysisError` unless ``dataset`` has the variables and dimensions of a results store."""
    missing = [name for name in REQUIRED_VARIABLES if name not in dataset]
    if missing:
        raise AnalysisError(f"{where}: not a ppsweep results store (missing variable {missing[0]!r})")
    dims = dataset["t_sim"].dims
    for dim in REQUIRED_DIMS:
        if dim not in dims:
            raise AnalysisError(f"{where}: t_sim lacks the {dim!r} dimension; not a ppsweep results store")
    if dims[:3] != ("schedule", "p", "m"):
        raise AnalysisError(f"{where}: t_sim dimensions {dims} do not start with (schedule, p, m)")
    layout = tuple(d for d in ("gpus", "tp", "dp", "cp") if d in dims)  # a layout sweep's (docs/contract.md §3b)
    for name in ("bubble_formula", "bubble_table", "valid"):
        if dataset[name].dims != ("schedule", "p", "m", *layout):
            raise AnalysisError(f"{where}: {name} has dimensions {dataset[name].dims}, expected {('schedule', 'p', 'm', *layout)}")
    if dataset["done"].dims != ("p", "m"):
        raise AnalysisError(f"{where}: done has dimensions {dataset['done'].dims}, expected (p, m)")
    if dataset.sizes["schedule"] > 62:
        raise AnalysisError(f"{where}: {dataset.sizes['schedule']} schedules; the analysis handles at most 62")


def point_dims(dataset: xr.Dataset) -> tuple[str, ...]:
    """Dimensions of per-point variables, schedule first (``schedule, p, m, [comm], [compute], bandwidth, latency``)."""
    return tuple(dataset["t_sim"].dims)


def grid_dims(dataset: xr.Dataset) -> tuple[str, ...]:
    """Dimensions of a point without the schedule: ``p, m, [comm], [compute], bandwidth, latency``."""
    return point_dims(dataset)[1:]


def inner_dims(dataset: xr.Dataset) -> tuple[str, ...]:
    """Dimensions within one unit: ``[comm], [compute], bandwidth, latency``."""
    return point_dims(dataset)[3:]


def schedules(dataset: xr.Dataset) -> list[str]:
    """Schedule names in store order."""
    return [str(s) for s in dataset["schedule"].values]


def masked(dataset: xr.Dataset, name: str) -> xr.DataArray:
    """``dataset[name]`` as float, NaN where its unit is not ``done`` or its schedule not ``valid`` (lazy under dask)."""
    ok = dataset["valid"].astype(bool) & dataset["done"].astype(bool)
    return dataset[name].astype(float).where(ok)


def whole_along(array: xr.DataArray, dims: Sequence[str]) -> xr.DataArray:
    """``array`` with ``dims`` in one dask chunk each (as :func:`xarray.apply_ufunc` needs for core
    dimensions); numpy-backed arrays are returned as they are."""
    if array.chunks is None:
        return array
    return array.chunk({d: -1 for d in dims if d in array.dims})


@dataclass(frozen=True)
class Unit:
    """One ``(p, m)`` unit's values, masked.

    Attributes:
      i, j: indices of ``p`` and ``m``.
      p, m: their values.
      done: whether the unit was completely written.
      valid: ``(S,)`` schedules that can run here (False everywhere when not ``done``).
      values: name -> masked array; point variables ``(S, *inner)``, table variables ``(S,)``.
    """

    i: int
    j: int
    p: int
    m: int
    done: bool
    valid: np.ndarray
    values: dict[str, np.ndarray]


def iter_units(dataset: xr.Dataset, variables: Sequence[str] = ("t_sim", "bubble_formula", "bubble_table")) -> Iterator[Unit]:
    """Read the store one ``(p, m)`` unit (one chunk) at a time, masking not-done units and invalid schedules.

    Args:
      dataset: an opened results dataset.
      variables: variables to read; each is returned with NaN where the unit is not ``done`` or
        the schedule is not ``valid``.

    Yields:
      :class:`Unit` in ``(p, m)`` order.
    """
    p_values = dataset["p"].values
    m_values = dataset["m"].values
    done_all = np.asarray(dataset["done"].values, dtype=bool)
    for i in range(len(p_values)):
        for j in range(len(m_values)):
            done = bool(done_all[i, j])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                valid = np.asarray(dataset["valid"].isel(p=i, m=j).values, dtype=bool) & done
                values = {}
                for name in variables:
                    raw = np.asarray(dataset[name].isel(p=i, m=j).values, dtype=float)
                    mask = valid.reshape(valid.shape + (1,) * (raw.ndim - 1))
                    values[name] = np.where(mask, raw, np.nan)
            yield Unit(i, j, int(p_values[i]), int(m_values[j]), done, valid, values)


__all__ = [
    "AnalysisError",
    "IncompleteStoreWarning",
    "REQUIRED_DIMS",
    "REQUIRED_VARIABLES",
    "Unit",
    "check_dataset",
    "grid_dims",
    "inner_dims",
    "iter_units",
    "load",
    "masked",
    "point_dims",
    "schedules",
    "whole_along",
]
