#!/usr/bin/env python
"""Benchmark the engine (scan and envelope) against the reference simulator on the same points.

    python scripts/bench.py              # the table (under two minutes on 2 cores)
    python scripts/bench.py --large      # + a >= 10 million point sweep into a zarr store, end to end
    python scripts/bench.py --scaling    # + points/s and compile time as p and m grow (minutes)
    python scripts/bench.py --skip-table --noise   # noisy samples/s beside the noise-free scan
    python scripts/bench.py --tables     # per-table work: build, compile, envelope programme, fast vs reference;
                                         #   the array orders against their references at p=64, m=1024
    python scripts/bench.py --skip-table --peers   # ppsweep beside the peers a user would pick, same grid, one run
    python scripts/bench.py --million    # + python -m ppsweep +sweep=million end to end (temporary store),
                                         #   cold (empty table, envelope and JAX caches) then warm (second run)
    python scripts/bench.py --design     # + python -m ppsweep +sweep=design end to end: cold, warm, then cold with numba's kernels compiled (minutes)
    python scripts/bench.py --skip-table --design --design-repeats 3   # the same three times over; the targets take the medians
    python scripts/bench.py --skip-table --periodic   # the periodic scan beside the plain compiled scan (minutes)
    python scripts/bench.py --skip-table --scan-calls # one periodic-scan call on 1-96 points of a long table, one thread
    python scripts/bench.py --skip-table --million --compare-workers   # + the same with engine.workers=1

Every run ends with the issue-15 targets, each beside its measured value and its ratio to the
figures before that work ("today": build 20 µs/op, compile 40 µs/op, million 30 k points/s,
scan 243 k points/s, envelope 129 M points/s); a target shows "-" where this run did not measure it.

Points come from the cost model (conf/model/megatron_128l.yaml, conf/system/baseline.yaml) at
p=8, m=32 over a bandwidth × latency grid. For every schedule and comm mode the table gives:

- points per second: the median of several repetitions after a first call (which compiles);
  the scan on 65,536 points, the envelope on 1,000,000 (``finish=False``, as sweeps call it),
  the reference simulator on a few points (it runs one point at a time);
- compile: the first call's extra time over a warm call (the scan's compiled kernel is shared
  by every table of the same padded shape, so later rows may find it compiled); for the envelope
  that is the max-plus programme that enumerates its vectors plus compiling the evaluation;
- peak RSS: the process's peak resident memory while the row ran (Linux ``VmHWM``, reset
  before each row through ``/proc/self/clear_refs``), which includes XLA's buffers (tracemalloc
  would not see them) and the process's baseline;
- float32 beside float64, with float32's largest relative error in ``t_sim``.

JAX's persistent compilation cache and the envelope cache (``PPSWEEP_ENVELOPE_CACHE``) are not used
in this process, so compile times are cold.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppsweep import build_schedule, usable_cores  # noqa: E402
from ppsweep.engine import envelope as envelope_mod  # noqa: E402
from ppsweep.engine.compiled import compiled_for  # noqa: E402
from ppsweep.cost_model import ModelConfig, SystemConfig, stage_costs  # noqa: E402
from ppsweep.engine.core import MODES, simulate  # noqa: E402
from ppsweep.engine.compiled import program_for  # noqa: E402
from ppsweep.engine.reference import reference_simulate  # noqa: E402

SCHEDULES = ("gpipe", "1f1b", "chimera", "hanayo")


# ---------------------------------------------------------------------------------------------
# machine and memory


def machine() -> str:
    import jax

    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = usable_cores()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"nproc={cores}, CPU: {model}, JAX {jax.__version__} on {len(jax.devices())} {jax.devices()[0].platform} "
        f"device(s), Python {sys.version.split()[0]}, load average {load:.2f} at start"
    )


def reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_mib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------------------------
# points


def configs() -> tuple[ModelConfig, SystemConfig]:
    def load(path: str) -> dict:
        return {k: v for k, v in yaml.safe_load((ROOT / path).read_text()).items() if not str(k).startswith("_")}

    return (
        ModelConfig.from_mapping(load("conf/model/megatron_128l.yaml")),
        SystemConfig.from_mapping(load("conf/system/baseline.yaml")),
    )


def grid_args(table, model, system, n_bandwidth: int, n_latency: int) -> tuple[tuple, dict]:
    """``simulate`` arguments for a bandwidth × latency grid of the cost model at this table."""
    c = stage_costs(model, system, table)
    beta = np.logspace(9, 12, n_bandwidth)[:, None]
    alpha = np.logspace(-7, -4, n_latency)[None, :]
    kwargs = dict(t_i=c.t_i[0], t_w=c.t_w[0], grad_bytes=c.grad_bytes, t_opt=system.optimizer_time)
    return (table, c.t_f[0], c.t_b[0], alpha, beta, c.msg_bytes), kwargs


def grid_features(program, eargs, kw):
    """Envelope features of a ``grid_args`` grid (the per-point cost vectors the envelope multiplies)."""
    per_stage = {name: np.asarray(value) for name, value in
                   (("t_f", eargs[1]), ("t_b", eargs[2]), ("t_i", kw["t_i"]), ("t_w", kw["t_w"]), ("grad_bytes", kw["grad_bytes"]))}
    return envelope_mod.features(
        program, per_stage, np.asarray(eargs[3]), np.asarray(eargs[4]), np.asarray(eargs[5]), np.asarray(kw["t_opt"]), 2
    )


#: Iterations of :func:`speed_probe`'s loop.
PROBE_LOOP = 10_000_000


def speed_probe() -> float:
    """CPU seconds of a fixed pure-Python loop (:data:`PROBE_LOOP` additions), measured now. This
    machine's speed moves within the hour (a module-level loop of 2·10⁷ additions took 1.72 s, then
    3.07 s some ten minutes later, on 2026-12-06), and a sweep's seconds may move with it, so each sweep's
    figure is printed beside the probe taken just before it."""
    start, total = time.process_time(), 0
    for i in range(PROBE_LOOP):
        total += i
    return time.process_time() - start


def timed(fn, reps: int) -> tuple[float, float, object]:
    """(first call's seconds, median of ``reps`` warm calls, last result)."""
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times), out


# ---------------------------------------------------------------------------------------------
# the table


