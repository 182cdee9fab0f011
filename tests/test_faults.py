"""A store you can trust (issue 13): identity, writers, integrity, one-line errors, estimates.

Every case of the issue's "Observed" list is reproduced here with real processes and real
files, on one tiny grid (4 units), so that the uninterrupted reference is computed once.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from omegaconf import OmegaConf

from ppsweep.cli.main import run
from ppsweep.sweep.config import ABSENT_WHEN_NONE, NOT_IN_IDENTITY, RUN_KEYS, SweepSpec, compose_config, load_config, spec_from_config
from ppsweep.sweep.runner import run_sweep
from ppsweep.store.errors import StoreError
from ppsweep.store.identity import fingerprint, identity
from ppsweep.store.layout import create_store
from ppsweep.store.locks import registered_writer
from ppsweep.store.open import check_store, open_for_sweep, open_results
from ppsweep.store.units import damaged_units, stored_variables, write_unit

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
GRID = [
    "schedules=[gpipe,1f1b]",
    "p=[2,4]",
    "m=[4,8]",
    "bandwidth=[1.0e10,1.0e11]",
    "latency=[1.0e-6]",
    "engine.compilation_cache=null",
]
PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] p=(\d+) m=(\d+) ")


def command(module: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=ENV)


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def values(path: Path) -> dict[str, bytes]:
    """The bytes of every stored variable, read back (what a user sees)."""
    group = zarr.open_group(str(path), mode="r")
    return {name: np.asarray(group[name][...]).tobytes() for name in [*stored_variables(group), "done"]}


#: The example profile (README, "Bringing your own measurements").
EXAMPLE_PROFILE = Path(__file__).resolve().parents[1] / "docs" / "example_profile.yaml"


def spec_of(*overrides: str) -> SweepSpec:
    return spec_from_config(compose_config([*GRID, "name=grid", *overrides]))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The tiny grid in contention mode, swept by one uninterrupted in-process run."""
    out = tmp_path_factory.mktemp("reference")
    assert run(compose_config([*GRID, "name=grid", "comm.mode=contention", f"results_dir={out}", "progress=false"])) == 0
    return out / "grid.zarr"


# ---- 1. identity ----------------------------------------------------------------------------------
def test_every_spec_field_is_in_the_identity_or_explicitly_excluded():
    spec = spec_of()
    names = {f.name for f in dataclasses.fields(SweepSpec)}
    when_set = {f.name for f in dataclasses.fields(SweepSpec) if f.metadata.get("identity") == "when_set"}
    assert set(NOT_IN_IDENTITY) <= names and set(ABSENT_WHEN_NONE) <= names
    assert names - set(NOT_IN_IDENTITY) - set(ABSENT_WHEN_NONE) - when_set <= set(identity(spec))
    # a field absent while None is in the identity once it has a value
    for name in ABSENT_WHEN_NONE:
        assert getattr(spec, name) is None and name not in identity(spec)
    assert "profile" in identity(spec_of("costs=profile", f"costs.profile={EXAMPLE_PROFILE}"))
    # fields added after stores existed enter the identity once set (a layout sweep's)
    layout = load_config(["+sweep=layout", "gpus=[8]", "p=[2]", "m=[4]"])
    assert {"gpus", "tp", "cp", "layout", "systems"} <= set(identity(layout))


#: Values to try for config keys that are not numbers (a new key of that kind must get one here).
#: Keys that make a layout sweep (docs/contract.md §3b), which runs without noise.
LAYOUT_KEYS = ("gpus", "tp", "dp", "cp", "layout", "systems")
ALTERNATIVES = {
    "gpus": [8],
    "tp": [2],
    "dp": [2],
    "cp": [2],
    "layout": {"sequence_parallel": True},
    "systems": {"other": {"peak_flops": 1.0e15, "memory_bandwidth": 3.35e12, "bandwidth": 5.0e10, "latency": 5.0e-7}},
    "model.name": "other",
    "system.name": "other",
    "schedules": ["gpipe"],
    "schedule_options": {"hanayo": {"waves": 2}},
    "bandwidth": [1.0e9],
    "latency": [2.0e-6],
    "compute": [1.0e14],
    "comm.mode": "contention",
    "engine.dtype": "float32",
    "engine.method": "scan",
    "system.memory_capacity": 1.0e12,
    "system.intra_bandwidth": 1.0e12,
    "system.intra_latency": 1.0e-7,
    "model.recompute": "selective",
    "model.stage_layers": "balanced",
    "model.ffn_hidden": 8192,
    "model.kv_heads": 8,
    "model.mlp": "swiglu",
    "model.norm": "rmsnorm",
    "recompute": ["none", "full"],
    "memory_capacity": [8.0e10],
    "noise.compute.dist": "normal",
    "noise.message.dist": "normal",
    "noise.straggler.workers": [0],
}


