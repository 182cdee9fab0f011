"""Noise on tables with overlapped pairs F&B (DualPipe, DualPipeV): keys, send order, sanity rules, a sweep.

The engine against the reference simulator on its own draws: tests/test_noise_engine.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from ppsweep import build_schedule
from ppsweep.engine.core import simulate
from ppsweep.engine.noise import NoiseConfig, op_factors, op_identities, pair_sends, reference_inputs
from ppsweep.tables.ops import Kind, halves
from ppsweep.engine.reference import reference_simulate

MSG = 4.0e6


def _stage_times(table):
    t_f = np.linspace(0.8e-3, 1.3e-3, table.n_stages)
    return t_f, 2.1 * t_f


def test_a_pair_is_keyed_as_its_two_halves():
    table = build_schedule("dualpipev", 3, 6)
    ids = op_identities(table)
    pairs = [item for item in table.placed_ops() if item.op.kind == Kind.FB]
    assert pairs and len(ids) == len(table.placed_ops()) + len(pairs)
    rows = {tuple(r) for r in ids.tolist()}
    assert len(rows) == len(ids)  # every key once
    for item in pairs:
        forward, backward = halves(item.op)
        assert (item.worker, forward.micro, int(Kind.F), forward.stage) in rows
        assert (item.worker, backward.micro, int(Kind.B), backward.stage) in rows
    assert not {r[2] for r in rows} & {int(Kind.FB)}


def test_pair_halves_share_draws_with_the_same_operation_elsewhere():
    # ZBV places the stages as DualPipeV does (worker w: stages w and 2p-1-w); its forwards are the
    # same (worker, microbatch, F, stage) as DualPipeV's, paired or not: common random numbers.
    noise = NoiseConfig.from_mapping({"samples": 4, "compute": {"cv": 0.1}, "message": {"cv": 0.1}})
    a, b = build_schedule("dualpipev", 4, 8), build_schedule("zbv", 4, 8)
    ia, ib = op_identities(a), op_identities(b)
    fa, fb = op_factors(noise, ia, 4, np.arange(4)), op_factors(noise, ib, 4, np.arange(4))
    in_b = {tuple(r): k for k, r in enumerate(ib.tolist())}
    forwards = [k for k, r in enumerate(ia.tolist()) if r[2] == int(Kind.F)]
    assert len(forwards) == 4 * 8 * 2
    paired = {(it.worker, it.op.micro, int(Kind.F), it.op.stage) for it in a.placed_ops() if it.op.kind == Kind.FB}
    assert paired and paired <= {tuple(ia[k]) for k in forwards}
    k_b = [in_b[tuple(ia[k])] for k in forwards]
    np.testing.assert_array_equal(fa.compute[:, forwards], fb.compute[:, k_b])
    np.testing.assert_array_equal(fa.message[:, forwards], fb.message[:, k_b])


@pytest.mark.parametrize("name, p, m", [("dualpipe", 4, 8), ("dualpipev", 3, 6)])
def test_pair_sends_in_the_reference_simulators_order(name, p, m):
    # The halves each pair sends, in order, are the producers of its messages in the reference's record.
    table = build_schedule(name, p, m)
    record = reference_simulate(table, 1.0, 2.0, 0.1, 1.0, 1.0, "blocking", record=True).record
    sends = pair_sends(table)
    assert sum(len(s) == 2 for s in sends.values()) >= 4
    for item in table.placed_ops():
        if item.op.kind != Kind.FB:
            continue
        sent = [m.producer for m in record.messages if m.src == item.worker and m.producer in halves(item.op)]
        assert [halves(item.op)[i] for i in sends[(item.worker, item.start)]] == sent


def test_a_pair_lasts_its_jittered_halves():
    # One pair's time by hand: (1 - overlap)·t_f·X_F + t_b·X_B, the halves' factors from their keys.
    table = build_schedule("dualpipev", 2, 4)
    noise = NoiseConfig.from_mapping({"samples": 2, "seed": 9, "compute": {"cv": 0.2}})
    f = op_factors(noise, op_identities(table), table.p, np.arange(2))
    ops, _ = reference_inputs(table, f, 1, {Kind.F: [1.0] * 4, Kind.B: [2.0] * 4, Kind.I: [1.0] * 4, Kind.W: [1.0] * 4},
                              0.0, 0.0)
    item = next(it for it in table.placed_ops() if it.op.kind == Kind.FB)
    forward, backward = halves(item.op)
    ids = [tuple(r) for r in op_identities(table).tolist()]
    x_f = f.compute[1, ids.index((item.worker, forward.micro, int(Kind.F), forward.stage))]
    x_b = f.compute[1, ids.index((item.worker, backward.micro, int(Kind.B), backward.stage))]
    assert x_f != 1 and x_b != 1
    ref = reference_simulate(table, 1.0, 2.0, 0.0, np.inf, 0.0, fb_overlap=0.25, op_durations=ops, record=True)
    event = next(e for e in ref.record.ops if e.op == item.op)
    assert event.end - event.start == pytest.approx(0.75 * x_f + 2.0 * x_b, rel=1e-14)


@pytest.mark.parametrize("name, p, m", [("dualpipe", 4, 8), ("dualpipev", 3, 6)])
def test_zero_noise_gives_the_noise_free_results(name, p, m):
    table = build_schedule(name, p, m)
    t_f, t_b = _stage_times(table)
    beta = np.array([1e9, 1e11])
    plain = simulate(table, t_f, t_b, 1e-6, beta, MSG, "contention", fb_overlap=0.3, backend="scan")
    zero = simulate(table, t_f, t_b, 1e-6, beta, MSG, "contention", fb_overlap=0.3, backend="scan",
                    noise=NoiseConfig.from_mapping({"samples": 2, "compute": {"cv": 0.0}}))
    # every factor 1 through the noisy scan: a straggler probability 1 but no worker may straggle
    ones = simulate(table, t_f, t_b, 1e-6, beta, MSG, "contention", fb_overlap=0.3, backend="scan",
                    noise=NoiseConfig.from_mapping({"samples": 2, "straggler": {"prob": 1.0, "slowdown": 3.0, "workers": []}}))
    for r in (zero, ones):
        for k in range(2):
            np.testing.assert_array_equal(r.t_sim[:, k], plain.t_sim)
            np.testing.assert_array_equal(r.comm_time[:, k], plain.comm_time)
            np.testing.assert_array_equal(r.worker_finish[:, k], plain.worker_finish)
    np.testing.assert_array_equal(zero.compute_time[:, 0], plain.compute_time)
    np.testing.assert_allclose(ones.compute_time[:, 0], plain.compute_time, rtol=1e-15)


@pytest.mark.parametrize("mode", ["overlap", "blocking", "contention"])
def test_straggler_with_probability_one_is_that_worker_slowed(mode):
    table = build_schedule("dualpipev", 3, 6)  # worker w runs stages w and 2p-1-w
    t_f, t_b = _stage_times(table)
    slow_worker, slowdown = 1, 2.5
    noise = NoiseConfig.from_mapping({"samples": 2, "straggler": {"prob": 1.0, "slowdown": slowdown, "workers": [slow_worker]}})
    beta = np.array([1e9, 1e10, 1e11])
    r = simulate(table, t_f, t_b, 1e-6, beta, MSG, mode, fb_overlap=0.3, noise=noise, backend="scan")
    slow = np.where(table.placement[0] == slow_worker, slowdown, 1.0)
    assert np.count_nonzero(slow != 1) == 2
    plain = simulate(table, t_f * slow, t_b * slow, 1e-6, beta, MSG, mode, fb_overlap=0.3, backend="scan")
    for k in range(2):
        np.testing.assert_allclose(r.t_sim[:, k], plain.t_sim, rtol=1e-13)
        np.testing.assert_allclose(r.comm_time[:, k], plain.comm_time, rtol=1e-12, atol=1e-18)
        np.testing.assert_allclose(r.worker_finish[:, k], plain.worker_finish, rtol=1e-13)
    np.testing.assert_allclose(r.compute_time[:, 0], plain.compute_time, rtol=1e-14)
    assert np.all(plain.t_sim > simulate(table, t_f, t_b, 1e-6, beta, MSG, mode, fb_overlap=0.3, backend="scan").t_sim)


def test_robustness_sweep_with_dualpipev_has_a_sample_dimension(tmp_path):
    from ppsweep.sweep.runner import run_sweep
    from ppsweep.sweep.evaluate import SweepSpec

    cfg = {
        "name": "pairs",
        "schedules": ["1f1b", "dualpipev"],
        "p": [2],
        "m": [4, 8],
        "bandwidth": {"start": 1e8, "stop": 1e11, "num": 3},
        "latency": [1e-6],
        "model": {"layers": 8, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16},
        "system": {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7},
        "noise": {"samples": 4, "seed": 1, "compute": {"cv": 0.05}, "straggler": {"prob": 0.01, "slowdown": 2.0}},
    }
    run_sweep(SweepSpec.from_config(cfg), tmp_path / "pairs.zarr", "yaml: 1", progress=False)
    ds = xr.open_zarr(tmp_path / "pairs.zarr").load()
    assert ds["t_sim"].dims == ("schedule", "p", "m", "bandwidth", "latency", "sample")
    assert ds.sizes["sample"] == 4
    dv = ds.sel(schedule="dualpipev")
    assert bool(dv["valid"].all())
    assert bool((dv["t_sim"].std("sample") > 0).all())  # the noise moves every DualPipeV point
    assert ds["t_sim_nominal"].dims == ("schedule", "p", "m", "bandwidth", "latency")
