"""A search's results as an xarray Dataset in zarr (written whole, then moved into place).

Dimensions: ``candidate`` (the winners, best first, then the hand-made schedules), ``latency``,
``bandwidth`` and, with noise, ``sample``. Variables: ``t_sim`` (s), ``bubble`` (the zero-bubble
paper's rate, noise-free), ``score``, ``peak_activations`` (``M_B``, or bytes), ``searched``
(True for the space's variants); coordinates ``schedule`` (the labels). Attributes: the search's
inputs (space, p, m, objective, cap, budget, costs), ``margin``, ``evaluated``, ``invalid``,
``over_cap`` and ``seconds``. Read it with ``xarray.open_zarr(path)``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ppsweep.search.driver import SearchResult
from ppsweep.search.region import Region


def result_dataset(result: SearchResult, region: Region, inputs: dict[str, Any] | None = None):
    """The :class:`~ppsweep.search.driver.SearchResult` as an ``xarray.Dataset`` (module docstring)."""
    import xarray as xr

    rows = result.best + result.incumbents
    noisy = rows and np.ndim(rows[0].figures.t_sim) == 3
    point = ("candidate", "latency", "bandwidth") + (("sample",) if noisy else ())
    data = {
        "t_sim": (point, np.stack([c.figures.t_sim for c in rows]) if rows else np.zeros((0,) + region.shape),
                  {"units": "s", "long_name": "simulated step time"}),
        "bubble": (("candidate", "latency", "bandwidth"),
                   np.stack([np.broadcast_to(c.figures.bubble, region.shape) for c in rows]) if rows
                   else np.zeros((0,) + region.shape),
                   {"units": "1", "long_name": "zero-bubble paper's bubble rate (longest stage span)"}),
        "score": ("candidate", np.array([c.score for c in rows]), {"long_name": f"objective {result.objective} (lower is better)"}),
        "peak_activations": ("candidate", np.array([c.figures.peak for c in rows]),
                             {"units": "bytes" if region.activation_bytes else "M_B", "long_name": "busiest worker's peak activations"}),
        "searched": ("candidate", np.array([i < len(result.best) for i in range(len(rows))]),
                     {"long_name": "a variant of the searched space (False: hand-made)"}),
    }
    coords = {"schedule": ("candidate", np.array([c.label for c in rows], dtype=object)), "latency": list(region.latency),
              "bandwidth": list(region.bandwidth)}
    attrs = {
        "kind": "ppsweep schedule search", "space": result.space, "p": result.p, "m": result.m,
        "objective": result.objective, "cap": "none" if result.cap is None else result.cap, "margin": result.margin,
        "evaluated": result.evaluated, "invalid": len(result.invalid), "over_cap": len(result.over_cap),
        "seconds": result.seconds,
        "costs": json.dumps({"t_f": region.t_f, "t_i": region.t_i, "t_w": region.t_w, "msg_bytes": region.msg_bytes,
                             "t_opt": region.t_opt, "mode": region.mode, "w_share": region.w_share}),
        "inputs": json.dumps(inputs or {}, default=str),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)


def write_result(result: SearchResult, region: Region, path: str | os.PathLike, inputs: dict[str, Any] | None = None) -> Path:
    """Write the result's dataset to the zarr store ``path`` (replacing one there); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        with warnings.catch_warnings():  # zarr 3 notes that consolidated metadata is not in its spec yet
            warnings.filterwarnings("ignore", message="Consolidated metadata")
            result_dataset(result, region, inputs).to_zarr(temporary / "store.zarr", mode="w")
        if path.exists():
            shutil.rmtree(path)
        os.replace(temporary / "store.zarr", path)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return path