def bench_row(name: str, mode: str, model, system, args) -> dict:
    table = build_schedule(name, 8, 32)
    reset_peak()
    row: dict = {"schedule": name, "mode": mode}

    # scan
    sargs, kw = grid_args(table, model, system, 256, 256)
    small, _ = grid_args(table, model, system, 32, 32)
    n_scan = 256 * 256
    for dtype, tag in ((np.float64, "f64"), (np.float32, "f32")):
        first, warm_small, _ = timed(lambda: simulate(*small, mode, backend="scan", dtype=dtype, **kw), 1)
        _, warm, out = timed(lambda: simulate(*sargs, mode, backend="scan", dtype=dtype, **kw), args.reps)
        row[f"scan_{tag}"] = n_scan / warm
        row[f"scan_{tag}_compile"] = max(0.0, first - warm_small)
        row[f"scan_{tag}_out"] = out.t_sim
    row["scan_f32_err"] = float(np.max(np.abs(row["scan_f32_out"] - row["scan_f64_out"]) / row["scan_f64_out"]))

    # envelope
    eargs, kw = grid_args(table, model, system, 1000, 1000)
    n_env = 1000 * 1000
    program = program_for(table)
    feats = grid_features(program, eargs, kw)
    t0 = time.perf_counter()
    try:
        env = envelope_mod.build_envelope(program, mode, feats.weights, feats.comm, routing=compiled_for(table).routing(mode))
        row["vectors"] = env.n_vectors
    except envelope_mod.EnvelopeTooLarge:
        row["vectors"] = None
    env_out = {}
    for dtype, tag in ((np.float64, "f64"), (np.float32, "f32")):
        first, warm, out = timed(lambda: simulate(*eargs, mode, backend="auto", dtype=dtype, finish=False, **kw), args.reps + 2)
        row[f"env_{tag}"] = n_env / warm
        row[f"env_{tag}_compile"] = max(0.0, first - warm)  # the first call runs the programme (cached after)
        row["env_method"] = out.method
        env_out[tag] = out
    row["env_f32_err"] = float(np.max(np.abs(env_out["f32"].t_sim - env_out["f64"].t_sim) / env_out["f64"].t_sim))
    # the envelope against the scan on the scan's points (float64)
    check = simulate(*sargs, mode, backend="envelope", **kw)
    row["env_vs_scan"] = float(np.max(np.abs(check.t_sim - row["scan_f64_out"]) / row["scan_f64_out"]))

    # reference, a few points of the same grid
    c = stage_costs(model, system, table)
    times = []
    for bw, lat in ((1e9, 1e-7), (5e10, 5e-7), (1e12, 1e-4))[: args.ref_points]:
        t0 = time.perf_counter()
        reference_simulate(table, c.t_f[0], c.t_b[0], lat, bw, c.msg_bytes, mode, t_i=c.t_i[0], t_w=c.t_w[0],
                           grad_bytes=c.grad_bytes, t_opt=system.optimizer_time)
        times.append(time.perf_counter() - t0)
    row["ref"] = 1.0 / statistics.median(times)
    row["peak_mib"] = peak_mib()
    for key in [k for k in row if k.endswith("_out")]:
        del row[key]
    return row


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.1f}M"
    if x >= 1e3:
        return f"{x / 1e3:.0f}k"
    return f"{x:.0f}"


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'schedule':8s} {'mode':10s} {'K':>4s} | {'scan f64':>8s} {'cmp s':>5s} {'scan f32':>8s} {'f32 err':>7s} | "
        f"{'env f64':>7s} {'cmp s':>5s} {'env f32':>7s} {'f32 err':>7s} {'vs scan':>7s} | {'ref':>5s} | "
        f"{'scan/ref':>8s} {'env/ref':>8s} | {'peak':>6s}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        k = "scan" if r["vectors"] is None else str(r["vectors"])
        print(
            f"{r['schedule']:8s} {r['mode']:10s} {k:>4s} | {fmt_rate(r['scan_f64']):>8s} {r['scan_f64_compile']:5.2f} "
            f"{fmt_rate(r['scan_f32']):>8s} {r['scan_f32_err']:7.1e} | {fmt_rate(r['env_f64']):>7s} "
            f"{r['env_f64_compile']:5.2f} {fmt_rate(r['env_f32']):>7s} {r['env_f32_err']:7.1e} {r['env_vs_scan']:7.1e} | "
            f"{r['ref']:5.0f} | {r['scan_f64'] / r['ref']:8.0f} {r['env_f64'] / r['ref']:8.0f} | {r['peak_mib']:5.0f}M"
        )


def mixed(rows: list[dict], mode: str, key: str) -> float:
    """Points/s of the four schedules mixed (equal points each): total points / total time."""
    sel = [r for r in rows if r["mode"] == mode]
    return len(sel) / sum(1.0 / r[key] for r in sel)


def print_summary(rows: list[dict]) -> None:
    print()
    print("Mixed schedules (equal points of gpipe, 1f1b, chimera, hanayo; p=8, m=32), points/s:")
    for mode in MODES:
        scan, scan32 = mixed(rows, mode, "scan_f64"), mixed(rows, mode, "scan_f32")
        env, env32 = mixed(rows, mode, "env_f64"), mixed(rows, mode, "env_f32")
        ref = mixed(rows, mode, "ref")
        print(
            f"  {mode:10s} scan {fmt_rate(scan):>6s} (f32 {fmt_rate(scan32):>6s}, {scan / ref:,.0f}x reference)   "
            f"envelope {fmt_rate(env):>6s} (f32 {fmt_rate(env32):>6s}, {env / ref:,.0f}x reference)   reference {ref:.0f}"
        )
    for key, label in (("scan_f64", "scan"), ("env_f64", "envelope")):
        o, c = mixed(rows, "overlap", key), mixed(rows, "contention", key)
        print(f"  contention / overlap ({label}, f64): {c / o:.2f}")


# ---------------------------------------------------------------------------------------------
# --large: the full path into zarr


def bench_large(n_bandwidth: int, n_latency: int) -> None:
    from ppsweep.sweep.runner import run_sweep
    from ppsweep.sweep.evaluate import SweepSpec

    model, system = configs()
    cfg = {
        "name": "bench_large",
        "schedules": list(SCHEDULES),
        "p": [8],
        "m": [32, 64],
        "bandwidth": np.logspace(9, 12, n_bandwidth).tolist(),
        "latency": np.logspace(-7, -4, n_latency).tolist(),
        "comm": {"mode": "overlap"},
        "engine": {"dtype": "float64", "method": "auto"},
        "model": {k: v for k, v in vars(model).items()},
        "system": {k: v for k, v in vars(system).items()},
    }
    spec = SweepSpec.from_config(cfg)
    print()
    print(f"--large: {spec.n_points:,} points ({' × '.join(f'{d}={n}' for d, n in zip(spec.point_dims, spec.shape(spec.point_dims)))}), "
          f"SweepSpec + run_sweep into a zarr store in a temporary directory")
    with tempfile.TemporaryDirectory() as tmp:
        reset_peak()
        t0 = time.perf_counter()
        report = run_sweep(spec, Path(tmp) / "bench_large.zarr", yaml.safe_dump({"name": "bench_large"}), progress=False)
        wall = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
        print(
            f"  end to end: {report.points_run:,} points in {report.seconds:.1f} s = {report.points_per_second:,.0f} points/s "
            f"(run_sweep's own figure; {wall:.1f} s with opening and closing the store), store {size / 2**20:.0f} MiB, "
            f"peak RSS {peak_mib():.0f} MiB, complete={report.complete}"
        )


# ---------------------------------------------------------------------------------------------
# --scaling


