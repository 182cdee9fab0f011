"""Compiled envelopes against the scan, their fallbacks and tie handling, and multi-device scans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ppsweep import build_schedule
from ppsweep.engine import envelope as env_mod
from ppsweep.engine.backend import UnsupportedCase
from ppsweep.engine.core import MODES, simulate
import ppsweep.engine.compiled as compiled_mod
from ppsweep.engine.compiled import program_for
from ppsweep.engine.reference import reference_simulate

# backward_halving is forward_doubling at 2m (tests/test_chimera_concat.py); at p=8, m=16 in ports it passes the cap (scan)


def sweep_like_costs(rng: np.random.Generator, n_stages: int, n: int) -> dict[str, np.ndarray]:
    """Random points of the cost model's shape: per-stage times one profile times a per-point scale
    (backward twice forward), messages and gradients over a per-point bandwidth, latency and
    optimizer time sometimes zero."""
    profile = rng.uniform(0.5, 1.5, n_stages)
    scale = rng.uniform(0.5, 2.0, (n, 1))
    return {
        "t_f": scale * profile,
        "t_b": 2.0 * scale * profile,
        "t_i": scale * profile,
        "t_w": scale * profile,
        "alpha": rng.choice([0.0, 1.0], n) * rng.uniform(0.0, 0.5, n),
        "beta": rng.uniform(1.0, 20.0, n),
        "msg_bytes": 5.0,
        "grad_bytes": 10.0 * profile,
        "t_opt": rng.choice([0.0, 1.0], n) * rng.uniform(0.0, 0.3, n),
    }


def run(table, c, mode, **kwargs):
    return simulate(table, c["t_f"], c["t_b"], c["alpha"], c["beta"], c["msg_bytes"], mode, t_i=c["t_i"], t_w=c["t_w"],
                    grad_bytes=c["grad_bytes"], t_opt=c["t_opt"], **kwargs)


def assert_same(env, scan, depth):
    np.testing.assert_allclose(env.t_sim, scan.t_sim, rtol=1e-12, atol=0)
    np.testing.assert_allclose(env.worker_finish, scan.worker_finish, rtol=1e-12, atol=0)
    np.testing.assert_allclose(env.compute_time, scan.compute_time, rtol=1e-12, atol=0)
    # comm_time: equal up to the tie tolerance accumulated along the critical path
    assert np.all(np.abs(env.comm_time - scan.comm_time) <= 1e-12 * depth * scan.t_sim)


def test_fallback_to_scan_when_a_table_needs_too_many_vectors():
    table = build_schedule("gpipe", 4, 8)
    c = sweep_like_costs(np.random.default_rng(3), table.n_stages, 16)
    program = program_for(table)
    feats = env_mod.features(program, {k: np.asarray(c[k], float) for k in ("t_f", "t_b", "t_i", "t_w", "grad_bytes")},
                             np.asarray(c["alpha"]), np.asarray(c["beta"]), np.asarray(5.0), np.asarray(c["t_opt"]), 1)
    with pytest.raises(env_mod.EnvelopeTooLarge):
        env_mod.build_envelope(program, "contention", feats.weights, feats.comm, cap=1)
    r = run(table, c, "contention", backend="auto", cap=1)
    assert r.backend == "periodic_scan" and "not envelope (needs more than cap=1 vectors)" in r.reason
    with pytest.raises(UnsupportedCase, match="envelope cannot run gpipe in contention: needs more than cap=1 vectors"):
        run(table, c, "contention", backend="envelope", cap=1)
    scan = run(table, c, "contention", backend="scan")
    np.testing.assert_array_equal(r.t_sim, scan.t_sim)
    np.testing.assert_array_equal(r.comm_time, scan.comm_time)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["gpipe", "1f1b", "chimera", "hanayo"])
def test_exact_ties_follow_the_readme_rule(name, mode):
    # Integer costs make many paths tie exactly (a message takes as long as a forward): comm_time
    # must still be the README's critical path, as the reference simulator computes it.
    table = build_schedule(name, 4, 8)
    alpha = np.array([0.0, 0.5, 1.0, 0.0, 1.0])
    beta = np.array([1.0, 2.0, 1.0, np.inf, 0.5])
    r = simulate(table, 1.0, 2.0, alpha, beta, 1.0, mode, grad_bytes=2.0, backend="envelope")
    assert r.method == "envelope"
    for i in range(alpha.size):
        want = reference_simulate(table, 1.0, 2.0, alpha[i], beta[i], 1.0, mode, grad_bytes=2.0)
        assert r.t_sim[i] == pytest.approx(want.t_sim, rel=1e-12)
        np.testing.assert_allclose(r.worker_finish[i], want.worker_finish, rtol=1e-12)
        assert r.comm_time[i] == pytest.approx(want.comm_time, rel=1e-9, abs=1e-9 * want.t_sim)


def test_ambiguous_points_are_flagged():
    # Chimera at p=4: a message as long as a forward makes paths with different message counts tie.
    table = build_schedule("chimera", 4, 8)
    program = program_for(table)
    stage = {"t_f": np.ones(1), "t_b": np.full(1, 2.0), "t_i": np.ones(1), "t_w": np.ones(1), "grad_bytes": np.zeros(1)}
    feats = env_mod.features(program, stage, np.array([0.0, 0.0]), np.array([1.0, 1.0 / 0.37]), np.asarray(1.0), np.asarray(0.0), 1)
    env = env_mod.build_envelope(program, "overlap", feats.weights, feats.comm)
    out = env_mod.evaluate(env, feats, (2,))
    assert env.n_vectors > 1
    assert out.ambiguous.tolist() == [True, False]


def test_features_of_the_cost_model_are_few():
    table = build_schedule("chimera", 8, 16)
    program = program_for(table)
    S = table.n_stages
    prof = np.linspace(1.0, 2.0, S)
    tau = np.array([1.0, 2.0, 4.0])[:, None, None, None]
    stage = {"t_f": tau * prof, "t_b": 2 * tau * prof, "t_i": tau * prof, "t_w": tau * prof, "grad_bytes": 7.0 * prof}
    beta = np.logspace(0, 2, 5)[None, :, None]
    alpha = np.array([0.0, 1e-3])[None, None, :]
    feats = env_mod.features(program, stage, alpha, beta, np.asarray(3.0), np.asarray(0.0), 3)
    # per-layer time, latency, and one 1/beta feature carrying messages and all-reduces; t_opt = 0 drops
    assert feats.n == 3
    assert feats.comm.tolist() == [False, True, True]


def test_prune_keeps_the_pareto_maximal_vectors():
    v = np.array([[1.0, 0.0], [0.6, 0.6], [0.4, 0.4], [1.0, 0.0], [0.0, 1.0], [1.0 + 1e-16, 0.0]])
    kept = env_mod.prune(v)
    assert sorted(map(tuple, kept.round(12))) == [(0.0, 1.0), (0.6, 0.6), (1.0, 0.0)]
    with pytest.raises(env_mod.EnvelopeTooLarge):
        env_mod.prune(v, cap=2)


def test_prune_drops_a_vector_that_a_mix_of_two_covers():
    ends = [(0.0, 1.0), (1.0, 0.0)]
    assert sorted(map(tuple, env_mod.prune(np.array([(1.0, 0.0), (0.5, 0.5), (0.0, 1.0)])))) == ends  # their mix
    above = np.array([(1.0, 0.0), (0.6, 0.6), (0.0, 1.0)])  # above every mix of the other two: the maximum near y = (1, 1)
    assert sorted(map(tuple, env_mod.prune(above))) == sorted(map(tuple, above))
    line = np.array([[3.0, 1.0, 2.0]]) + np.arange(9)[:, None] * np.array([[1.0, -0.5, 0.25]])  # a line of paths
    assert sorted(map(tuple, env_mod.prune(line))) == sorted(map(tuple, line[[0, -1]]))


@pytest.mark.parametrize("seed", range(4))
def test_prune_keeps_every_maximum_and_the_compiled_prune_its_rows(seed):
    rng = np.random.default_rng(seed)
    J = 1 + seed
    ends = rng.random((3, J))
    mixes = rng.dirichlet(np.ones(3), size=40) @ ends  # under the hull of three ends
    v = np.concatenate([ends, mixes, rng.random((20, J)) * 0.9, mixes[:5] + 1e-3 * rng.random((5, J))])
    kept = env_mod.prune(v, cap=1000)
    assert kept.shape[0] < v.shape[0]
    y = rng.exponential(size=(500, J)) * (rng.random((500, J)) < 0.8)
    best, best_kept = (v @ y.T).max(axis=0), (kept @ y.T).max(axis=0)
    np.testing.assert_allclose(best_kept, best, rtol=1e-13)  # the maximum, at every point
    assert np.all(best_kept <= best)  # kept rows are rows of v
    from ppsweep.engine.native_envelope import prune as native_prune

    np.testing.assert_array_equal(native_prune(v, env_mod._SAME), kept)  # the same rows, in order, to the bit


def test_uniform_1f1b_overlap_is_one_vector():
    table = build_schedule("1f1b", 8, 32)
    program = program_for(table)
    stage = {"t_f": np.ones(1), "t_b": np.full(1, 2.0), "t_i": np.ones(1), "t_w": np.ones(1), "grad_bytes": np.zeros(1)}
    feats = env_mod.features(program, stage, np.array([1e-6]), np.array([1e10]), np.asarray(1e6), np.asarray(0.0), 1)
    assert env_mod.build_envelope(program, "overlap", feats.weights, feats.comm).n_vectors == 1


def test_float32_envelope_close_to_float64():
    table = build_schedule("hanayo", 4, 8)
    bandwidth = np.logspace(9, 12, 64)
    args = (table, 0.03, 0.06, 5e-7, bandwidth, 33.5e6)
    r64 = simulate(*args, backend="envelope")
    r32 = simulate(*args, backend="envelope", dtype=np.float32)
    np.testing.assert_allclose(r32.t_sim, r64.t_sim, rtol=1e-5)


def test_sweep_config_accepts_engine_method():
    from ppsweep.sweep.evaluate import SweepSpec

    base = {
        "model": {"layers": 8, "hidden": 64, "heads": 4, "sequence": 32, "vocab": 100, "global_batch": 8},
        "system": {"peak_flops": 1e12, "memory_bandwidth": 1e11, "bandwidth": 1e9, "latency": 1e-6},
        "schedules": ["1f1b"], "p": [2], "m": [4],
    }
    assert SweepSpec.from_config(base).method == "auto"
    assert SweepSpec.from_config({**base, "engine": {"method": "scan"}}).method == "scan"
    with pytest.raises(ValueError, match="engine.method"):
        SweepSpec.from_config({**base, "engine": {"method": "fast"}})


_MULTI_DEVICE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import jax
    from ppsweep import build_schedule
    from ppsweep.engine.core import simulate
    assert len(jax.devices()) == 2, jax.devices()
    args = json.loads(sys.argv[1])
    out = {}
    for name, mode in args["cases"]:
        table = build_schedule(name, 4, 8)
        r = simulate(table, 1.0, 2.0, np.array(args["alpha"]), np.array(args["beta"]), 3.0, mode,
                     grad_bytes=4.0, backend="scan", chunk=8)
        out[f"{name}-{mode}"] = [r.t_sim.tolist(), r.worker_finish.tolist(), r.comm_time.tolist()]
    print(json.dumps(out))
    """
)


