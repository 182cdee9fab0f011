"""Inject random faults into real sweeps and count what happens to the store.

    python scripts/faults.py [--faults 60] [--seed 0] [--dir /tmp/ppsweep-faults]

Faults, drawn at random (``--seed``):

- **kill**: a ``python -m ppsweep`` run SIGKILLed after a random delay (during start-up, the
  layout, a unit's computation or its writes, or after it finished);
- **corrupt**: a finished store damaged on disk: a chunk deleted, truncated, overwritten with a
  neighbouring unit's chunk, or with random bytes, one bit flipped; a unit's checksum or done chunk
  deleted or overwritten;
- **concurrent**: two or three identical runs started at once, plus, at a random moment, a run
  of another identity (a different latency) with ``overwrite=true`` or without it, and sometimes
  a SIGKILL of one of the writers;
- **layout** (issue 31): what a reader sees around the values: a coordinate rewritten, reordered
  or one of its chunks deleted; a variable's metadata edited (``scale_factor``, ``add_offset``,
  ``units``, fill value); two units swapped, checksums included; a unit copied in from a store of
  another identity; an attribute edited (recorded config, identity, fingerprint). Checked with
  ``verify`` and ``open_results``, repaired with ``verify --repair``;
- **code** (issue 34): shard 0 written by this code, shard 1 run by a copy of the package whose
  ``message_bytes`` is 5 % larger: it must be refused;
- **schedule**: shard 0 with a user schedule ``module:function``, the module edited, shard 1: refused;
- **cache**: the table and envelope caches of a sweep poisoned (gpipe's table file copied over
  1f1b's, or an envelope array scaled and re-saved under its name), then a new sweep from them;
- **elsewhere**: ``verify --repair`` of a damaged store with a user schedule, run from another
  directory holding a module of the same name that would run code: it must check, never import it.

``--shards-load`` instead runs 8 shards of one sweep as concurrent processes with random SIGKILLs
and restarts until each has finished, then ``finalize=true``, and compares the store with a single
run's (every value, coordinate, metadata and attribute but the recorded config, which names
``results_dir`` and ``shards``).

After each fault the store is checked against references computed once, uninterrupted, for
each identity. Counts:

- **injected**: faults injected;
- **detected**: the fault left something to redo, and ppsweep saw it (units not done, damaged units
  named by the checksums, or a run refused with one ``error:`` line);
- **harmless**: the fault changed no value (e.g. a kill after the run finished);
- **resumed identical**: re-running the same command afterwards (``ppsweep.store.verify --repair`` for
  corruptions) gave a store bit-identical (every value) to the reference;
- **silent**: a unit marked done and passing its checksum holds values that differ from the
  reference, or a run exited 0 saying complete while the store was not whole, or ``verify`` exited
  0 over a store whose coordinates, metadata or attributes differ from the reference's, or a
  shard under other code or another schedule was accepted, or a poisoned cache changed a value,
  or a repair imported code from its working directory. Must be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import zarr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppsweep import disk_cache  # noqa: E402
from ppsweep.sweep.config import load_plan  # noqa: E402
from ppsweep.sweep.runner import configure_jax, run_sweep  # noqa: E402
from ppsweep.store.units import damaged_units, done_units, read_unit, stored_variables  # noqa: E402
from ppsweep.store.integrity import COVERED  # noqa: E402
from ppsweep.store.errors import StoreError  # noqa: E402
from ppsweep.store.open import open_results  # noqa: E402
from ppsweep.store.verify import verify  # noqa: E402

GRID = [
    "schedules=[gpipe,1f1b]",
    "p=[2,4]",
    "m=[4,8]",
    "bandwidth=[1.0e10,1.0e11]",
    "latency=[1.0e-6]",
    "comm.mode=contention",
]
OTHER = ["latency=[1.0e-5]"]  # another identity
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def sweep_args(out: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "ppsweep", *GRID, "name=f", f"results_dir={out}", f"engine.compilation_cache={out.parent / 'jax-cache'}", *extra]


def unit_values(group: zarr.Group, i: int, j: int) -> bytes:
    return b"".join(np.asarray(v).tobytes() for v in read_unit(group, i, j).values())


def all_values(path: Path) -> bytes:
    group = zarr.open_group(str(path), mode="r")
    return b"".join(np.asarray(group[name][...]).tobytes() for name in [*stored_variables(group), "done"])


class Checker:
    """References per identity, and the check of a store against them."""

    def __init__(self, base: Path) -> None:
        configure_jax(None)
        self.refs: dict[str, Path] = {}
        self.specs = {}
        for extra in ([], OTHER):
            plan = load_plan([*GRID, "name=f", *extra])
            path = base / f"reference{len(self.refs)}" / "f.zarr"
            if not path.exists():
                run_sweep(plan.spec, path, plan.config_yaml, progress=False)
            fp = str(zarr.open_group(str(path), mode="r").attrs["fingerprint"])
            self.refs[fp], self.specs[fp] = path, plan

    def silent_units(self, path: Path) -> tuple[str | None, int, int, int]:
        """``(fingerprint, wrong units that pass, damaged units, units not done)`` of the store at ``path``."""
        try:
            group = zarr.open_group(str(path), mode="r")
            fp = str(group.attrs["fingerprint"])
            done = done_units(group)
        except Exception:  # noqa: BLE001 - no store, or its root is gone: nothing passes
            return None, 0, 0, 0
        if fp not in self.refs:
            return fp, int(done.sum()), 0, 0
        reference = zarr.open_group(str(self.refs[fp]), mode="r")
        damaged = set(damaged_units(group))
        wrong = 0
        for i, j in np.argwhere(done).tolist():
            if (i, j) not in damaged and unit_values(group, i, j) != unit_values(reference, i, j):
                wrong += 1
        return fp, wrong, len(damaged), int((~done).sum())

    def identical(self, path: Path) -> bool:
        fp = str(zarr.open_group(str(path), mode="r").attrs["fingerprint"])
        return all_values(path) == all_values(self.refs[fp])


def run_with_kill(args: list[str], delay: float | None, after_lines: int = 0) -> tuple[int, str]:
    """Run ``args``; with ``delay``, SIGKILL it ``delay`` s after its ``after_lines``-th progress line
    (0: after its first line, when the store is being laid out)."""
    process = subprocess.Popen(args, cwd=ROOT, env=ENV, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    if delay is None:
        return process.wait(), process.communicate()[1]
    assert process.stderr is not None
    seen, lines = 0, []
    for line in process.stderr:
        lines.append(line)
        if line.startswith("[") or (after_lines == 0 and line.startswith("sweep ")):
            seen += 1
        if seen >= max(after_lines, 1):
            break
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    _, err = process.communicate()
    return process.returncode, "".join(lines) + err


def resume_in_process(checker: "Checker", path: Path, fp: str | None) -> bool:
    """Re-run the sweep of identity ``fp`` (the same code as the command, in this process); identical to its reference?"""
    plan = checker.specs.get(fp or _first(checker))
    try:
        report = run_sweep(plan.spec, path, plan.config_yaml, progress=False)
    except Exception as error:  # noqa: BLE001 - a failed resume is counted, not raised
        print(f"  resume failed: {error}", flush=True)
        return False
    return report.complete and checker.identical(path)


def fault_kill(checker: Checker, out: Path, rng: random.Random, typical: float) -> dict:
    store = out / "f.zarr"
    units = 4
    after = rng.randrange(0, units + 1)
    delay = rng.uniform(0, typical / (units + 2))
    status, _ = run_with_kill(sweep_args(out, []), delay, after)
    fp, wrong, damaged, missing = checker.silent_units(store)
    result = {"kind": f"kill {delay:.1f}s after line {after} (exit {status})", "silent": wrong > 0,
              "detected": missing > 0 or damaged > 0}
    result["resumed"] = resume_in_process(checker, store, fp)
    result["harmless"] = not result["detected"]
    return result


CORRUPTIONS = ["delete", "truncate", "neighbour", "random", "bitflip"]


def fault_corrupt(checker: Checker, out: Path, rng: random.Random, base: Path) -> dict:
    store = out / "f.zarr"
    shutil.copytree(checker.refs[next(iter(checker.refs))], store)
    group = zarr.open_group(str(store), mode="r")
    n_p, n_m = done_units(group).shape
    i, j = rng.randrange(n_p), rng.randrange(n_m)
    how = rng.choice(CORRUPTIONS)
    chunk = chunk_path(group, store, rng.choice([*stored_variables(group), "checksum", "done"]), i, j)
    before = all_values(store)
    if how == "delete":
        chunk.unlink(missing_ok=True)
    elif how == "truncate" and chunk.exists():
        data = chunk.read_bytes()
        chunk.write_bytes(data[: rng.randrange(max(1, len(data)))])
    elif how == "neighbour":
        k, l = rng.choice([(a, b) for a in range(n_p) for b in range(n_m) if (a, b) != (i, j)])
        other = chunk_path(group, store, chunk.relative_to(store).parts[0], k, l)
        if other.exists():
            shutil.copyfile(other, chunk)
    elif how == "random" and chunk.exists():
        chunk.write_bytes(bytes(rng.randrange(256) for _ in range(max(1, chunk.stat().st_size))))
    elif how == "bitflip" and chunk.exists():
        data = bytearray(chunk.read_bytes())
        bit = rng.randrange(len(data) * 8)
        data[bit // 8] ^= 1 << (bit % 8)
        chunk.write_bytes(bytes(data))
    changed = _values_or_none(store) != before
    fp, wrong, damaged, missing = checker.silent_units(store)
    result = {"kind": f"{how} {chunk.relative_to(store)}", "silent": wrong > 0, "detected": damaged > 0 or missing > 0}
    result["harmless"] = not changed and not result["detected"]
    status, line = verify(store, repair=True)  # python -m ppsweep.verify STORE --repair, in this process
    result["resumed"] = status == 0 and checker.identical(store)
    if status == 0 and not result["resumed"] and "not yet computed" in line:  # a deleted done flag: verify says to re-run
        result["resumed"] = resume_in_process(checker, store, fp)
    return result


def chunk_path(group: zarr.Group, store: Path, name: str, i: int, j: int) -> Path:
    """The chunk file of unit ``(i, j)`` of array ``name`` (one chunk per unit)."""
    if name in ("checksum", "done"):
        return store / name / "c" / str(i) / str(j)
    dims = group[name].metadata.dimension_names
    return store / name / "c" / "/".join(str({"p": i, "m": j}.get(d, 0)) for d in dims)


def _values_or_none(path: Path) -> bytes | None:
    try:
        return all_values(path)
    except Exception:  # noqa: BLE001 - unreadable: changed
        return None


def fault_concurrent(checker: Checker, out: Path, rng: random.Random, typical: float) -> dict:
    store = out / "f.zarr"
    writers = rng.choice([2, 3])
    processes = [subprocess.Popen(sweep_args(out, []), cwd=ROOT, env=ENV, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
                 for _ in range(writers)]
    time.sleep(rng.uniform(0, typical / 3))  # while the writers run (most of a run is start-up)
    intruder_args = OTHER + (["overwrite=true"] if rng.random() < 0.7 else [])
    intruder = subprocess.Popen(sweep_args(out, intruder_args), cwd=ROOT, env=ENV, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    killed = False
    if rng.random() < 0.3:
        time.sleep(rng.uniform(0, typical / 2))
        processes[0].send_signal(signal.SIGKILL)
        killed = True
    outcomes = [(p.wait(), p.communicate()[1]) for p in [*processes, intruder]]
    fp, wrong, damaged, missing = checker.silent_units(store)
    intruder_won = outcomes[-1][0] == 0
    # Writers that exited 0 said their units are in the store: unless the intruder replaced it
    # (allowed only when no writer was active), it must now be whole and equal to the reference.
    false_claim = not intruder_won and any(s == 0 for s, _ in outcomes[:-1]) and not (fp == _first(checker) and missing == 0 and checker.identical(store))
    refused = [s == 2 and e.strip().splitlines()[-1].startswith("error: ") for s, e in outcomes]
    result = {
        "kind": f"{writers} writers + {'overwrite ' if 'overwrite=true' in intruder_args else ''}intruder{' + kill' if killed else ''}"
        f" -> exits {[s for s, _ in outcomes]}",
        "silent": wrong > 0 or false_claim,
        "detected": any(refused) or missing > 0,
    }
    result["resumed"] = resume_in_process(checker, store, fp)
    result["harmless"] = not result["detected"]
    return result


# ---- issue 31: what a reader sees around the values -------------------------------------------------
def snapshot(path: Path) -> dict:
    """What a reader sees: every array's values and metadata (and its consolidated copy), and the covered attributes."""
    group = zarr.open_group(str(path), mode="r", use_consolidated=False)
    root = json.loads((path / "zarr.json").read_text())
    out = {f"attr {k}": root["attributes"].get(k) for k in COVERED if k != "base_dir"}
    for name in sorted(group.array_keys()):
        out[name] = np.asarray(group[name][...]).tobytes()
        out[f"{name} meta"] = json.loads((path / name / "zarr.json").read_text())
        out[f"{name} consolidated"] = root.get("consolidated_metadata", {}).get("metadata", {}).get(name)
    return out