def bench_scaling(names: list[str]) -> None:
    model, system = configs()
    print()
    print("--scaling: overlap, float64; scan on 4,096 points, envelope on 1,000,000 (K = vectors, 'scan' = more than")
    print("the cap, falls back); DP s = the max-plus programme alone; envelope compile s = programme + first evaluation")
    head = f"{'schedule':8s} {'p':>3s} {'m':>5s} {'ops':>7s} | {'scan pts/s':>10s} {'compile s':>9s} | {'K':>4s} {'DP s':>6s} {'env pts/s':>11s} {'compile s':>9s}"
    print(head)
    print("-" * len(head))
    for name in names:
        for p in (8, 16, 32, 64):
            for m in (32, 128, 512, 1024):
                if m < p or (name == "hanayo" and m % p):
                    continue
                try:
                    table = build_schedule(name, p, m)
                except ValueError:
                    continue
                program = program_for(table)
                sargs, kw = grid_args(table, model, system, 64, 64)
                small, _ = grid_args(table, model, system, 8, 8)
                first, warm_small, _ = timed(lambda: simulate(*small, "overlap", backend="scan", **kw), 1)
                _, warm, _ = timed(lambda: simulate(*sargs, "overlap", backend="scan", **kw), 2)
                eargs, kw = grid_args(table, model, system, 1000, 1000)
                feats = grid_features(program, eargs, kw)
                t0 = time.perf_counter()
                try:
                    k = str(envelope_mod.build_envelope(program, "overlap", feats.weights, feats.comm).n_vectors)
                except envelope_mod.EnvelopeTooLarge:
                    k = "scan"
                dp = time.perf_counter() - t0
                if k == "scan":  # the envelope falls back to the scan: nothing more to time
                    env_rate, env_compile = "-", "-"
                else:
                    efirst, ewarm, out = timed(lambda: simulate(*eargs, "overlap", backend="envelope", finish=False, **kw), 2)
                    env_rate, env_compile = f"{1e6 / ewarm:,.0f}", f"{max(0.0, efirst - ewarm):.2f}"
                print(
                    f"{name:8s} {p:3d} {m:5d} {program.n_ops:7d} | {64 * 64 / warm:10,.0f} {max(0.0, first - warm_small):9.2f} | "
                    f"{k:>4s} {dp:6.2f} {env_rate:>11s} {env_compile:>9s}",
                    flush=True,
                )


# ---------------------------------------------------------------------------------------------
# --tables: per-table work, the array paths against the per-operation references

#: Tables timed by --tables: (schedule, p, m); the references run on the first two only (seconds each).
TABLES = (("1f1b", 32, 128), ("hanayo", 16, 64), ("1f1b", 64, 512), ("hanayo", 64, 512), ("chimera", 32, 256))
REFERENCE_TABLES = 2


def bench_tables(reps: int) -> dict:
    """Build + compile of each table, fast and reference, and the envelope programme (overlap).

    Returns the figures the targets use: ``fast_ops_s`` (build + compile, operations per second
    over all tables, median of ``reps``), ``ratio`` (fast / reference on the reference tables),
    ``ready_1f1b`` (seconds until 1F1B p=64, m=512 is built and compiled).
    """
    from ppsweep.engine.fast_program import compile_program_fast
    from ppsweep.tables.fast_realize import realize_fast, validate_fast
    from ppsweep.engine.program import compile_program
    from ppsweep.schedules import get_schedule
    from ppsweep.tables.table import realize
    from ppsweep.tables.validate import validate_table

    model, system = configs()
    print()
    print("--tables: build (order + ASAP realization + validation) and compile (Program) of one table, seconds,")
    print(f"median of {reps}; ops/s = operations / (build + compile); the envelope programme (overlap, the")
    print("cost model's features) compiled (numba) vs lane by lane in numpy; disk = the built table read back from the disk cache")
    print("(ppsweep.tables.cache) instead of order + build. References run on the first two tables only.")
    print("cpu ops/s: the same operations over the process's CPU seconds for order + build + compile (on a loaded")
    print("machine the wall clock also counts the time other processes held the cores).")
    head = (f"{'schedule':8s} {'p':>3s} {'m':>4s} {'ops':>7s} | {'order':>6s} {'build':>6s} {'compile':>7s} {'ops/s':>6s} {'cpu':>6s} {'disk':>6s} | "
            f"{'ref build':>9s} {'ref cmp':>7s} {'ref ops/s':>9s} {'speedup':>7s} | {'env':>6s} {'ref env':>7s}")
    print(head)
    print("-" * len(head))
    total_ops = total_fast = total_cpu = 0.0
    ratios = []
    ready = ready_cached = float("nan")
    # Load the compiled (numba) loops once, as a sweep's process does before its first table, so that
    # the first row's CPU seconds are its own work, not the one-time load.
    compile_program_fast(realize_fast(get_schedule("1f1b").build_order(2, 2)))
    for i, (name, p, m) in enumerate(TABLES):
        schedule = get_schedule(name)
        cpu0 = time.process_time()
        t_order = statistics.median(_seconds(lambda: schedule.build_order(p, m)) for _ in range(reps))
        order = schedule.build_order(p, m)

        def fast_build():
            table = realize_fast(order)
            validate_fast(table)
            return table

        t_build = statistics.median(_seconds(fast_build) for _ in range(reps))
        table = fast_build()
        t_compile = statistics.median(_seconds(lambda: compile_program_fast(table)) for _ in range(reps))
        program = compile_program_fast(table)
        cpu = (time.process_time() - cpu0) / (reps + 1)  # each part ran reps + 1 times
        n = program.n_ops
        fast_rate = n / (t_order + t_build + t_compile)
        total_ops += n
        total_fast += t_order + t_build + t_compile
        total_cpu += cpu
        if (name, p, m) == ("1f1b", 64, 512):
            ready = t_order + t_build + t_compile
        from ppsweep.tables.cache import MIN_CELLS

        t_disk = _disk_read_seconds(name, p, m) if table.kind.size >= MIN_CELLS else float("nan")  # small: never cached
        eargs, kw = grid_args(table, model, system, 16, 4)
        feats = grid_features(program, eargs, kw)

        def envelope(native):
            try:
                envelope_mod.build_envelope(program, "overlap", feats.weights, feats.comm, native=native)
            except envelope_mod.EnvelopeTooLarge:
                pass

        t_env = _seconds(lambda: envelope(True))
        ref = ["-"] * 5
        if i < REFERENCE_TABLES:
            def ref_build():
                t = realize(order)
                validate_table(t)
                return t

            r_build = _seconds(ref_build)
            r_compile = _seconds(lambda: compile_program(table))
            r_env = _seconds(lambda: envelope(False))
            r_rate = n / (t_order + r_build + r_compile)
            ratios.append(fast_rate / r_rate)
            ref = [f"{r_build:9.3f}", f"{r_compile:7.3f}", f"{fmt_rate(r_rate):>9s}", f"{fast_rate / r_rate:6.0f}x", f"{r_env:7.2f}"]
        print(f"{name:8s} {p:3d} {m:4d} {n:7d} | {t_order:6.3f} {t_build:6.3f} {t_compile:7.3f} {fmt_rate(fast_rate):>6s} {fmt_rate(n / cpu):>6s} "
              f"{'-' if t_disk != t_disk else f'{t_disk:.3f}':>6s} | {ref[0]:>9s} {ref[1]:>7s} {ref[2]:>9s} {ref[3]:>7s} | {t_env:6.2f} {ref[4]:>7s}", flush=True)
        if (name, p, m) == ("1f1b", 64, 512):
            ready_cached = t_disk + t_compile
    return {"fast_ops_s": total_ops / total_fast, "fast_ops_cpu_s": total_ops / total_cpu,
            "ratio": statistics.median(ratios) if ratios else float("nan"),
            "ready_1f1b": ready, "ready_1f1b_cached": ready_cached}


