"""Envelopes cached on disk (ppsweep.engine.envelope_cache): the same results back, keys that
separate everything that defines an envelope, damaged files rebuilt, ``off`` honoured."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import xarray as xr

from ppsweep import build_schedule
from ppsweep.engine import core
from ppsweep.engine import envelope as envelope_mod
from ppsweep.engine import envelope_cache
from ppsweep.engine.comm import MODES
import ppsweep.engine.compiled as compiled_mod
from ppsweep.engine.compiled import compiled_for
from ppsweep.engine.core import simulate
from ppsweep.sweep.evaluate import SweepSpec
from ppsweep.sweep.runner import run_sweep
from ppsweep.tables import build as build_mod

ALPHA = np.array([[1e-7, 3e-6, 1e-4]])  # latency × bandwidth grid, the seconds of a small model
BETA = np.array([[1e9], [3e10], [1e12]])
T_F, T_B, MSG = 1e-3, 2e-3, 4e6
GRAD = 5e7


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory that takes every envelope, however small."""
    monkeypatch.setenv(envelope_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(envelope_cache, "MIN_WAVES", 0)
    return tmp_path


def _files(cache):
    """The cache's files but the routings (envelope_cache.cached_routing), which every run in ports writes beside them."""
    return [path for path in cache.glob(f"*{envelope_cache.disk_cache.SUFFIX}")
            if envelope_cache.disk_cache.read_entry(path)[0]["kind"] not in ("routing", "refused")]


def fresh(table):
    """An equal table as a new object: its compiled form (and in-memory envelopes) start empty."""
    return dataclasses.replace(table)


def run(table, mode, **kwargs):
    return simulate(table, T_F, T_B, ALPHA, BETA, MSG, mode=mode, grad_bytes=GRAD, backend="auto", **kwargs)


def no_build(monkeypatch):
    """Make any envelope build fail (what follows must read the disk)."""
    def fail(*args, **kwargs):
        raise AssertionError("the envelope was built, not read from the cache")
    monkeypatch.setattr(envelope_mod, "build_envelope", fail)


CASES = [("gpipe", 4, 8, {}), ("1f1b", 4, 8, {}), ("chimera", 4, 8, {}), ("hanayo", 4, 8, {"waves": 2}), ("zb_h1", 4, 8, {})]


@pytest.mark.parametrize("mode", MODES)
def test_cached_envelopes_give_the_fresh_results_bit_for_bit(cache, monkeypatch, mode):
    tables = [build_schedule(name, p, m, **options) for name, p, m, options in CASES]
    monkeypatch.setenv(envelope_cache.CACHE_ENV, "off")
    expected = [run(fresh(t), mode) for t in tables]
    monkeypatch.setenv(envelope_cache.CACHE_ENV, str(cache))
    cold = [run(fresh(t), mode) for t in tables]
    assert len(_files(cache)) == len(tables)
    no_build(monkeypatch)
    warm = [run(fresh(t), mode) for t in tables]
    for (name, *_), want, *got in zip(CASES, expected, cold, warm):
        for result in got:
            assert result.method == "envelope"
            for field in ("t_sim", "comm_time", "compute_time", "worker_finish"):
                a, b = getattr(want, field), getattr(result, field)
                assert a.dtype == b.dtype and np.array_equal(a, b), (name, field)


def test_an_envelope_reads_back_equal_field_for_field(cache):
    table = build_schedule("chimera", 4, 8)
    feats = _features(table)
    program = compiled_for(table).program
    built = envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm)
    digest = envelope_cache.table_digest(table)
    envelope_cache.cached_envelope(lambda: digest, program, "contention", feats.weights, feats.comm, 64, lambda: built)
    read = envelope_cache.cached_envelope(lambda: digest, program, "contention", feats.weights, feats.comm, 64,
                                          lambda: pytest.fail("built again"))
    assert read is not built
    for a, b in zip((built.t_sim, built.compute, built.comm, *built.finish), (read.t_sim, read.compute, read.comm, *read.finish)):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    assert (read.depth, read.largest) == (built.depth, built.largest)
    assert not list(cache.glob("*.tmp"))


def test_keys_separate_table_mode_cap_features_and_code(monkeypatch):
    a, b = build_schedule("1f1b", 4, 8), build_schedule("1f1b", 4, 16)
    digest = envelope_cache.table_digest(a)
    assert digest == envelope_cache.table_digest(fresh(a))
    assert digest != envelope_cache.table_digest(b)
    changed = a.kind.copy()
    changed[0, -1], changed[1, -1] = changed[1, -1], changed[0, -1]  # same name, p, m: another content
    assert digest != envelope_cache.table_digest(dataclasses.replace(a, kind=changed))
    weights, comm = np.eye(3, 8), np.array([False, True, True])
    base = envelope_cache.envelope_key(digest, "overlap", weights, comm, 64)
    other_weights = weights.copy()
    other_weights[0, 1] = 0.5
    assert base == envelope_cache.envelope_key(digest, "overlap", weights.copy(), comm.copy(), 64)
    for key in (
        envelope_cache.envelope_key(envelope_cache.table_digest(b), "overlap", weights, comm, 64),
        envelope_cache.envelope_key(digest, "contention", weights, comm, 64),
        envelope_cache.envelope_key(digest, "overlap", weights, comm, 32),
        envelope_cache.envelope_key(digest, "overlap", other_weights, comm, 64),
        envelope_cache.envelope_key(digest, "overlap", weights, np.array([False, False, True]), 64),
    ):
        assert key != base
    monkeypatch.setattr(envelope_cache, "code_version", lambda: "another version")
    assert base != envelope_cache.envelope_key(digest, "overlap", weights, comm, 64)