def _edit_json(file: Path, change) -> None:
    data = json.loads(file.read_text())
    change(data)
    file.write_text(json.dumps(data))


def _edit_metadata(store: Path, name: str, change) -> None:
    _edit_json(store / name / "zarr.json", change)
    _edit_json(store / "zarr.json", lambda root: change(root["consolidated_metadata"]["metadata"][name]))


def _unit_chunks(store: Path, i: int, j: int) -> dict[str, Path]:
    out = {}
    for meta in store.glob("*/zarr.json"):
        dims = json.loads(meta.read_text())["dimension_names"]
        if "p" in dims and "m" in dims:
            out[meta.parent.name] = meta.parent / "c" / "/".join(str({"p": i, "m": j}.get(d, 0)) for d in dims)
    return out


LAYOUT = ["coordinate", "coordinate order", "coordinate chunk", "scale_factor", "add_offset", "units", "fill value",
          "unit swap", "foreign unit", "attribute config", "attribute identity", "attribute fingerprint"]


def fault_layout(checker: Checker, out: Path, rng: random.Random) -> dict:
    """One corruption of what a reader sees around the values (issue 31); verify, open_results, repair."""
    reference, foreign = list(checker.refs.values())[:2]
    store = out / "f.zarr"
    shutil.copytree(reference, store)
    how = rng.choice(LAYOUT)
    group = zarr.open_group(str(store), mode="r+", use_consolidated=False)
    variable = rng.choice([name for name in stored_variables(group) if name not in ("valid", "fits")])
    n_p, n_m = done_units(group).shape
    if how == "coordinate":
        name = rng.choice(["bandwidth", "latency", "p", "m"])
        values = np.asarray(group[name][...])
        values[rng.randrange(values.size)] *= 3
        group[name][...] = values
    elif how == "coordinate order":
        name = rng.choice(["p", "m", "schedule"])
        group[name][...] = np.asarray(group[name][...])[::-1]
    elif how == "coordinate chunk":
        (store / rng.choice(["bandwidth", "p", "m", "schedule", "latency"]) / "c" / "0").unlink()
    elif how in ("scale_factor", "add_offset"):
        _edit_metadata(store, variable, lambda m: m["attributes"].update({how: rng.choice([2, 0.5, 1])}))
    elif how == "units":
        _edit_metadata(store, variable, lambda m: m["attributes"].update(units="ms"))
    elif how == "fill value":
        _edit_metadata(store, variable, lambda m: m.update(fill_value=0.0))
    elif how == "unit swap":
        a = (rng.randrange(n_p), rng.randrange(n_m))
        b = rng.choice([(x, y) for x in range(n_p) for y in range(n_m) if (x, y) != a])
        one, two = _unit_chunks(store, *a), _unit_chunks(store, *b)
        for name in one:
            tmp = one[name].with_suffix(".swap")
            one[name].rename(tmp)
            two[name].rename(one[name])
            tmp.rename(two[name])
        how += f" {a}<->{b}"
    elif how == "foreign unit":
        unit = (rng.randrange(n_p), rng.randrange(n_m))
        for name, chunk in _unit_chunks(foreign, *unit).items():
            shutil.copyfile(chunk, _unit_chunks(store, *unit)[name])
        how += f" {unit}"
    else:
        key = how.split()[1]
        edits = {"config": lambda c: c.replace("contention", "overlap"), "identity": lambda c: c.replace("1e-06", "2e-06"),
                 "fingerprint": lambda c: c[::-1]}
        _edit_json(store / "zarr.json", lambda root: root["attributes"].update({key: edits[key](root["attributes"][key])}))
    changed = snapshot(store) != snapshot(reference)
    status, line = verify(store)
    try:
        open_results(store)
        opened = True
    except StoreError:
        opened = False
    result = {"kind": f"{how}" + (f" ({variable})" if how in ("scale_factor", "add_offset", "units", "fill value") else ""),
              "detected": status == 1, "silent": changed and (status == 0 or opened), "harmless": not changed and status == 0}
    try:
        status, line = verify(store, repair=True)
    except StoreError as error:
        status, line = 2, str(error)
    result["resumed"] = status == 0 and snapshot(store) == snapshot(reference)
    if not result["resumed"]:
        print(f"  repair: {line}", flush=True)
    return result