def _leaves(data: dict, prefix: str = ""):
    for key, value in data.items():
        if isinstance(value, dict) and f"{prefix}{key}" not in ALTERNATIVES:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 0.5 if value else 1.0
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
        return [*value[:-1], _changed(value[-1]) + (1 if isinstance(value[-1], int) else 0)]
    return None


def test_every_config_key_changes_the_identity_unless_it_is_a_run_key():
    base = OmegaConf.to_container(compose_config(["name=grid", "noise.samples=2"]), resolve=True)  # noise on: its keys count
    base.pop("hydra", None)
    quiet = OmegaConf.to_container(compose_config(["name=grid"]), resolve=True)  # layout sweeps run without noise
    quiet.pop("hydra", None)
    digest, quiet_digest = fingerprint(spec_from_config(base)), fingerprint(spec_from_config(quiet))
    checked = []
    for key, value in _leaves(base):
        if key in RUN_KEYS or key.split(".")[0] in RUN_KEYS:
            continue
        new = ALTERNATIVES.get(key, _changed(value))
        assert new is not None, f"{key}: add a value to try to ALTERNATIVES"
        layout_key = key.split(".")[0] in LAYOUT_KEYS
        cfg = OmegaConf.create(quiet if layout_key else base)
        OmegaConf.update(cfg, key, new, force_add=True)
        assert fingerprint(spec_from_config(cfg)) != (quiet_digest if layout_key else digest), f"{key} does not change the store's identity"
        checked.append(key)
    assert {"comm.mode", "engine.method", "engine.dtype", "slots.f", "system.bandwidth", "p"} <= set(checked)


def test_a_different_identity_is_refused_naming_what_differs(tmp_path):
    path = tmp_path / "grid.zarr"
    create_store(path, spec_of("comm.mode=contention"), "yaml: 1")
    with pytest.raises(StoreError, match="comm.mode: store has contention, this run overlap"):
        check_store(path, spec_of("comm.mode=overlap"))
    with pytest.raises(StoreError, match="engine.method: store has auto, this run scan"):
        check_store(path, spec_of("comm.mode=contention", "engine.method=scan"))
    with pytest.raises(StoreError, match=r"latency: store has 1e-06, this run 2e-06"):
        check_store(path, spec_of("comm.mode=contention", "latency=[2.0e-6]"))


def test_killed_then_resumed_with_another_comm_mode_is_refused_and_the_same_resumes_identical(tmp_path, reference, capsys):
    args = (*GRID, "name=grid", f"results_dir={tmp_path}")
    process = subprocess.Popen([sys.executable, "-m", "ppsweep", *args, "comm.mode=contention"], cwd=ROOT, env=ENV,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if PROGRESS.match(line):
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=60)
    other = command("ppsweep", *args, "comm.mode=overlap")
    assert other.returncode == 2
    assert error_lines(other.stderr)[-1].startswith("error: ") and "comm.mode: store has contention, this run overlap" in other.stderr
    assert "Traceback" not in other.stderr
    # The second refusal and the resume in process (the refusal above and the kill are the real processes').
    assert run(compose_config([*args, "comm.mode=contention", "engine.method=scan", "progress=false"])) == 2
    assert "engine.method: store has auto, this run scan" in capsys.readouterr().err
    assert run(compose_config([*args, "comm.mode=contention", "progress=false"])) == 0, capsys.readouterr().err
    assert values(tmp_path / "grid.zarr") == values(reference)