#: Orders timed by --tables at p = 64, m = 1024: schedule label -> its one-operation-at-a-time reference.
def _reference_orders() -> dict:
    from ppsweep.schedules import dualpipe, dualpipev, interleaved_1f1b, interleaved_zb, looped_bfs, zb_h2, zbv

    def rows(fn):
        return lambda p, m: tuple(tuple(fn(p, m, w)) for w in range(p))

    return {
        "interleaved_1f1b": rows(lambda p, m, w: interleaved_1f1b.worker_order(p, m, 2, w)),
        "interleaved_1f1b@v=4": rows(lambda p, m, w: interleaved_1f1b.worker_order(p, m, 4, w)),
        "looped_bfs": rows(lambda p, m, w: looped_bfs.worker_order(p, m, 2, w)),
        "interleaved_zb": rows(lambda p, m, w: interleaved_zb.worker_order(p, m, 2, w)),
        "zb_h1": rows(lambda p, m, w: interleaved_zb.worker_order(p, m, 1, w)),
        "zb_h2": rows(zb_h2.worker_order),
        "zbv": rows(zbv.worker_order),
        "dualpipe": lambda p, m: dualpipe.worker_orders(p, m)[0],
        "dualpipev": lambda p, m: dualpipev.worker_orders(p, m)[0],
    }


def bench_orders(reps: int, p: int = 64, m: int = 1024) -> None:
    """Seconds of each array order (``build_order``) against its readable reference, at the design sweep's largest table."""
    from ppsweep.schedules import get_schedule
    from ppsweep.tables.build import resolve_options

    print()
    print(f"--tables, orders at p={p}, m={m}: build_order (arrays) against the one-operation-at-a-time reference,")
    print(f"seconds (array: median of {reps}; reference: one run); equal orders checked.")
    print(f"{'schedule':22s} {'ops':>8s} {'array':>7s} {'reference':>9s} {'speedup':>8s}")
    for label, reference in _reference_orders().items():
        schedule, options = get_schedule(label), resolve_options(label, {})
        t_array = statistics.median(_seconds(lambda: schedule.build_order(p, m, **options)) for _ in range(reps))
        t0 = time.perf_counter()
        expected = reference(p, m)
        t_ref = time.perf_counter() - t0
        orders = schedule.build_order(p, m, **options).orders
        if orders != expected:
            raise AssertionError(f"{label}: the array order differs from its reference")
        print(f"{label:22s} {int(orders.lengths.sum()):8d} {t_array:7.3f} {t_ref:9.3f} {t_ref / t_array:7.0f}x", flush=True)


# ---------------------------------------------------------------------------------------------
# --peers: ppsweep beside the tools a user would pick instead, on the same grid, in one run

#: Schedules of --peers (one stage per worker: every peer's model applies), at p, m of the table above.
PEER_SCHEDULES = ("1f1b", "zb_h1")
#: The grid of --peers: bandwidth × latency of the cost model (65,536 points); the per-point
#: peers run its first PEER_POINTS points, and their rate is points over their seconds.
PEER_GRID = (256, 256)
PEER_POINTS = 48


def _peer_plan(table) -> list[tuple[int, int, int, str]]:
    """The zero-bubble evaluator's walk over ``table``: ``(operation, worker, cross-stage input or -1, kind letter)``,
    operations in the order of their start slots (a topological order: every input ends before its consumer starts)."""
    from ppsweep.tables.fast_realize import table_ops
    from ppsweep.tables.ops import KIND_LETTER, Kind, is_split

    ops = table_ops(table)
    by_start = np.argsort(ops.start, kind="stable")
    key = {(int(ops.kind[i]), int(ops.micro[i]), int(ops.stage[i])): n for n, i in enumerate(by_start)}
    last = table.n_stages - 1
    plan = []
    for n, i in enumerate(by_start):
        kind, j, st = Kind(int(ops.kind[i])), int(ops.micro[i]), int(ops.stage[i])
        dep = -1
        if kind == Kind.F and st > 0:
            dep = key[(int(Kind.F), j, st - 1)]
        elif kind in (Kind.B, Kind.I) and st < last:
            grad = Kind.I if is_split(table.split_backward, j, st + 1) else Kind.B
            dep = key[(int(grad), j, st + 1)]
        plan.append((n, int(ops.worker[i]), dep, KIND_LETTER[kind]))
    return plan


def _peer_stages(table) -> list[int]:
    """The stage of each operation of :func:`_peer_plan`'s walk (for per-stage costs)."""
    from ppsweep.tables.fast_realize import table_ops

    ops = table_ops(table)
    return ops.stage[np.argsort(ops.start, kind="stable")].tolist()


def zero_bubble_rule(plan, cost: dict, comm, p: int, maximum=max, stage: list[int] | None = None):
    """The zero-bubble repository's evaluation rule (``Graph.manual_order``'s ``put``), written anew.

    Each operation, in order, ends at ``max(its worker's last end + cost, its cross-stage input's
    end + comm + cost)``: a forward waits for the previous stage's forward, a backward (or input
    gradient) for the next stage's, one ``comm`` per hop; W waits for nothing but its worker. With
    floats (``maximum=max``) this is one point at a time, as the repository runs it; with numpy
    arrays over the points (``maximum=np.maximum``) the same rule over a whole grid.

    Args:
      plan: :func:`_peer_plan`. cost: kind letter -> seconds (or, with ``stage``, per-stage seconds).
      comm: seconds per hop (a float, or an array over points). p: workers.
      maximum: ``max`` for floats, ``np.maximum`` for arrays.
      stage: :func:`_peer_stages` where the costs differ by stage (None: one cost per kind).

    Returns:
      ``(end, span)``: the last operation's end (ppsweep's step time without optimizer), and the
      repository's figure, the longest worker span from its first operation's start to its last end.
    """
    end = [0.0] * len(plan)
    free = [0.0] * p
    first = [None] * p
    for n, w, dep, letter in plan:
        c = cost[letter] if stage is None else cost[letter][stage[n]]
        t = free[w] + c
        if dep >= 0:
            t = maximum(t, end[dep] + comm + c)
        if first[w] is None:
            first[w] = t - c
        end[n] = free[w] = t
    finish = free[0]
    span = free[0] - first[0]
    for w in range(1, p):
        finish, span = maximum(finish, free[w]), maximum(span, free[w] - first[w])
    return finish, span


def torch_unit_steps(table) -> int:
    """PyTorch's ``_simulate_comms_compute`` on ``table``'s order: its sends and receives added by
    ``_add_send_recv``, then the dry run; the number of unit steps it takes (every action one step)."""
    from torch.distributed.pipelining import schedules as torch_schedules

    from ppsweep.tables.interchange import op_to_cell

    placement = np.asarray(table.placement)[0]
    stage_to_rank = lambda s: int(placement[s])  # noqa: E731
    orders = table.orders()
    compute = {w: [torch_schedules._Action.from_str(op_to_cell(op)) for op in row] for w, row in enumerate(orders)}
    with_comms = torch_schedules._add_send_recv(compute, stage_to_rank, table.n_stages)
    steps = torch_schedules._simulate_comms_compute(with_comms, stage_to_rank, table.n_stages)
    return max(len(row) for row in steps.values())