# ---- issue 34: code, user schedules, caches, repair from elsewhere -----------------------------------
USCHED = "from ppsweep.schedules.one_f_one_b import SCHEDULE\n\ndef make(p, m):\n    return SCHEDULE.build_order(p, m)\n"
EVIL = "import pathlib\npathlib.Path(__file__).with_name('RAN').write_text('x')\n"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _run(args: list[str], cwd: Path, env: dict | None = None) -> tuple[int, str]:
    done = subprocess.run(args, cwd=cwd, env=env or ENV, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stderr


def fault_code(checker: Checker, out: Path, rng: random.Random) -> dict:
    """Shard 0 by this code, shard 1 by a copy whose message sizes are 5 % larger: refused?"""
    code = out / "code"
    shutil.copytree(ROOT / "ppsweep", code / "ppsweep", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "conf", code / "conf")
    costs = code / "ppsweep" / "cost_model" / "model.py"
    line = "        return b * self.sequence * self.hidden * self.bytes_per_value\n"
    text = costs.read_text()
    assert line in text, "message_bytes changed: update fault_code"
    costs.write_text(text.replace(line, line.replace("return b", "return 1.05 * b")))
    args = [*sweep_args(out, ["shards=2"])]
    first, err0 = _run([*args, "shard=0"], ROOT)
    second, err1 = _run([*args, "shard=1"], out, {**ENV, "PYTHONPATH": str(code)})
    refused = second == 2 and "ppsweep's code" in _last_line(err1)
    result = {"kind": f"shard 1 under changed code -> exits {[first, second]}", "detected": refused, "silent": second == 0, "harmless": False}
    status, _ = _run([*args, "shard=1"], ROOT)
    result["resumed"] = first == 0 and status == 0 and checker.identical(out / "f.zarr")
    return result


class UserSchedule:
    """A sweep with a user schedule (gpipe and ``usched_f:make``) and its reference, computed once."""

    def __init__(self, base: Path) -> None:
        self.home = base / "usched"
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "usched_f.py").write_text(USCHED)
        self.reference = self.home / "f.zarr"
        if not self.reference.exists():
            status, err = _run(self.args(self.home), self.home)
            assert status == 0, err

    @staticmethod
    def args(out: Path, extra: tuple[str, ...] = ()) -> list[str]:
        return [*sweep_args(out, ["schedules=[gpipe,usched_f:make]", *extra])]


