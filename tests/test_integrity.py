"""Integrity of everything a reader sees (issues 31 and 34), with real files.

Each corruption of issue 31's list (a coordinate rewritten, reordered or a chunk of it deleted; a
variable's metadata edited; units swapped; a unit copied in from another store; the recorded
config or identity edited) makes ``verify`` exit 1 with one line naming it, ``open_results``
refuse, a re-run never say "complete" over it, and ``verify --repair`` restore a store identical
to a clean run's. Issue 34's: a resume under other code or another user schedule is refused
naming it, ``--repair`` runs nothing before it has checked the recorded config, and
``overwrite=true`` replaces only a ppsweep store.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from ppsweep.cli.main import run
from ppsweep.store.integrity import COVERED
from ppsweep.store.errors import StoreError
from ppsweep.store.open import open_results
from ppsweep.store.verify import main as verify_main
from ppsweep.sweep.config import compose_config

GRID = ["schedules=[gpipe,1f1b]", "p=[2,4]", "m=[4,8]", "bandwidth=[1.0e10,1.0e11]", "latency=[1.0e-6]",
        "engine.compilation_cache=null", "comm.mode=contention", "progress=false", "name=grid"]


def sweep(out: Path, *overrides: str) -> int:
    return run(compose_config([*GRID, f"results_dir={out}", *overrides]))


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> tuple[Path, Path]:
    """The reference store, and one of the same layout at another latency (a foreign store)."""
    out = tmp_path_factory.mktemp("integrity")
    assert sweep(out / "ref") == 0 and sweep(out / "other", "latency=[2.0e-6]") == 0
    return out / "ref" / "grid.zarr", out / "other" / "grid.zarr"


def snapshot(path: Path) -> dict:
    """What a reader sees: every array's values and metadata, and the covered attributes."""
    group = zarr.open_group(str(path), mode="r", use_consolidated=False)
    root = json.loads((path / "zarr.json").read_text())
    out = {f"attr {k}": root["attributes"].get(k) for k in COVERED if k != "base_dir"}
    for name in sorted(group.array_keys()):
        out[name] = np.asarray(group[name][...]).tolist()
        out[f"{name} metadata"] = json.loads((path / name / "zarr.json").read_text())
        out[f"{name} consolidated"] = root["consolidated_metadata"]["metadata"][name]
    return out


def edit_metadata(store: Path, name: str, change) -> None:
    """Apply ``change`` to array ``name``'s metadata, in its zarr.json and in the consolidated copy (what xarray reads)."""
    file = store / name / "zarr.json"
    meta = json.loads(file.read_text())
    change(meta)
    file.write_text(json.dumps(meta))
    root = json.loads((store / "zarr.json").read_text())
    change(root["consolidated_metadata"]["metadata"][name])
    (store / "zarr.json").write_text(json.dumps(root))


def edit_attribute(store: Path, key: str, change) -> None:
    root = json.loads((store / "zarr.json").read_text())
    root["attributes"][key] = change(root["attributes"][key])
    (store / "zarr.json").write_text(json.dumps(root))


def rewrite_coordinate(store: Path, name: str, values) -> None:
    zarr.open_group(str(store), mode="r+", use_consolidated=False)[name][...] = values


def unit_chunks(store: Path, i: int, j: int) -> dict[str, Path]:
    """The chunk file of unit (i, j) in every array with ``p`` and ``m`` dimensions."""
    out = {}
    for meta_file in store.glob("*/zarr.json"):
        dims = json.loads(meta_file.read_text())["dimension_names"]
        if "p" in dims and "m" in dims:
            key = "/".join(str({"p": i, "m": j}.get(d, 0)) for d in dims)
            out[meta_file.parent.name] = meta_file.parent / "c" / key
    return out


def swap_units(store: Path) -> None:
    a, b = unit_chunks(store, 0, 0), unit_chunks(store, 0, 1)
    for name in a:
        tmp = a[name].with_suffix(".swap")
        a[name].rename(tmp)
        b[name].rename(a[name])
        tmp.rename(b[name])


def foreign_unit(store: Path, other: Path) -> None:
    for name, chunk in unit_chunks(other, 1, 0).items():
        shutil.copyfile(chunk, unit_chunks(store, 1, 0)[name])