def test_a_damaged_file_is_rebuilt_and_replaced(cache, monkeypatch):
    table = build_schedule("1f1b", 4, 8)
    expected = run(fresh(table), "overlap")
    (path,) = _files(cache)
    whole = path.read_bytes()
    for damaged in (b"not an envelope", whole[: len(whole) // 2]):
        path.write_bytes(damaged)
        again = run(fresh(table), "overlap")
        assert np.array_equal(again.t_sim, expected.t_sim) and np.array_equal(again.comm_time, expected.comm_time)
        assert path.read_bytes() != damaged  # replaced by a readable file
    no_build(monkeypatch)
    assert np.array_equal(run(fresh(table), "overlap").t_sim, expected.t_sim)


def test_cache_off_builds_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(envelope_cache.CACHE_ENV, "off")
    monkeypatch.setattr(envelope_cache, "MIN_WAVES", 0)
    assert envelope_cache.cache_dir() is None
    calls = []
    real = envelope_mod.build_envelope
    monkeypatch.setattr(envelope_mod, "build_envelope", lambda *a, **k: calls.append(1) or real(*a, **k))
    table = build_schedule("1f1b", 4, 8)
    run(fresh(table), "overlap")
    run(fresh(table), "overlap")
    assert len(calls) == 2
    assert not list(tmp_path.rglob(f"*{envelope_cache.disk_cache.SUFFIX}"))


def test_small_programs_are_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv(envelope_cache.CACHE_ENV, str(tmp_path))
    table = build_schedule("gpipe", 2, 2)
    assert compiled_for(table).program.n_waves < envelope_cache.MIN_WAVES
    run(fresh(table), "overlap")
    assert not list(tmp_path.glob(f"*{envelope_cache.disk_cache.SUFFIX}"))


def test_a_too_large_verdict_is_cached(cache, monkeypatch):
    table = build_schedule("chimera", 4, 8)
    expected = run(fresh(table), "contention", cap=1)  # the envelope needs more than one vector: the scan runs
    assert expected.method == "scan"
    kinds = sorted(envelope_cache.disk_cache.read_entry(path)[0]["kind"] for path in _files(cache))
    # the verdict, and what the scan that ran instead read (contention's steps: its lane order's, shared with overlap and blocking)
    assert kinds == ["OrderedSteps", "PeriodicRuns", "too_large"]
    no_build(monkeypatch)  # the verdict is read, not found again by building
    again = run(fresh(table), "contention", cap=1)
    assert again.method == "scan" and np.array_equal(again.t_sim, expected.t_sim)
    with pytest.raises(envelope_mod.EnvelopeTooLarge, match="cap 1"):
        compiled_mod.envelope_for(fresh(table), None, "contention", _features(table), cap=1)


def _features(table):
    return envelope_mod.features(compiled_for(table).program, {"t_f": np.array([T_F]), "t_b": np.array([T_B]),
                                 "grad_bytes": np.array(GRAD)}, ALPHA, BETA, np.array(MSG), np.array(0.0), ndim=2)


def test_a_store_written_cold_and_warm_is_the_same(tmp_path, monkeypatch):
    config = {
        "name": "envcache", "schedules": ["gpipe", "1f1b", "chimera"], "p": [2, 4], "m": [4, 8],
        "bandwidth": [1e9, 1e11], "latency": [1e-7, 1e-5], "comm": {"mode": ["overlap", "blocking", "contention", "ports"]},
        "model": {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16},
        "system": {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7},
    }
    monkeypatch.setattr(envelope_cache, "MIN_WAVES", 0)
    stores = {}
    for run_name, setting in (("off", "off"), ("cold", str(tmp_path / "cache")), ("warm", str(tmp_path / "cache"))):
        monkeypatch.setenv(envelope_cache.CACHE_ENV, setting)
        if run_name == "warm":
            no_build(monkeypatch)
        build_mod._build_cached.cache_clear()  # new table objects: nothing kept in memory between runs
        stores[run_name] = tmp_path / f"{run_name}.zarr"
        run_sweep(SweepSpec.from_config(config), stores[run_name], "", progress=False, workers=1)
    build_mod._build_cached.cache_clear()
    assert list((tmp_path / "cache").glob(f"*{envelope_cache.disk_cache.SUFFIX}"))
    off = xr.open_zarr(stores["off"])
    for run_name in ("cold", "warm"):
        other = xr.open_zarr(stores[run_name])
        assert set(other.data_vars) == set(off.data_vars)
        for name in off.data_vars:
            x, y = off[name].values, other[name].values
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), (run_name, name)


def _assert_fields_equal(a, b):
    names = [f.name for f in dataclasses.fields(a)] if dataclasses.is_dataclass(a) else a._fields
    for name in names:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name
        else:
            assert type(x) is type(y) and x == y, name


@pytest.mark.parametrize("mode", MODES)
def test_cached_programs_and_scan_steps_give_the_fresh_results_bit_for_bit(cache, monkeypatch, mode):
    """A table's program, the compiled scan's steps and the periodic scan's runs read back from the
    disk: equal field for field, the scan's results the same to the bit, and nothing compiled on the
    warm run."""
    import ppsweep.engine.compiled as compiled_mod
    import ppsweep.engine.native_scan as native_scan
    import ppsweep.engine.steady_state as steady_state
    monkeypatch.setattr(envelope_cache, "MIN_CELLS", 0)
    tables = [build_schedule(name, p, m, **options) for name, p, m, options in CASES + [("dualpipe", 4, 8, {}), ("1f1b", 4, 192, {})]]
    scan = lambda table: simulate(table, T_F, T_B, ALPHA, BETA, MSG, mode=mode, grad_bytes=GRAD, backend="periodic_scan")  # noqa: E731
    steps = lambda table: compiled_for(table).derived(f"native_steps:{mode}", None)  # noqa: E731 (already built)
    runs = lambda table: compiled_for(table).derived(  # noqa: E731 (already built, under the name overlap and blocking share)
        f"periodic_runs:{core._runs_shape(compiled_for(table), mode, steps(table))}", None)
    monkeypatch.setenv(envelope_cache.CACHE_ENV, "off")
    expected = []
    for table in tables:
        table = fresh(table)
        expected.append((scan(table), compiled_for(table).program, steps(table), runs(table)))
    assert expected[-1][3].start.size  # 1F1B at m = 192 has a run to step over
    monkeypatch.setenv(envelope_cache.CACHE_ENV, str(cache))
    for table in tables:
        scan(fresh(table))  # cold: compiled, then stored
    assert len(_files(cache)) == 3 * len(tables)  # a program, the steps and the runs of this mode each

    def refused(*args, **kwargs):
        raise AssertionError("compiled, not read from the cache")

    monkeypatch.setattr(compiled_mod, "PROGRAM", refused)
    add_resources = native_scan.native_steps

    def from_the_order_read(program, routing, ordered=None):  # steps built whole are refused
        return refused() if ordered is None else add_resources(program, routing, ordered)

    monkeypatch.setattr(native_scan, "ordered_steps", refused)  # the order of one-round routings' steps is read, and
    monkeypatch.setattr(native_scan, "native_steps", from_the_order_read)  # their resources added; ports' steps are read whole
    monkeypatch.setattr(steady_state, "periodic_runs", refused)
    for table, (want, program, table_steps, table_runs) in zip(tables, expected):
        table = fresh(table)
        got = scan(table)
        _assert_fields_equal(compiled_for(table).program, program)
        _assert_fields_equal(steps(table), table_steps)
        _assert_fields_equal(runs(table), table_runs)
        for field in ("t_sim", "comm_time", "compute_time", "worker_finish"):
            a, b = getattr(want, field), getattr(got, field)
            assert a.dtype == b.dtype and np.array_equal(a, b), (table.name, field)


def test_overlap_and_blocking_share_one_computation_of_the_periodic_runs(monkeypatch):
    """``overlap`` and ``blocking`` scan the same steps (no message holds a resource; only blocking
    the sender differs, which the runs do not read): one computation of the runs serves both, equal
    to what each mode's own steps give; ``contention`` computes its own."""
    import ppsweep.engine.steady_state as steady_state

    monkeypatch.setenv(envelope_cache.CACHE_ENV, "off")
    table = fresh(build_schedule("1f1b", 4, 192))
    calls = []
    compute = steady_state.periodic_runs
    monkeypatch.setattr(steady_state, "periodic_runs", lambda steps, p, m: calls.append(steps) or compute(steps, p, m))
    for mode in ("overlap", "blocking", "contention"):
        simulate(table, T_F, T_B, ALPHA, BETA, MSG, mode=mode, grad_bytes=GRAD, backend="periodic_scan")
    assert len(calls) == 2
    compiled = compiled_for(table)
    shared = compiled.derived("periodic_runs:no_resources", None)
    assert shared.start.size  # 1F1B at m = 192 has a run to step over
    for mode in ("overlap", "blocking"):
        _assert_fields_equal(compute(compiled.derived(f"native_steps:{mode}", None), table.p, table.m), shared)


def test_a_damaged_program_file_is_rebuilt(cache, monkeypatch):
    monkeypatch.setattr(envelope_cache, "MIN_CELLS", 0)
    table = build_schedule("1f1b", 4, 8)
    expected = compiled_for(fresh(table)).program
    (path,) = cache.glob(f"*{envelope_cache.disk_cache.SUFFIX}")
    path.write_bytes(path.read_bytes()[:100])
    _assert_fields_equal(compiled_for(fresh(table)).program, expected)
    assert envelope_cache.disk_cache.read_entry(path) is not None  # rewritten whole