def fault_schedule(checker: Checker, out: Path, rng: random.Random, users: UserSchedule) -> dict:
    """Shard 0 with the user schedule, its module edited, shard 1: refused?"""
    (out / "usched_f.py").write_text(USCHED)
    args = users.args(out, ("shards=2",))
    first, _ = _run([*args, "shard=0"], out)
    edited = USCHED.replace("one_f_one_b", "gpipe") if rng.random() < 0.5 else USCHED + "# a comment\n"
    (out / "usched_f.py").write_text(edited)
    second, err = _run([*args, "shard=1"], out)
    refused = second == 2 and "usched_f:make" in _last_line(err)
    result = {"kind": f"user schedule edited between shards -> exits {[first, second]}", "detected": refused,
              "silent": second == 0, "harmless": False}
    (out / "usched_f.py").write_text(USCHED)
    status, _ = _run([*args, "shard=1"], out)
    result["resumed"] = first == 0 and status == 0 and all_values(out / "f.zarr") == all_values(users.reference)
    return result


def fault_elsewhere(checker: Checker, out: Path, rng: random.Random, users: UserSchedule) -> dict:
    """A damaged store with a user schedule, repaired from a directory holding a module of that name."""
    store = out / "f.zarr"
    shutil.copytree(users.reference, store)
    group = zarr.open_group(str(store), mode="r")
    chunk = chunk_path(group, store, rng.choice(stored_variables(group)), rng.randrange(2), rng.randrange(2))
    chunk.unlink(missing_ok=True)
    elsewhere = out / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "usched_f.py").write_text(EVIL + USCHED.replace("one_f_one_b", "gpipe"))
    status, err = _run([sys.executable, "-m", "ppsweep.verify", str(store), "--repair"], elsewhere)
    ran = (elsewhere / "RAN").exists()
    same = all_values(store) == all_values(users.reference)
    return {"kind": f"repair from elsewhere ({chunk.relative_to(store)}) -> exit {status}", "detected": status == 0 and not ran,
            "silent": ran or (status == 0 and not same), "harmless": False, "resumed": status == 0 and same and not ran}


