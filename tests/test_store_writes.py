"""The sweep's non-engine side: the store's layout without xarray, stores of the previous codec, evaluator
processes started ahead of a run, and the light imports that make them start fast."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from zarr.codecs import ZstdCodec

from ppsweep.store import layout
from ppsweep.store.layout import create_store
from ppsweep.store.open import open_for_sweep
from ppsweep.store.units import damaged_units, write_unit
from ppsweep.sweep import parallel
from ppsweep.sweep.config import DIMENSIONS, SweepSpec, load_config
from ppsweep.sweep.evaluate import evaluate_unit
from ppsweep.sweep.runner import run_sweep

ROOT = Path(__file__).resolve().parent.parent

MODEL = {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16}
SYSTEM = {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7}


def small_spec(**changes) -> SweepSpec:
    config = {"name": "w", "schedules": ["gpipe", "1f1b"], "p": [2, 4], "m": [2, 4], "bandwidth": [1e9, 1e11],
              "latency": [1e-7, 1e-5], "model": MODEL, "system": SYSTEM, "comm": {"mode": ["overlap", "blocking"]}}
    return SweepSpec.from_config({**config, **changes})


def stored(path: Path) -> dict[str, np.ndarray]:
    """Every array of the store, read back with zarr."""
    group = zarr.open_group(str(path), mode="r")
    return {name: np.asarray(array[...]) for name, array in group.arrays()}


LAYOUT_ONLY = {"gpus", "tp", "dp", "cp", "system"}


@pytest.mark.parametrize("kind", ["pipeline", "layout"])
def test_coordinates_are_written_as_xarray_writes_them(tmp_path, kind):
    # every kind of coordinate: strings (schedule, recompute, comm, system), integers (p, m, sample, tp, …), floats
    if kind == "pipeline":
        spec = load_config(["+sweep=fits", "p=[4,8]", "m=[16]", "compute=[1e14,1e15]", "noise.samples=2",
                            "comm.mode=[overlap,ports]"])
        assert set(spec.coords()) == set(DIMENSIONS) - LAYOUT_ONLY
    else:
        spec = load_config(["+sweep=layout", "gpus=null", "tp=[1,2]", "dp=[1,4]", "cp=[1,2]", "p=[4]", "m=[16]"])
        assert LAYOUT_ONLY - {"gpus"} <= set(spec.coords())
    create_store(tmp_path / "ours.zarr", spec, "config")
    reference = xr.Dataset(coords=spec.coords())  # what the layout was written with before: xarray's to_zarr
    for name in reference.coords:
        if DIMENSIONS[name] is not None:
            reference[name].attrs["units"] = DIMENSIONS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference.to_zarr(str(tmp_path / "xarray.zarr"), mode="w-", zarr_format=3, consolidated=False)
    for name in spec.coords():
        ours, theirs = (json.loads((tmp_path / store / name / "zarr.json").read_text()) for store in ("ours.zarr", "xarray.zarr"))
        assert ours == theirs, name
        assert (tmp_path / "ours.zarr" / name / "c" / "0").read_bytes() == (tmp_path / "xarray.zarr" / name / "c" / "0").read_bytes(), name
    ours, theirs = (xr.open_zarr(tmp_path / store, consolidated=False) for store in ("ours.zarr", "xarray.zarr"))
    for name, values in spec.coords().items():
        assert ours[name].dtype == theirs[name].dtype and ours[name].attrs == theirs[name].attrs, name
        assert list(ours[name].values) == list(theirs[name].values) == list(values), name


def test_a_store_of_the_previous_float_codec_resumes_and_verifies(tmp_path, monkeypatch):
    # Stores written before blosc-lz4 compressed their float variables with zarr's default (zstd);
    # the layouts differ in nothing else. Such a store, killed after one unit, resumes with this code.
    spec = small_spec()
    old = tmp_path / "old.zarr"
    with monkeypatch.context() as patch:
        patch.setattr(layout, "FLOAT_COMPRESSOR", ZstdCodec(level=0))
        group, _ = open_for_sweep(old, spec, "")
    write_unit(group, spec, 0, 1, evaluate_unit(spec, 0, 1))
    report = run_sweep(spec, old, "", progress=False, workers=1)
    assert report.units_run == 3 and report.complete
    assert json.loads((old / "t_sim" / "zarr.json").read_text())["codecs"][-1]["name"] == "zstd"
    assert damaged_units(zarr.open_group(str(old), mode="r")) == []
    new = tmp_path / "new.zarr"
    run_sweep(spec, new, "", progress=False, workers=1)
    assert json.loads((new / "t_sim" / "zarr.json").read_text())["codecs"][-1]["name"] == "blosc"
    a, b = stored(old), stored(new)
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].tobytes() == b[name].tobytes(), name


def test_evaluators_started_ahead_serve_the_run(tmp_path, monkeypatch):
    started: list[int] = []
    init = parallel.Evaluators.__init__

    def counting(self, workers, compilation_cache):
        started.append(workers)
        init(self, workers, compilation_cache)

    monkeypatch.setattr(parallel.Evaluators, "__init__", counting)
    spec = small_spec()
    with parallel.start_evaluators(spec, spec.units(), 2) as evaluators:
        assert started == [2]  # the processes start here, before the run knows its store
        ahead = run_sweep(spec, tmp_path / "ahead.zarr", "", progress=False, workers=2, evaluators=evaluators)
    assert ahead.complete and started == [2]  # the run used them: no second start
    assert parallel.start_evaluators(spec, spec.units(), 1) is None  # one evaluator: no process
    with parallel.start_evaluators(spec, spec.units(), 2) as unfit:  # a run of one evaluator shuts them down unused
        alone = run_sweep(spec, tmp_path / "alone.zarr", "", progress=False, workers=1, evaluators=unfit)
    assert alone.complete and started == [2, 2]
    a, b = stored(tmp_path / "ahead.zarr"), stored(tmp_path / "alone.zarr")
    for name in a:
        assert a[name].tobytes() == b[name].tobytes(), name


def test_light_imports():
    # in one process, in the order a run imports them: each check sees what the imports so far brought
    steps = [
        ("ppsweep.sweep.parallel", ("jax", "xarray", "zarr")),  # imported before the evaluators start
        ("ppsweep.sweep.evaluate", ("xarray", "pandas", "dask", "zarr")),  # what a spawned evaluator imports
        ("ppsweep.sweep.runner", ("xarray", "pandas", "dask")),  # the writing process
    ]
    code = "import sys\n" + "".join(
        f"import {module}\nprint(sorted({{m.split('.')[0] for m in sys.modules}} & {set(absent)!r}))\n" for module, absent in steps
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:3] == ["[]"] * 3


def test_the_command_with_two_evaluators_ends_cleanly(tmp_path):
    # the command leaves with os._exit once its jobs have ended: after joining its evaluator
    # processes, so that no resource is reported leaked, and with every line it printed
    overrides = ["name=two", "schedules=[gpipe,1f1b]", "p=[2,4]", "m=[2,4]", "bandwidth=[1e9,1e11]", "latency=[1e-6]",
                 "engine.workers=2", "engine.compilation_cache=null", f"results_dir={tmp_path}", "progress=false"]
    run = subprocess.run([sys.executable, "-m", "ppsweep", *overrides], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("wrote 16 points in ") and lines[-1].endswith(f"to {tmp_path}/two.zarr"), lines
    assert not [line for line in lines if "leaked" in line or "Traceback" in line or "Warning" in line], lines
    assert zarr.open_group(str(tmp_path / "two.zarr"), mode="r").attrs["complete"] is True