def bench_peers(reps: int) -> dict:
    """points/s of ppsweep and of the peers on one grid, medians of ``reps``, with what each models."""
    from ppsweep.schedules import get_schedule

    model, system = configs()
    nb, nl = PEER_GRID
    n_points = nb * nl
    p, m = 8, 32
    print()
    print(f"--peers: p={p}, m={m}, cost model megatron_128l on the baseline system, a {nb} x {nl} bandwidth x latency grid "
          f"({n_points:,} points); message time per hop alpha + bytes/beta; no optimizer step, no gradient synchronisation.")
    print(f"Whole-grid evaluators run all points (median of {reps} after a first call); per-point ones run the first "
          f"{PEER_POINTS} (the reference simulator: 3) and their rate is points over seconds.")
    print("x ppsweep: ppsweep's engine (auto) points/s over the row's. diff: largest relative difference of the row's step time")
    print("from ppsweep's overlap t_sim on the points it ran.")
    figures = {}
    for name in PEER_SCHEDULES:
        table = build_schedule(name, p, m)
        c = stage_costs(model, system, table)
        t_f, t_b, t_i, t_w = (np.asarray(x)[0] for x in (c.t_f, c.t_b, c.t_i, c.t_w))
        beta = np.logspace(9, 12, nb)[:, None]
        alpha = np.logspace(-7, -4, nl)[None, :]
        msg = float(c.msg_bytes)
        kw = dict(t_i=t_i, t_w=t_w, grad_bytes=0.0, t_opt=0.0)
        grid_alpha, grid_beta = (a.ravel() for a in np.broadcast_arrays(alpha, beta))
        hop = grid_alpha + msg / grid_beta  # the message time of one hop at each point
        rows = []

        def engine(method):
            return simulate(table, t_f, t_b, alpha, beta, msg, "overlap", backend=method, finish=False, **kw)

        truth = np.asarray(engine("scan").t_sim).ravel()  # ppsweep's overlap step time (the scan: no envelope cap)
        for method, label, models in (
            ("auto", "ppsweep engine (envelope)", "per-worker order; overlap/blocking/contention/ports; any stage costs; "
                     "the envelope built on the first call"),
            ("scan", "ppsweep engine (scan)", "the same, as a max-plus scan (numba or JAX)"),
        ):
            _, warm, out = timed(lambda: engine(method), reps)
            diff = float(np.max(np.abs(np.asarray(out.t_sim).ravel() - truth) / truth))
            rows.append((label, n_points / warm, diff, models + (f"; method {out.method}" if method == "auto" else "")))

        ref_points = list(range(0, n_points, n_points // 3))[:3]
        times, diffs = [], []
        for k in ref_points:
            t0 = time.perf_counter()
            r = reference_simulate(table, t_f, t_b, grid_alpha[k], grid_beta[k], msg, "overlap", **kw)
            times.append(time.perf_counter() - t0)
            diffs.append(abs(float(r.t_sim) - truth[k]) / truth[k])
        rows.append(("ppsweep reference simulator", 1 / statistics.median(times), max(diffs),
                     "the contract's rules one operation and one message at a time (the engine's reference)"))

        plan = _peer_plan(table)
        cost = {"F": float(t_f[0]), "B": float(t_b[0]), "I": float(t_i[0]), "W": float(t_w[0])}
        spans = []

        def zb_points():
            out = [zero_bubble_rule(plan, cost, float(hop[k]), p) for k in range(PEER_POINTS)]
            spans[:] = [s for _, s in out]
            return np.array([e for e, _ in out])

        _, warm, ends = timed(zb_points, reps)
        rows.append(("zero-bubble rule, per point (their evaluator)", PEER_POINTS / warm,
                     float(np.max(np.abs(ends - truth[:PEER_POINTS]) / truth[:PEER_POINTS])),
                     "fixed order; end = max(worker free, input end + comm) + cost; one comm per hop; no links, no ports"))
        _, warm, (ends, _) = timed(lambda: zero_bubble_rule(plan, cost, hop, p, maximum=np.maximum), reps)
        rows.append(("zero-bubble rule, numpy over the grid", n_points / warm, float(np.max(np.abs(ends - truth) / truth)),
                     "the same rule, one numpy operation per schedule operation over all points"))

        schedule = get_schedule(name)
        bubble = schedule.bubble_formula(p, m)
        busy = m * float(t_f[0] + (t_i[0] + t_w[0] if table.split_backward else t_b[0]))

        def closed():
            return busy / (1 - bubble) + 2 * (p - 1) * hop

        _, warm, out = timed(closed, reps)
        rows.append(("closed form, Calculon's manner", n_points / max(warm, 1e-9), float(np.max(np.abs(out - truth) / truth)),
                     f"busy / (1 - bubble formula {bubble:.4f}) + 2(p-1) exposed hops; no order, no waits"))

        try:
            first, warm, steps = timed(lambda: torch_unit_steps(table), reps)
            rows.append(("PyTorch _simulate_comms_compute", 1 / warm, float("nan"),
                         f"unit steps ({steps} for this order), every action one step; no durations, so one call per "
                         "schedule, the same answer at every point (rate: calls/s)"))
        except Exception as error:  # noqa: BLE001 - torch missing or refusing this order: say so, keep the others
            rows.append(("PyTorch _simulate_comms_compute", float("nan"), float("nan"), f"not run: {type(error).__name__}: {error}"))

        engine_rate = rows[0][1]
        print()
        print(f"{name}: {len(plan)} operations")
        print(f"  {'evaluator':46s} {'points/s':>9s} {'x ppsweep':>10s} {'diff':>8s}  models")
        for label, rate, diff, models in rows:
            ratio = engine_rate / rate if rate == rate else float("nan")
            print(f"  {label:46s} {fmt_rate(rate) if rate == rate else '-':>9s} "
                  f"{'-' if ratio != ratio else f'{ratio:,.0f}x' if ratio >= 10 else f'{ratio:.2g}x':>10s} "
                  f"{'-' if diff != diff else f'{diff:.1e}':>8s}  {models}", flush=True)
        spans_below = float(np.median(1 - np.array(spans) / truth[:PEER_POINTS]))
        print(f"  (the zero-bubble repository reports the longest worker span, not the step time: {spans_below:.1%} below it "
              "at the median point)")
        figures[name] = {label: rate for label, rate, _, _ in rows}
    return figures


def _disk_read_seconds(name: str, p: int, m: int) -> float:
    """Seconds to get a built table back from the disk cache (:mod:`ppsweep.tables.cache`), in a temporary directory."""
    from ppsweep.tables import build as build_mod
    from ppsweep.tables import cache as table_cache

    saved = os.environ.get(table_cache.CACHE_ENV)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[table_cache.CACHE_ENV] = tmp
        try:
            build_mod._build_cached.cache_clear()
            build_schedule(name, p, m)  # builds and writes
            build_mod._build_cached.cache_clear()
            seconds = _seconds(lambda: build_schedule(name, p, m))  # reads
        finally:
            build_mod._build_cached.cache_clear()
            if saved is None:
                os.environ.pop(table_cache.CACHE_ENV, None)
            else:
                os.environ[table_cache.CACHE_ENV] = saved
    return seconds


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------
# --million, --design: whole sweeps through the command line


#: The environment as the user started the bench (before it turns the envelope cache off for itself).
_USER_ENV = dict(os.environ)

#: The on-disk caches a sweep reads and fills: environment variables, and the JAX one as an override.
CACHE_ENVS = ("PPSWEEP_TABLE_CACHE", "PPSWEEP_ENVELOPE_CACHE")

#: Where numba keeps its compiled kernels (else beside the source, in the checkout's __pycache__,
#: which a second bench in the same checkout would find filled: its "cold" run would compile nothing).
NUMBA_CACHE_ENV = "NUMBA_CACHE_DIR"


@functools.lru_cache(maxsize=1)
def _scratch_root() -> Path:
    """One directory for every sweep's temporary caches and stores, removed when the bench ends.

    Not removed run by run: on a filesystem that skips recently freed inodes when it makes new
    files (ext4 without a journal, this machine's: an inode freed in the last 60 s, 300 s while
    its block is unwritten, is passed over one buffer lookup at a time), a sweep that starts right
    after thousands of files are deleted pays for each file it creates: 0.7 ms of CPU against
    0.03 ms measured here, several seconds of a cold design run, which creates about 15,000.
    """
    import atexit
    import shutil

    root = Path(tempfile.mkdtemp(prefix="ppsweep-bench-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def _scratch() -> Path:
    """A new empty directory in :func:`_scratch_root` (removed only when the bench ends)."""
    return Path(tempfile.mkdtemp(dir=_scratch_root()))


def bench_sweep(name: str, extra: list[str], caches: Path | None = None, label: str = "",
                results_dir: Path | None = None, kernels: Path | None = None) -> dict:
    """``python -m ppsweep +sweep=<name>`` into a temporary results_dir, in a fresh process.

    Args:
      name: the sweep; extra: more overrides.
      caches: a directory for every on-disk cache the run uses (tables, envelopes, JAX's and
        numba's compiled code; empty: a cold run, filled by an earlier run: warm); None: the user's.
      kernels: where numba's compiled kernels are kept, in place of ``caches``' own (a cold run
        with the kernels an earlier run compiled).
      label: printed after the sweep's name (``cold``, ``warm``).
      results_dir: where the store goes (kept); None: a temporary directory.

    Returns points, wall seconds, points/s, the run's own seconds (its "wrote ... in" line) and
    the CPU seconds of the run (user + system, the process and its children: ``cpu / wall`` near
    2 on this 2-core machine means both cores busy).
    """
    import re
    import resource
    import subprocess

    env = dict(_USER_ENV)
    cache_args = []
    if caches is not None:
        for var in CACHE_ENVS:
            env[var] = str(caches / var.rsplit("_", 2)[1].lower())
        env[NUMBA_CACHE_ENV] = str(kernels if kernels is not None else caches / "numba")
        cache_args = [f"engine.compilation_cache={caches / 'jax'}"]
    out_dir = results_dir if results_dir is not None else _scratch()
    cmd = [sys.executable, "-m", "ppsweep", f"+sweep={name}", "overwrite=true", f"results_dir={out_dir}", "progress=false",
           *cache_args, *extra]
    probe = speed_probe()
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_after = os.getloadavg()[0]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = done.stdout + done.stderr
    if done.returncode:
        print(out[-2000:])
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {done.returncode}")
    match = re.search(r"wrote ([\d,]+) points in ([\d.]+) s", out)
    points = int(match.group(1).replace(",", "")) if match else 0
    own = float(match.group(2)) if match else float("nan")
    shown = [a for a in cmd[1:] if not a.startswith(("results_dir=", "engine.compilation_cache="))]
    print()
    print(f"--{name}{' ' + label if label else ''}: {' '.join(shown)} (results_dir: {'kept' if results_dir else 'a temporary directory'}; "
          f"caches: {'the user' + chr(39) + 's' if caches is None else str(caches)}; "
          f"load average {load_before:.1f} before, {load_after:.1f} after; speed probe before it {probe:.2f} s)")
    for line in out.splitlines():
        if line.startswith(("wrote", "time split")) or line.startswith("  "):
            print(f"  {line.strip()}")
    print(f"  {points:,} points in {wall:.1f} s wall (process start included) = {points / wall:,.0f} points/s; "
          f"CPU {cpu:.1f} s = {cpu / wall:.2f} cores busy on average")
    split = re.search(r"build ([\d.]+) s, compile ([\d.]+) s, evaluate ([\d.]+) s, write ([\d.]+) s", out)
    return {"points": points, "wall": wall, "rate": points / wall, "cores": cpu / wall, "own": own, "cpu": cpu, "probe": probe,
            "split": tuple(float(x) for x in split.groups()) if split else None}


def bench_sweep_cold_warm(name: str, extra: list[str], more: tuple[tuple[str, list[str]], ...] = (),
                          kernels_compiled: bool = False) -> list[dict]:
    """The sweep with every on-disk cache empty (cold, as after an upgrade: numba compiles its
    kernels too), then again with what it left (warm), then each ``(label, overrides)`` of ``more``
    with the same (warm) caches.

    Args:
      name, extra: the sweep and more overrides.
      more: further runs on the warm caches.
      kernels_compiled: then once more with empty caches but numba's kernels as the cold run left
        them: the cold run less numba's compiling, measured.

    Returns:
      The cold run's figures, the warm run's, those of ``more``, then the last run's where
      ``kernels_compiled`` (as :func:`bench_sweep`).
    """
    caches = _scratch()  # removed when the bench ends (_scratch_root)
    cold = bench_sweep(name, extra, caches, "cold (tables, envelopes, JAX's and numba's compiled code: empty caches)")
    warm = bench_sweep(name, extra, caches, "warm (the same caches, filled by the cold run)")
    print(f"  warm against cold, same bench run: {cold['wall'] / warm['wall']:.2f}x faster end to end")
    others = [bench_sweep(name, extra + overrides, caches, label) for label, overrides in more]
    if kernels_compiled:
        compiled = bench_sweep(name, extra, _scratch(), "cold but for numba's kernels (compiled by the cold run)",
                               kernels=caches / "numba")
        wall, cpu = cold["wall"] - compiled["wall"], cold["cpu"] - compiled["cpu"]
        # a difference of two runs: where it comes out negative, the machine's noise between them outweighed the compiling
        noise = "" if wall > 0 and cpu > 0 else " (not a measurement: the two runs differed by more than the compiling)"
        print(f"  numba's compiling in the cold run (cold less cold but for the kernels), same bench run: {wall:.1f} s of wall, "
              f"{cpu:.1f} CPU s{noise}")
        others.append(compiled)
    return [cold, warm, *others]


def bench_design(repeats: int) -> dict:
    """``+sweep=design`` cold, warm and cold but for numba's kernels (:func:`bench_sweep_cold_warm`),
    ``repeats`` times over, each time with fresh caches; the figures of the targets: the median
    wall seconds of each kind of run (one run: its own)."""
    runs = [bench_sweep_cold_warm("design", [], kernels_compiled=True) for _ in range(repeats)]
    kinds = {"design": "cold", "design_warm": "warm", "design_kernels": "cold but for numba's kernels"}
    medians = {label: statistics.median(run[k]["wall"] for run in runs) for k, label in enumerate(kinds)}
    if repeats > 1:
        print()
        print(f"--design, {repeats} times over (wall s, and in brackets the speed probe just before the run, s):")
        for k, (label, kind) in enumerate(kinds.items()):
            walls = ", ".join(f"{run[k]['wall']:.1f} ({run[k]['probe']:.2f})" for run in runs)
            print(f"  {kind}: {walls}; median {medians[label]:.1f} s")
    return medians


# ---------------------------------------------------------------------------------------------
# the targets of issue 15


def print_targets(figures: dict) -> None:
    """Each target beside the measured value and its ratio to the figure before issue 15."""
    today_build_compile = 1.0 / (20e-6 + 40e-6)  # operations per second
    rows = [
        ("table build + compile, ops/s", ">= 1 M", figures.get("fast_ops_s"), today_build_compile, 1e6, False),
        ("  the same over CPU seconds, ops/s", ">= 1 M", figures.get("fast_ops_cpu_s"), today_build_compile, 1e6, False),
        ("1F1B p=64 m=512 ready to evaluate, s", "<= 0.1", figures.get("ready_1f1b"), 65536 / today_build_compile, 0.1, True),
        ("  the same, its table from the disk cache, s", "<= 0.1", figures.get("ready_1f1b_cached"), 65536 / today_build_compile, 0.1, True),
        ("+sweep=million end to end, points/s (cold caches)", ">= 1 M", figures.get("million"), 30e3, 1e6, False),
        ("  the same, warm caches (second run)", ">= 1 M", figures.get("million_warm"), 30e3, 1e6, False),
        ("+sweep=design end to end, s (cold caches)", "<= 120", figures.get("design"), None, 120, True),
        ("  the same, warm caches (second run)", "<= 120", figures.get("design_warm"), None, 120, True),
        ("  issue 30's target, cold caches", "<= 60", figures.get("design"), None, 60, True),
        ("  issue 30's target, warm caches", "<= 40", figures.get("design_warm"), None, 40, True),
        ("  cold but for numba's kernels (not a target)", "<= 60", figures.get("design_kernels"), None, 60, True),
        ("scan, p=8 m=32 f64 mixed overlap, points/s", ">= 1 M", figures.get("scan"), 243e3, 1e6, False),
        ("envelope, p=8 m=32 f64 mixed overlap, points/s", ">= 300 M", figures.get("envelope"), 129e6, 300e6, False),
        ("cores busy during +sweep=million (of 2)", "2", figures.get("cores"), None, 1.8, False),
    ]
    print()
    print("Issue 15 targets, and issue 30's for the design sweep (measured in this run; ratio = measured / before, inverted for seconds):")
    head = f"  {'target':52s} {'wanted':>9s} {'measured':>10s} {'before':>9s} {'ratio':>7s}  met"
    print(head)
    for label, wanted, value, before, bound, lower_is_better in rows:
        if value is None or value != value:
            print(f"  {label:52s} {wanted:>9s} {'-':>10s}")
            continue
        shown = f"{value:.3f}" if lower_is_better or value < 100 else fmt_rate(value)
        before_s = "-" if before is None else (f"{before:.2f}" if lower_is_better else fmt_rate(before))
        ratio = "-" if before is None else f"{(before / value if lower_is_better else value / before):6.1f}x"
        met = value <= bound if lower_is_better else value >= bound
        print(f"  {label:52s} {wanted:>9s} {shown:>10s} {before_s:>9s} {ratio:>7s}  {'yes' if met else 'no'}")


# --noise: the scan with noise (README, "Uncertainty") beside the noise-free scan

#: Noisy samples/s (p=8, m=32, float64, overlap, mixed) before the scan's noisy tiles grew from
#: 128 points (the lead's figure on a quiet machine, load ≈ 1).
NOISY_BEFORE = 88e3


def bench_noise(reps: int, samples: int = 64) -> None:
    """Noisy samples/s at p=8, m=32 against the noise-free scan on as many points, same run.

    Each schedule, mode and dtype runs 65,536 noisy points (64 bandwidths × 1024/k latencies ×
    k samples; each call draws its noise) and 65,536 noise-free points on the scan, alternately
    ``reps`` times after a first (compiling) call of each; the medians are reported.
    """
    from ppsweep.engine.noise import NoiseConfig

    model, system = configs()
    noise = NoiseConfig.from_mapping({"samples": samples, "seed": 0, "compute": {"dist": "lognormal", "cv": 0.05},
                                      "message": {"dist": "lognormal", "cv": 0.05}, "straggler": {"prob": 0.01, "slowdown": 2.0}})
    n_lat = max(1, 1024 // samples)
    print()
    print(f"--noise: p=8, m=32; {64 * n_lat * samples:,} points per call: noisy = 64 bandwidths × {n_lat} latencies × {samples} samples "
          f"(5 % lognormal compute and message jitter, 1-in-100 straggler at 2×, drawn in every call); noise-free scan on "
          f"{64 * n_lat * samples:,} points; medians of {reps} alternating calls")
    head = f"{'schedule':8s} {'mode':10s} {'dtype':7s} | {'noisy/s':>8s} {'scan/s':>8s} {'ratio':>5s}"
    print(head)
    print("-" * len(head))
    totals: dict[tuple[str, str], list[float]] = {}
    for mode in ("overlap", "contention"):
        for dtype in (np.float64, np.float32):
            for name in SCHEDULES:
                table = build_schedule(name, 8, 32)
                (tbl, t_f, t_b, alpha, _, msg), kw = grid_args(table, model, system, 64, 1)
                alpha = np.logspace(-7, -4, n_lat)[None, :]
                beta = np.logspace(9, 12, 64)[:, None]
                beta_plain = np.logspace(9, 12, 64 * samples)[:, None]
                noisy = lambda: simulate(tbl, t_f, t_b, alpha, beta, msg, mode, noise=noise, dtype=dtype, finish=False, **kw)  # noqa: E731
                plain = lambda: simulate(tbl, t_f, t_b, alpha, beta_plain, msg, mode, backend="scan", dtype=dtype, finish=False, **kw)  # noqa: E731
                noisy(), plain()
                a, b = [], []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    n = noisy().t_sim.size
                    a.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    plain()
                    b.append(time.perf_counter() - t0)
                ta, tb = statistics.median(a), statistics.median(b)
                tag = np.dtype(dtype).name
                totals.setdefault((mode, tag), []).append((ta, tb, n))
                print(f"{name:8s} {mode:10s} {tag:7s} | {fmt_rate(n / ta):>8s} {fmt_rate(n / tb):>8s} {tb / ta:5.2f}", flush=True)
    print("Mixed schedules (equal points of each):")
    for (mode, tag), rows in totals.items():
        ta, tb, n = sum(r[0] for r in rows), sum(r[1] for r in rows), sum(r[2] for r in rows)
        print(f"  {mode:10s} {tag:7s} noisy {fmt_rate(n / ta):>6s} samples/s, noise-free scan {fmt_rate(n / tb):>6s} points/s, ratio {tb / ta:.2f}")
    rows = totals[("overlap", "float64")]
    rate = sum(r[2] for r in rows) / sum(r[0] for r in rows)
    print(f"Issue 14 target: >= 300k noisy samples/s at p=8, m=32, float64, overlap, mixed: measured {fmt_rate(rate)} "
          f"({rate / NOISY_BEFORE:.1f}x the {fmt_rate(NOISY_BEFORE)} before), {'met' if rate >= 300e3 else 'not met'}")


# ---------------------------------------------------------------------------------------------
# --periodic: the periodic scan beside the plain compiled scan, on the design sweep's points


@functools.lru_cache(maxsize=1)
def design_spec():
    """The spec of ``+sweep=design``."""
    from ppsweep.sweep.config import compose_config, spec_from_config

    return spec_from_config(compose_config(["+sweep=design"]))


def design_costs(table):
    """The engine's costs of ``table`` at the points of ``+sweep=design`` (32 bandwidths × 8 latencies)."""
    from ppsweep.sweep.evaluate import table_costs

    spec = design_spec()
    return table_costs(spec, table, spec.model)[0]


@contextlib.contextmanager
def one_thread():
    """Engine calls on one thread inside the block (each evaluator's share of a sweep's cores on this
    machine: :func:`ppsweep.share_cores` with one evaluator a core); after it, every core again (the
    default, which nothing else in the bench's own process changes)."""
    import ppsweep

    ppsweep.share_cores(usable_cores())
    try:
        yield
    finally:
        ppsweep.share_cores(1)  # the default: one evaluator has every core


def bench_periodic(reps: int, ps=(16, 32, 64), ms=(256, 512, 1024), modes=("overlap", "ports")) -> None:
    """Seconds of ``native_scan`` and ``periodic_scan`` (one thread, as each evaluator of a sweep runs)
    summed over the design sweep's schedules and variants in ``modes``, by ``p`` and ``m``."""
    from ppsweep.engine.tiers import nodes_of

    print("--periodic: native_scan against periodic_scan, +sweep=design's schedules and points (256 a table), "
          f"modes {', '.join(modes)}, one thread, median of {reps} after a first call; seconds summed by (p, m):")
    totals = np.zeros(2)
    with one_thread():
        for p in ps:
            for m in ms:
                spent = np.zeros(2)
                for label in design_spec().schedules:
                    table = build_schedule(label, p, m)  # a variant's label names its options
                    costs = design_costs(table)
                    nodes = nodes_of(p, design_spec().system.gpus_per_node)
                    for mode in modes:
                        for j, backend in enumerate(("native_scan", "periodic_scan")):
                            run = lambda: simulate(table, costs, mode, backend=backend, finish=False, worker_node=nodes)  # noqa: E731
                            spent[j] += timed(run, reps)[1]
                totals += spent
                print(f"  p={p:3d} m={m:5d}: native {spent[0]:6.3f} s, periodic {spent[1]:6.3f} s, {spent[0] / spent[1]:5.2f}x")
    print(f"  all: native {totals[0]:.2f} s, periodic {totals[1]:.2f} s, {totals[0] / totals[1]:.2f}x")


def bench_scan_calls(reps: int, counts=(1, 6, 24, 96), label: str = "interleaved_1f1b", p: int = 64, m: int = 1024,
                     mode: str = "ports") -> None:
    """Nanoseconds per operation of one periodic-scan call on ``n`` points of a long table, one thread
    (as each evaluator of a sweep runs): the piecewise scan calls it on a design grid's segment ends
    (96 points) and then on the few points left (6-24), so a call's cost per step counts."""
    table = build_schedule(label, p, m)
    n_ops = program_for(table).n_ops
    print(f"--scan-calls: one periodic_scan call, {label} p={p} m={m} ({n_ops:,} operations), {mode}, bandwidths "
          f"1e9-1e12 B/s, one thread, median of {reps} after a first call:")
    with one_thread():
        for n in counts:
            bandwidth = np.logspace(9, 12, n)
            run = lambda: simulate(table, 1e-3, 2e-3, 1e-6, bandwidth, 1e6, mode, backend="periodic_scan", finish=False)  # noqa: E731
            seconds = timed(run, reps)[1]
            print(f"  {n:3d} points: {seconds * 1e3:7.2f} ms, {seconds / n_ops * 1e9:6.1f} ns an operation, "
                  f"{seconds / n_ops / n * 1e9:6.2f} ns an operation and point")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", action="store_true", help="also run a >= 10 million point sweep into zarr")
    parser.add_argument("--large-points", type=int, default=10_000_000, help="points of --large (default 10 million)")
    parser.add_argument("--scaling", action="store_true", help="also scale p and m (takes minutes)")
    parser.add_argument("--scaling-schedules", default="1f1b,hanayo", help="schedules of --scaling")
    parser.add_argument("--noise", action="store_true", help="also time the scan with noise beside the noise-free scan")
    parser.add_argument("--reps", type=int, default=3, help="warm repetitions per figure (median)")
    parser.add_argument("--ref-points", type=int, default=3, help="points the reference simulator runs per row")
    parser.add_argument("--skip-table", action="store_true", help="skip the per-schedule table")
    parser.add_argument("--tables", action="store_true", help="per-table work: build, compile, envelope (fast vs reference)")
    parser.add_argument("--peers", action="store_true",
                        help="ppsweep beside the zero-bubble evaluator, PyTorch's dry run, a closed form, the reference")
    parser.add_argument("--million", action="store_true", help="also run +sweep=million end to end")
    parser.add_argument("--design", action="store_true", help="also run +sweep=design end to end (minutes)")
    parser.add_argument("--design-repeats", type=int, default=1, metavar="N",
                        help="with --design: its cold, warm and cold-but-kernels runs N times over (fresh caches each time); "
                             "the targets take the medians")
    parser.add_argument("--periodic", action="store_true",
                        help="the periodic scan beside the plain compiled scan on the design sweep's long tables (minutes)")
    parser.add_argument("--scan-calls", action="store_true",
                        help="ns per operation of one periodic-scan call on 1-96 points of a long table (one thread)")
    parser.add_argument("--compare-workers", action="store_true",
                        help="with --million: run it again with engine.workers=1 and print the ratio")
    args = parser.parse_args()
    if args.design_repeats < 1:
        parser.error(f"--design-repeats: must be at least 1, got {args.design_repeats}")

    start = time.perf_counter()
    figures: dict = {}
    # This process's figures time the envelope's build: never read envelopes back from the disk
    # cache (the sweeps below run in their own processes with their own caches).
    os.environ["PPSWEEP_ENVELOPE_CACHE"] = "off"
    print(f"machine: {machine()}")
    print(f"command: python scripts/bench.py {' '.join(sys.argv[1:])}".rstrip())
    print()
    if not args.skip_table:
        model, system = configs()
        print("p=8, m=32, cost model megatron_128l on the baseline system; points/s (k = 1e3, M = 1e6).")
        print("K: envelope vectors of the table ('scan': more than the cap, the envelope falls back to the scan);")
        print("cmp s: compile seconds; err: float32's largest relative error in t_sim; vs scan: envelope vs scan (f64);")
        print("peak: peak RSS while the row ran (VmHWM).")
        print()
        rows = [bench_row(name, mode, model, system, args) for name in SCHEDULES for mode in MODES]
        print_table(rows)
        print_summary(rows)
        figures["scan"] = mixed(rows, "overlap", "scan_f64")
        figures["envelope"] = mixed(rows, "overlap", "env_f64")
    if args.tables:
        figures.update(bench_tables(args.reps))
        bench_orders(args.reps)
    if args.peers:
        bench_peers(args.reps)
    if args.million:
        more = (("warm, engine.workers=1", ["engine.workers=1"]),) if args.compare_workers else ()
        million, warm, *one = bench_sweep_cold_warm("million", [], more)
        figures["million"], figures["cores"], figures["million_warm"] = million["rate"], million["cores"], warm["rate"]
        if one:
            print(f"  the default engine.workers against engine.workers=1, both warm, same run: {one[0]['wall'] / warm['wall']:.2f}x "
                  f"the points/s, {warm['cores'] / one[0]['cores']:.2f}x the cores busy")
    if args.design:
        figures.update(bench_design(args.design_repeats))
    if args.large:
        n_latency = 1000
        n_bandwidth = -(-args.large_points // (len(SCHEDULES) * 2 * n_latency))
        bench_large(n_bandwidth, n_latency)
    if args.scaling:
        bench_scaling(args.scaling_schedules.split(","))
    if args.noise:
        bench_noise(args.reps)
    if args.periodic:
        bench_periodic(args.reps)
    if args.scan_calls:
        bench_scan_calls(max(args.reps, 5))
    print_targets(figures)
    print()
    print(f"bench: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