# ---- 2. writers -----------------------------------------------------------------------------------
def test_overwrite_while_another_run_writes_is_refused(tmp_path, reference):
    store = tmp_path / "grid.zarr"
    shutil.copytree(reference, store)
    before = values(store)
    with registered_writer(store):  # this (real) process is writing the store
        other = command("ppsweep", *GRID, "name=grid", f"results_dir={tmp_path}", "latency=[1.0e-5]", "overwrite=true")
    assert other.returncode == 2 and "another run is writing this store" in other.stderr
    assert len(error_lines(other.stderr)) <= 3 and "Traceback" not in other.stderr
    assert values(store) == before


def test_a_writer_whose_store_was_replaced_stops_before_writing(tmp_path):
    path = tmp_path / "grid.zarr"
    spec = spec_of()
    group, pending = open_for_sweep(path, spec, "yaml: 1")
    generation = (path, str(group.attrs["generation"]))
    create_store(path, spec_of("latency=[1.0e-5]"), "yaml: 2")  # another run replaced it
    results = {name: np.zeros(1) for name in stored_variables()}
    with pytest.raises(StoreError, match="replaced or removed while this run was writing"):
        write_unit(group, spec, 0, 0, results, generation)
    assert not np.asarray(zarr.open_group(str(path))["done"][...]).any()