CACHE_GRID = ["schedules=[gpipe,1f1b]", "p=[32]", "m=[256]", "bandwidth=[1.0e10]", "latency=[1.0e-6]", "comm.mode=contention"]


def fault_cache(checker: Checker, out: Path, rng: random.Random) -> dict:
    """A sweep's caches poisoned (a table file copied over another's, an envelope array scaled), then the sweep again."""
    env = {**ENV, "PPSWEEP_TABLE_CACHE": str(out / "tables"), "PPSWEEP_ENVELOPE_CACHE": str(out / "envelopes")}
    base = [sys.executable, "-m", "ppsweep", *CACHE_GRID, f"results_dir={out}", f"engine.compilation_cache={out.parent / 'jax-cache'}"]
    status, err = _run([*base, "name=clean"], ROOT, env)
    assert status == 0, err
    names = {}
    for file in (out / "tables").glob(f"*{disk_cache.SUFFIX}"):
        names[disk_cache.unpack(file.read_bytes())[0]["meta"]["name"]] = file
    if rng.random() < 0.5 and {"gpipe", "1f1b"} <= set(names):
        shutil.copyfile(names["gpipe"], names["1f1b"])
        poisoned = names["1f1b"]
        how = "gpipe's table file over 1f1b's"
    else:
        candidates = []
        for file in sorted((out / "envelopes").glob(f"*{disk_cache.SUFFIX}")) + sorted((out / "tables").glob(f"*{disk_cache.SUFFIX}")):
            header, arrays, _ = disk_cache.unpack(file.read_bytes())
            keys = [k for k, a in arrays.items() if a.dtype.kind in "fiu" and a.size > 1]
            if keys:
                candidates.append((file, header, arrays, keys))
        file, header, arrays, keys = rng.choice(candidates)
        key = rng.choice(keys)
        arrays[key] = (arrays[key] * 1.01 if arrays[key].dtype.kind == "f" else arrays[key][::-1] + 1).astype(arrays[key].dtype)
        # re-saved with its header (and so its digest) as it was
        file.write_bytes(disk_cache.pack({k: v for k, v in header.items() if k != "arrays"}, arrays))
        poisoned = file
        how = f"{file.parent.name} file array {key} edited, re-saved"
    bad = poisoned.read_bytes()
    status, err = _run([*base, "name=again"], ROOT, env)
    same = status == 0 and all_values(out / "again.zarr") == all_values(out / "clean.zarr")
    rebuilt = poisoned.read_bytes() != bad  # the poisoned file was read, refused and replaced
    return {"kind": f"cache poisoned: {how} -> exit {status}{', file rebuilt' if rebuilt else ''}", "detected": rebuilt,
            "silent": status == 0 and not same, "harmless": False, "resumed": same}


