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
  a SIGKILL of one of the writers.

After each fault the store is checked against references computed once, uninterrupted, for
each identity. Counts:

- **injected**: faults injected;
- **detected**: the fault left something to redo, and ppsweep saw it (units not done, damaged units
  named by the checksums, or a run refused with one ``error:`` line);
- **harmless**: the fault changed no value (e.g. a kill after the run finished);
- **resumed identical**: re-running the same command afterwards (``ppsweep.store.verify --repair`` for
  corruptions) gave a store bit-identical (every value) to the reference;
- **silent**: a unit marked done and passing its checksum holds values that differ from the
  reference, or a run exited 0 saying complete while the store was not whole. Must be 0.
"""

from __future__ import annotations

import argparse
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

from ppsweep.sweep.config import load_plan  # noqa: E402
from ppsweep.sweep.runner import configure_jax, run_sweep  # noqa: E402
from ppsweep.store.results import damaged_units, done_units, read_unit, stored_variables  # noqa: E402
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


def _first(checker: Checker) -> str:
    return next(iter(checker.refs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", default="/tmp/ppsweep-faults")
    parser.add_argument("--mix", default="kill=3,corrupt=6,concurrent=1", help="relative weights of the fault kinds")
    args = parser.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
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
        else:
            result = fault_concurrent(checker, out, rng, typical)
        counts["injected"] += 1
        counts[f"injected {kind}"] += 1
        for key in ("detected", "harmless", "resumed", "silent"):
            counts[key] += bool(result[key])
        print(f"[{n + 1}/{args.faults}] {kind}: {result['kind']}: "
              + ", ".join(k for k in ("detected", "harmless", "resumed", "silent") if result[k]), flush=True)
        shutil.rmtree(out, ignore_errors=True)
    print(
        f"injected {counts['injected']} ({counts['injected kill']} kills, {counts['injected corrupt']} corruptions, "
        f"{counts['injected concurrent']} concurrent-writer runs); detected {counts['detected']}, "
        f"harmless {counts['harmless']}, resumed identical {counts['resumed']}, silent {counts['silent']}"
    )
    sys.exit(1 if counts["silent"] or counts["resumed"] < counts["injected"] else 0)


if __name__ == "__main__":
    main()