CORRUPTIONS = {
    "coordinate rewritten": (lambda s, o: rewrite_coordinate(s, "bandwidth", [3.0e10, 1.0e11]), "coordinate bandwidth: values changed"),
    "coordinate reordered": (lambda s, o: rewrite_coordinate(s, "p", [4, 2]), "coordinate p: values changed"),
    "coordinate chunk deleted": (lambda s, o: (s / "schedule" / "c" / "0").unlink(), "coordinate schedule: values changed"),
    "scale_factor added": (lambda s, o: edit_metadata(s, "t_sim", lambda m: m["attributes"].update(scale_factor=2)),
                           "metadata of t_sim: attributes.scale_factor: recorded (absent), now 2"),
    "add_offset added": (lambda s, o: edit_metadata(s, "comm_time", lambda m: m["attributes"].update(add_offset=1)),
                         "metadata of comm_time: attributes.add_offset"),
    "units changed": (lambda s, o: edit_metadata(s, "t_sim", lambda m: m["attributes"].update(units="ms")),
                      "metadata of t_sim: attributes.units: recorded s, now ms"),
    "fill value changed": (lambda s, o: edit_metadata(s, "idle_sim", lambda m: m.update(fill_value=0.0)), "metadata of idle_sim: fill_value"),
    "units swapped": (lambda s, o: swap_units(s), "2 damaged units (p=2, m=4), (p=2, m=8)"),
    "foreign unit": (foreign_unit, "1 damaged unit (p=4, m=4)"),
    "config edited": (lambda s, o: edit_attribute(s, "config", lambda c: c.replace("1.0e-06", "2.0e-06")), "attribute config edited"),
    "identity edited": (lambda s, o: edit_attribute(s, "identity", lambda c: c.replace("contention", "overlap")), "attribute identity edited"),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_each_corruption_is_named_refused_and_repaired_to_a_clean_store(case, stores, tmp_path, capsys):
    reference, other = stores
    store = tmp_path / "grid.zarr"
    shutil.copytree(reference, store)
    corrupt, reason = CORRUPTIONS[case]
    corrupt(store, other)
    assert verify_main([str(store)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and reason in lines[0], lines
    with pytest.raises(StoreError, match="verify .*--repair"):
        open_results(store)
    assert verify_main([str(store), "--repair"]) == 0, capsys.readouterr().err
    assert snapshot(store) == snapshot(reference)
    open_results(store)


def test_a_rerun_restores_a_damaged_layout_and_never_says_complete_over_damage(stores, tmp_path, capsys):
    reference, other = stores
    store = tmp_path / "grid.zarr"
    shutil.copytree(reference, store)
    rewrite_coordinate(store, "bandwidth", [3.0e10, 1.0e11])
    edit_metadata(store, "t_sim", lambda m: m["attributes"].update(scale_factor=2))
    swap_units(store)
    assert sweep(tmp_path) == 0
    err = capsys.readouterr().err
    assert "already complete" not in err and "resuming: 2 of 4 units already done" in err
    assert "restored the layout from the recorded config: metadata of t_sim" in err and "coordinate bandwidth" in err
    assert snapshot(store) == snapshot(reference)
    edit_attribute(store, "identity", lambda c: c.replace("contention", "overlap"))
    assert sweep(tmp_path) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("error: ") and "attribute identity edited" in lines[-1] and "--repair" in lines[-1]


def test_overwrite_replaces_only_a_ppsweep_store(tmp_path, capsys):
    victim = tmp_path / "grid.zarr"
    victim.mkdir()
    (victim / "thesis.tex").write_text("years of work")
    assert sweep(tmp_path, "overwrite=true") == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "not a ppsweep store" in lines[0] and "overwrite=true replaces only a ppsweep store" in lines[0]
    assert (victim / "thesis.tex").read_text() == "years of work"
    assert sweep(tmp_path) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "not a ppsweep store" in lines[0] and "overwrite=true" not in lines[0] and "delete" not in lines[0]
    with pytest.raises(StoreError, match="not a readable ppsweep store") as refused:
        open_results(victim)
    assert "overwrite=true" not in str(refused.value) and "delete" not in str(refused.value)


def test_a_resume_under_other_code_or_another_user_schedule_is_refused_naming_it(tmp_path, capsys, monkeypatch):
    from ppsweep import disk_cache
    from ppsweep.schedules import user

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    source = "from ppsweep.schedules.one_f_one_b import SCHEDULE\n\ndef make(p, m):\n    return SCHEDULE.build_order(p, m){}\n"
    (tmp_path / "usched_resume.py").write_text(source.format(""))
    args = ["schedules=[gpipe,usched_resume:make]", "m=[4,8]", "shards=2"]
    assert sweep(tmp_path, *args, "shard=0") == 0
    (tmp_path / "usched_resume.py").write_text(source.format("  # edited"))
    user._callable_schedule.cache_clear()
    assert sweep(tmp_path, *args, "shard=1") == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "input file.usched_resume:make.sha256: store has" in line, line
    (tmp_path / "usched_resume.py").write_text(source.format(""))
    monkeypatch.setattr(disk_cache, "code_digest", lambda: "0123456789abcdef")
    assert sweep(tmp_path, *args, "shard=1") == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "ppsweep's code (digest of its source): store has" in line and "this run 0123456789abcdef" in line, line


def test_repair_checks_the_recorded_config_before_importing_anything(tmp_path, capsys, monkeypatch):
    """A store whose recorded config names a module: verify --repair from another directory,
    where a module of that name would run code (first on sys.path, as with ``python -m`` there),
    checks first and imports only the recorded file."""
    from ppsweep.schedules import user

    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    source = "from ppsweep.schedules.one_f_one_b import SCHEDULE\n\ndef make(p, m):\n    return SCHEDULE.build_order(p, m)\n"
    (home / "usched_repair.py").write_text(source)
    (elsewhere / "usched_repair.py").write_text(f"import pathlib\npathlib.Path({str(elsewhere / 'RAN')!r}).write_text('x')\n" + source)
    monkeypatch.chdir(home)
    monkeypatch.syspath_prepend(str(home))
    assert sweep(home, "schedules=[usched_repair:make]", "p=[2]", "m=[4]") == 0
    store = home / "grid.zarr"
    # Now from elsewhere: its module shadows home's by name; nothing of home's stays imported.
    monkeypatch.chdir(elsewhere)
    monkeypatch.syspath_prepend(str(elsewhere))
    monkeypatch.delitem(sys.modules, "usched_repair")
    monkeypatch.setattr(user, "_PINNED", {})
    monkeypatch.delenv(user.PINNED_ENV, raising=False)
    user._callable_schedule.cache_clear()
    (store / "t_sim" / "c" / "0" / "0" / "0" / "0" / "0").unlink()
    assert verify_main([str(store), "--repair"]) == 0, capsys.readouterr().err
    assert not (elsewhere / "RAN").exists()  # the module beside the command never ran
    capsys.readouterr()
    (home / "usched_repair.py").write_text(source + "# edited\n")
    (store / "t_sim" / "c" / "0" / "0" / "0" / "0" / "0").unlink()
    assert verify_main([str(store), "--repair"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "input usched_repair:make" in lines[0] and "changed since the store was written" in lines[0], lines
    assert not (elsewhere / "RAN").exists()
    monkeypatch.delenv(user.PINNED_ENV, raising=False)


def test_the_store_size_estimate_is_within_2x_of_the_disk_used(stores):
    import os

    from ppsweep.sweep.config import spec_from_config
    from ppsweep.sweep.estimate import estimate

    reference, _ = stores
    used = sum(os.lstat(os.path.join(d, n)).st_blocks * 512 for d, dirs, files in os.walk(reference) for n in [*dirs, *files])
    used += os.lstat(reference).st_blocks * 512
    estimated = estimate(spec_from_config(compose_config([*GRID, "results_dir=x"]))).store_bytes
    assert used / 2 <= estimated <= 2 * used, (estimated, used)


def test_repair_refuses_a_crafted_config_before_evaluating_it(stores, tmp_path, capsys):
    """The config attribute and its copy in the record both edited to hold a runaway resolver:
    refused in one line, at once (the recorded config is stored resolved)."""
    import time

    reference, _ = stores
    store = tmp_path / "grid.zarr"
    shutil.copytree(reference, store)

    def craft(root):
        for holder in (root["attributes"], root["attributes"]["integrity"]["attributes"]):
            holder["config"] = holder["config"].replace("bandwidth:", "bandwidth: ${logspace:1,10,100000000}\nunused:", 1)

    root = json.loads((store / "zarr.json").read_text())
    craft(root)
    (store / "zarr.json").write_text(json.dumps(root))
    start = time.perf_counter()
    assert verify_main([str(store), "--repair"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "cannot repair" in lines[0] and "interpolation" in lines[0], lines
    assert time.perf_counter() - start < 5