def test_scan_split_across_two_devices_matches_one_device():
    # JAX reads the device count when it starts: run a fresh interpreter with two CPU devices.
    rng = np.random.default_rng(11)
    alpha, beta = rng.uniform(0.0, 0.5, 37), rng.uniform(1.0, 20.0, 37)
    cases = [("1f1b", "overlap"), ("chimera", "contention"), ("gpipe", "blocking")]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", _MULTI_DEVICE, json.dumps({"cases": cases, "alpha": alpha.tolist(), "beta": beta.tolist()})],
        capture_output=True, text=True, env=env, cwd=root, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, mode in cases:
        table = build_schedule(name, 4, 8)
        r = simulate(table, 1.0, 2.0, alpha, beta, 3.0, mode, grad_bytes=4.0, backend="scan", chunk=8)
        t_sim, finish, comm = got[f"{name}-{mode}"]
        np.testing.assert_array_equal(np.array(t_sim), r.t_sim)
        np.testing.assert_array_equal(np.array(finish), r.worker_finish)
        np.testing.assert_array_equal(np.array(comm), r.comm_time)


@pytest.mark.parametrize("name, mode", [("gpipe", "contention"), ("hanayo", "blocking")])
def test_blockwise_evaluation_matches_scan(name, mode, monkeypatch):
    # Grids with long axes are evaluated block by block, each block with the vectors that can win
    # in it; the result must not change.
    monkeypatch.setattr(env_mod, "_BLOCK_MIN_VECTORS", 1)
    table = build_schedule(name, 4, 8)
    beta = np.logspace(-1, 2, 96)[:, None]
    alpha = np.concatenate([[0.0], np.logspace(-3, 0, 79)])[None, :]
    args = (table, 1.0, 2.0, alpha, beta, 2.0, mode)
    env = simulate(*args, backend="envelope", grad_bytes=3.0)
    scan = simulate(*args, backend="scan", grad_bytes=3.0)
    assert env.method == "envelope"
    program = program_for(table)
    feats = env_mod.features(program, {"t_f": np.ones(1), "t_b": np.full(1, 2.0), "t_i": np.ones(1), "t_w": np.ones(1),
                                       "grad_bytes": np.full(1, 3.0)}, alpha, beta, np.asarray(2.0), np.asarray(0.0), 2)
    assert compiled_mod.envelope_for(table, program, mode, feats).n_vectors > env_mod._BLOCK_MIN_VECTORS
    assert env_mod._blocks(tuple(feats.arrays), (96, 80)) is not None
    assert_same(env, scan, program.n_ops)