# ---- load: 8 shards at once, with kills and restarts ---------------------------------------------------
SHARDS_GRID = ["schedules=[gpipe,1f1b]", "p=[2,4]", "m=[4,8,12,16]", "bandwidth=[1.0e10,1.0e11]", "latency=[1.0e-6]", "comm.mode=contention"]


def shards_load(base: Path, seed: int, shards: int = 8) -> bool:
    """Run ``shards`` shards as concurrent processes, SIGKILL random ones at random moments and
    restart them until each exits 0, then finalize; True when the store equals a single run's."""
    rng = random.Random(seed)
    out = base / "shards"
    shutil.rmtree(out, ignore_errors=True)
    reference = base / "shards-reference"
    common = [sys.executable, "-m", "ppsweep", *SHARDS_GRID, "name=f", f"engine.compilation_cache={base / 'jax-cache'}", "progress=false"]
    if not (reference / "f.zarr").exists():
        status, err = _run([*common, f"results_dir={reference}"], ROOT)
        assert status == 0, err
    args = [*common, f"results_dir={out}", f"shards={shards}"]
    running = {k: subprocess.Popen([*args, f"shard={k}"], cwd=ROOT, env=ENV, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
               for k in range(shards)}
    kills = restarts = 0
    start = time.perf_counter()
    while running:
        time.sleep(rng.uniform(0.2, 2.0))
        for k, process in list(running.items()):
            if process.poll() is not None:
                err = process.communicate()[1]
                if process.returncode == 0:
                    del running[k]
                    continue
                print(f"  shard {k} exit {process.returncode}: {_last_line(err)}", flush=True)
                running[k] = subprocess.Popen([*args, f"shard={k}"], cwd=ROOT, env=ENV, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
                restarts += 1
        if running and rng.random() < 0.3 and kills < 3 * shards:
            k = rng.choice(list(running))
            running[k].send_signal(signal.SIGKILL)
            kills += 1
    status, err = _run([*args, "finalize=true"], ROOT)
    # Everything a reader sees but the recorded config, which names results_dir and shards (they differ by construction).
    mine, theirs = snapshot(out / "f.zarr"), snapshot(reference / "f.zarr")
    same = status == 0 and {k: v for k, v in mine.items() if k != "attr config"} == {k: v for k, v in theirs.items() if k != "attr config"}
    print(f"{shards} shards at once: {kills} SIGKILLs, {restarts} restarts, {time.perf_counter() - start:.0f} s; "
          f"finalize exit {status} ({_last_line(err)}); store identical to a single run's: {same}", flush=True)
    return same


def _first(checker: Checker) -> str:
    return next(iter(checker.refs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", default="/tmp/ppsweep-faults")
    parser.add_argument("--mix", default="kill=2,corrupt=3,concurrent=1,layout=8,code=1,schedule=1,cache=1,elsewhere=1",
                        help="relative weights of the fault kinds")
    parser.add_argument("--shards-load", action="store_true", help="8 shards at once with random kills and restarts, then finalize")
    args = parser.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    if args.shards_load:
        sys.exit(0 if shards_load(base, args.seed) else 1)
    rng = random.Random(args.seed)
    checker = Checker(base)
    # One uninterrupted run measures a typical run's duration (the kill delays are drawn up to it).
    out = base / "timing"
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    status, err = run_with_kill(sweep_args(out, []), None)
    typical = time.perf_counter() - start
    assert status == 0 and checker.identical(out / "f.zarr"), err
    print(f"typical run: {typical:.1f} s", flush=True)
    weights = {k: float(v) for k, v in (item.split("=") for item in args.mix.split(","))}
    users = UserSchedule(base) if weights.get("schedule") or weights.get("elsewhere") else None
    counts: Counter = Counter()
    for n in range(args.faults):
        kind = rng.choices(list(weights), weights=list(weights.values()))[0]
        out = base / f"fault{n}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        if kind == "kill":
            result = fault_kill(checker, out, rng, typical)
        elif kind == "corrupt":
            result = fault_corrupt(checker, out, rng, base)
        elif kind == "layout":
            result = fault_layout(checker, out, rng)
        elif kind == "code":
            result = fault_code(checker, out, rng)
        elif kind == "schedule":
            result = fault_schedule(checker, out, rng, users)
        elif kind == "cache":
            result = fault_cache(checker, out, rng)
        elif kind == "elsewhere":
            result = fault_elsewhere(checker, out, rng, users)
        else:
            result = fault_concurrent(checker, out, rng, typical)
        counts["injected"] += 1
        counts[f"injected {kind}"] += 1
        for key in ("detected", "harmless", "resumed", "silent"):
            counts[key] += bool(result[key])
        print(f"[{n + 1}/{args.faults}] {kind}: {result['kind']}: "
              + ", ".join(k for k in ("detected", "harmless", "resumed", "silent") if result[k]), flush=True)
        shutil.rmtree(out, ignore_errors=True)
    kinds = ", ".join(f"{counts[f'injected {k}']} {k}" for k in weights if counts[f"injected {k}"])
    print(
        f"injected {counts['injected']} ({kinds}); detected {counts['detected']}, "
        f"harmless {counts['harmless']}, resumed identical {counts['resumed']}, silent {counts['silent']}"
    )
    sys.exit(1 if counts["silent"] or counts["resumed"] < counts["injected"] else 0)


if __name__ == "__main__":
    main()