def test_two_identical_runs_at_once_split_the_units(tmp_path, reference):
    args = [sys.executable, "-m", "ppsweep", *GRID, "name=grid", f"results_dir={tmp_path}", "comm.mode=contention"]
    runs = [subprocess.Popen(args, cwd=ROOT, env=ENV, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [r.communicate(timeout=240)[1] for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outputs
    computed = [(m.group(3), m.group(4)) for out in outputs for m in map(PROGRESS.match, out.splitlines()) if m]
    assert sorted(computed) == sorted(set(computed)) and len(computed) == 4  # every unit once, none twice
    assert values(tmp_path / "grid.zarr") == values(reference)


# ---- 3. integrity ---------------------------------------------------------------------------------
def _damage(store: Path) -> list[tuple[int, int]]:
    """Delete one chunk, copy a neighbour's over another, truncate a third: units (0,0), (1,0), (1,1)."""
    (store / "t_sim/c/0/0/0/0/0").unlink()
    shutil.copyfile(store / "t_sim/c/0/0/1/0/0", store / "t_sim/c/0/1/0/0/0")
    chunk = store / "idle_sim/c/0/1/1/0/0"
    chunk.write_bytes(chunk.read_bytes()[:7])
    return [(0, 0), (1, 0), (1, 1)]


def test_damaged_chunks_are_named_refused_on_open_and_recomputed(tmp_path, reference, capsys):
    store = tmp_path / "grid.zarr"
    shutil.copytree(reference, store)
    damaged = _damage(store)
    assert damaged_units(zarr.open_group(str(store))) == damaged
    with pytest.raises(StoreError, match=r"3 damaged units \(p=2, m=4\), \(p=4, m=4\), \(p=4, m=8\).*--repair"):
        open_results(store)
    (store / "done/c/0/1").write_bytes(b"\x00garbage")  # an unreadable done flag: that unit is not done
    assert damaged_units(zarr.open_group(str(store))) == damaged
    with pytest.raises(StoreError, match=r"done flags of units \(p=2, m=8\) are unreadable; re-run"):
        open_results(store)
    # Resume: the same sweep recomputes exactly the damaged units and the one not done.
    report = run_sweep(spec_of("comm.mode=contention"), store, "yaml", progress=False)
    assert report.units_run == 4 and report.complete
    assert values(store) == values(reference)


def test_verify_names_damage_analyze_says_one_line_and_repair_restores(tmp_path, reference, capsys):
    from ppsweep.store.verify import main as verify_main

    store = tmp_path / "grid.zarr"
    shutil.copytree(reference, store)
    assert verify_main([str(store)]) == 0  # in process; the refusals below are real processes'
    assert "4 finished units match their checksums" in capsys.readouterr().out
    _damage(store)
    found = command("ppsweep.store.verify", str(store))
    assert found.returncode == 1 and error_lines(found.stderr) == [
        f"error: {store}: 3 damaged units (p=2, m=4), (p=4, m=4), (p=4, m=8): chunks unreadable or not matching their checksums; "
        f"python -m ppsweep.verify {store} --repair recomputes them"
    ]
    analyze = command("ppsweep.cli.analyze", str(store), "--no-figures")
    assert analyze.returncode == 2 and len(error_lines(analyze.stderr)) == 1 and "(p=2, m=4)" in analyze.stderr
    assert verify_main([str(store), "--repair"]) == 0  # in process: the sweep's shapes are compiled already
    repaired = capsys.readouterr()
    assert "(3 repaired)" in repaired.out, repaired.err
    assert values(store) == values(reference)


def test_open_results_one_line_for_unreadable_stores(tmp_path):
    broken = tmp_path / "broken.zarr"
    create_store(broken, spec_of(), "yaml: 1")
    (broken / "zarr.json").write_text("{not json")
    with pytest.raises(StoreError, match=r"broken.zarr: not a readable ppsweep store \(JSONDecodeError"):
        open_results(broken)
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(StoreError, match="empty.zarr: not a readable ppsweep store"):
        open_results(tmp_path / "empty.zarr")
    with pytest.raises(StoreError, match="no such store"):
        open_results(tmp_path / "absent.zarr")


# ---- 4. bad input: one line, before any store is made ------------------------------------------------
@pytest.mark.parametrize(
    "override, message",
    [
        ("comm.mode=[]", "error: comm.mode: must name at least one mode"),
        ("m=[]", "error: m: must list at least one value"),
        ("p=[]", "error: p: must list at least one value"),
        ("results_dir=afile", "error: results_dir: 'afile' is a file, not a directory"),
        ("limits.hours=0", "error: limits.hours: must be a number > 0 or null"),
    ],
)
def test_bad_input_is_one_line_and_creates_nothing(tmp_path, capsys, monkeypatch, override, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    status = run(compose_config([*GRID, "name=grid", "results_dir=out", override]))
    lines = error_lines(capsys.readouterr().err)
    assert status == 2 and len(lines) == 1 and lines[0].startswith(message), lines
    assert not (tmp_path / "out").exists()


# ---- 5. runaway grids -----------------------------------------------------------------------------
def test_runaway_grids_are_refused_with_the_estimate_and_the_key_that_overrides(tmp_path, capsys):
    status = run(compose_config([*GRID, "name=grid", f"results_dir={tmp_path}", "p=[100000]"]))
    lines = error_lines(capsys.readouterr().err)
    assert status == 2 and len(lines) == 1
    assert lines[0].startswith("error: limits.memory_gb: this sweep needs about") and "limits.memory_gb=N" in lines[0]
    assert "estimate: 4 tables" in lines[0] and "operations" in lines[0] and "store" in lines[0] and "time" in lines[0]
    status = run(compose_config([*GRID, "name=grid", f"results_dir={tmp_path}", "m=[1000000]", "limits.hours=0.01"]))
    lines = error_lines(capsys.readouterr().err)
    assert status == 2 and lines[0].startswith("error: limits.") and "estimate:" in lines[0]
    assert not list(tmp_path.iterdir())


def test_dry_run_prints_the_estimate_only(tmp_path, capsys):
    status = run(compose_config([*GRID, "name=grid", f"results_dir={tmp_path}", "dry_run=true"]))
    lines = error_lines(capsys.readouterr().err)
    assert status == 0 and len(lines) == 1
    assert lines[0].startswith("estimate: 8 tables, ") and "16 points" in lines[0] and "dry run: nothing computed" in lines[0]
    assert not list(tmp_path.iterdir())


def test_csv_with_a_byte_order_mark_reads_and_a_binary_file_is_named(tmp_path):
    import io

    from ppsweep import build_schedule
    from ppsweep.tables.interchange import CsvTableError, read_csv, write_csv

    table = build_schedule("1f1b", 2, 4)
    text = io.StringIO()
    write_csv(table, text)
    (tmp_path / "bom.csv").write_text(text.getvalue(), encoding="utf-8-sig")
    assert (tmp_path / "bom.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    assert np.array_equal(read_csv(tmp_path / "bom.csv").kind, table.kind)
    (tmp_path / "binary.csv").write_bytes(bytes(range(256)))
    with pytest.raises(CsvTableError, match=r"not a readable CSV file .*binary.csv: .*expected UTF-8 text"):
        read_csv(tmp_path / "binary.csv")