def _grid_envelope(name: str, mode: str, batch: tuple[int, int]):
    """The envelope of ``name`` (p = 4, m = 8) in ``mode`` over a bandwidth × latency grid of ``batch``
    points (latency 0 first), and its features."""
    table = build_schedule(name, 4, 8)
    beta = np.logspace(-1, 2, batch[0])[:, None]
    alpha = np.concatenate([[0.0], np.logspace(-3, 0, batch[1] - 1)])[None, :]
    program = program_for(table)
    feats = env_mod.features(program, {"t_f": np.ones(1), "t_b": np.full(1, 2.0), "t_i": np.ones(1), "t_w": np.ones(1),
                                       "grad_bytes": np.full(1, 3.0)}, alpha, beta, np.asarray(2.0), np.asarray(0.0), 2)
    return compiled_mod.envelope_for(table, program, mode, feats), feats


@pytest.mark.parametrize("name, mode", [("zbv", "ports"), ("chimera", "ports"), ("interleaved_1f1b", "contention")])
def test_the_evaluation_sums_each_row_left_to_right_without_fused_multiply_adds(name, mode, monkeypatch):
    # The evaluation rule (docs/contract.md): a row's value is sum_j c_j * y_j in feature order,
    # every product and sum rounded on its own, and t_sim the maximum of the rows; the same in the
    # tie-checking form as in the plain one. Replayed here point by point in Python floats (which
    # round every operation and never fuse one).
    monkeypatch.setenv("PPSWEEP_ENVELOPE_CACHE", "off")
    batch = (24, 20)
    env, feats = _grid_envelope(name, mode, batch)
    assert env.n_vectors > 2
    ys = [np.broadcast_to(np.asarray(y, dtype=np.float64), batch) for y in feats.arrays]
    want = np.empty(batch)
    for point in np.ndindex(batch):
        values = []
        for row in env.t_sim:
            total = 0.0
            for c, y in zip(row.tolist(), (float(y[point]) for y in ys)):
                total = total + c * y
            values.append(total)
        want[point] = max(values)
    got = env_mod.evaluate(env, feats, batch, finish=False)
    np.testing.assert_array_equal(got.t_sim, want)
    shaped = tuple(np.asarray(y, dtype=np.float64) for y in feats.arrays)
    compute = got.compute_time
    for check in (False, True):  # the form decides comm_time's ties, never a bit of t_sim
        form = env_mod._evaluate_block(env, env.t_sim, None, shaped, batch, np.dtype(np.float64), 1e-9, 1e-12, compute, check)
        np.testing.assert_array_equal(form.t_sim, want)


@pytest.mark.parametrize("name, mode", [("chimera", "ports"), ("hanayo", "contention")])
def test_chunks_and_kept_values_change_no_bit(name, mode, monkeypatch):
    # The evaluation may cut the grid into pieces (_CHUNK_POINTS) and keep each row's value for the
    # tie check (_KEPT_BYTES) or sum it again: every value is the same elementwise sum.
    monkeypatch.setenv("PPSWEEP_ENVELOPE_CACHE", "off")
    env, feats = _grid_envelope(name, mode, (40, 30))
    assert env.n_vectors > 1 and env_mod._tie_form(env.t_sim, env.comm)  # the tie-checking form, several rows
    whole = env_mod.evaluate(env, feats, (40, 30))
    assert whole.ambiguous.any()  # ties found, and their communication parts compared
    monkeypatch.setattr(env_mod, "_CHUNK_POINTS", 7)  # pieces of one row of the grid, or less
    monkeypatch.setattr(env_mod, "_KEPT_BYTES", 0)  # every row summed again in the tie check
    cut = env_mod.evaluate(env, feats, (40, 30))
    for field in ("t_sim", "finish", "comm_time", "ambiguous", "compute_time"):
        np.testing.assert_array_equal(getattr(cut, field), getattr(whole, field), err_msg=field)
