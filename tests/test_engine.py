"""The JAX engine against the independent reference simulator, in every comm mode, and its sanity properties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import case_id, supported_cases
from ppsweep import build_schedule
from ppsweep.engine.core import MODES, simulate
from ppsweep.engine.reference import reference_simulate

OPTIONS = {"chimera": [{}, {"split": "1:2"}, {"concat": "forward_doubling"}, {"concat": "backward_halving"}], "hanayo": [{"waves": 1}, {"waves": 2}]}


def random_costs(rng: np.random.Generator, n_stages: int, n: int) -> dict[str, np.ndarray]:
    """Random per-stage compute and per-point network costs, with communication as large as compute."""
    return {
        "t_f": rng.uniform(0.2, 1.0, (n, n_stages)),
        "t_b": rng.uniform(0.4, 2.0, (n, n_stages)),
        "alpha": rng.choice([0.0, 1.0], n) * rng.uniform(0.0, 0.5, n),
        "beta": rng.uniform(1.0, 20.0, n),
        "msg_bytes": rng.uniform(0.0, 10.0, n),
        "grad_bytes": rng.uniform(0.0, 20.0, (n, n_stages)),
        "t_opt": rng.choice([0.0, 1.0], n) * rng.uniform(0.0, 0.3, n),
    }


def test_hand_computed_two_workers():
    # GPipe p=2 m=1: F on w0, message, F and B on w1, message, B on w0.
    table = build_schedule("gpipe", 2, 1)
    msg = 0.1 + 5.0 / 10.0
    for mode in MODES:
        r = simulate(table, 1.0, 2.0, 0.1, 10.0, 5.0, mode)
        assert r.t_sim == pytest.approx(2 * 1.0 + 2 * 2.0 + 2 * msg)
        assert r.comm_time == pytest.approx(2 * msg)
    blocking = simulate(table, 1.0, 2.0, 0.1, 10.0, 5.0, "blocking")
    np.testing.assert_allclose(blocking.worker_finish, [6.0 + 2 * msg, 4.0 + 2 * msg])


@pytest.mark.parametrize("case", supported_cases([(4, 8), (8, 16)], OPTIONS), ids=case_id)
def test_free_communication_equals_compute_only_timing(case):
    # With zero latency and infinite bandwidth every mode runs the idealized table: t_f = f_slots
    # and t_b = b_slots seconds make t_sim the table's length in slots.
    name, p, m, options = case
    table = build_schedule(name, p, m, **options)
    for mode in MODES:
        r = simulate(table, 1.0, 2.0, 0.0, math.inf, 1e6, mode, grad_bytes=1e9)
        assert r.t_sim == pytest.approx(table.length, rel=1e-12)
        assert r.comm_time == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("case", supported_cases([(4, 8), (8, 16)], OPTIONS), ids=case_id)
def test_modes_order_and_monotonicity(case):
    name, p, m, options = case
    table = build_schedule(name, p, m, **options)
    bandwidth = np.logspace(0, 3, 24)[:, None]  # increasing
    latency = np.linspace(0.0, 0.5, 6)[None, :]  # increasing
    t = {mode: simulate(table, 1.0, 2.0, latency, bandwidth, 20.0, mode, grad_bytes=50.0).t_sim for mode in MODES}
    tol = 1e-12 * t["overlap"]
    assert np.all(t["contention"] >= t["overlap"] - tol)
    assert np.all(t["blocking"] >= t["overlap"] - tol)
    for mode in MODES:
        assert np.all(np.diff(t[mode], axis=0) <= 1e-12 * t[mode][1:])  # more bandwidth never slower
        assert np.all(np.diff(t[mode], axis=1) >= -1e-12 * t[mode][:, 1:])  # more latency never faster


def test_broadcasting_and_per_stage_costs():
    table = build_schedule("1f1b", 4, 8)
    per_stage = np.array([1.0, 2.0, 1.0, 1.0])
    alphas, betas = [0.0, 0.1, 0.3], [10.0, 30.0, 100.0, 300.0, 1000.0]  # distinct per axis
    r = simulate(table, per_stage, 2 * per_stage, np.array(alphas)[:, None], np.array(betas)[None, :], 1.0)
    assert r.t_sim.shape == (3, 5) and r.worker_finish.shape == (3, 5, 4)
    # The slowest stage (2 s forward, 4 s backward) sets the steady state.
    for i, a in enumerate(alphas):
        for j, b in enumerate(betas):
            single = reference_simulate(table, per_stage, 2 * per_stage, a, b, 1.0)
            assert r.t_sim[i, j] == pytest.approx(single.t_sim, rel=1e-12), (a, b)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"alpha": -1.0}, "alpha"),
        ({"beta": 0.0}, "beta"),
        ({"msg_bytes": -1.0}, "msg_bytes"),
        ({"t_f": np.ones(3)}, "t_f"),
        ({"mode": "fast"}, "comm.mode"),
    ],
)
def test_bad_input_names_the_field(kwargs, field):
    table = build_schedule("1f1b", 4, 8)
    args = {"t_f": 1.0, "t_b": 2.0, "alpha": 0.0, "beta": 1.0, "msg_bytes": 1.0, "mode": "overlap", **kwargs}
    with pytest.raises(ValueError, match=field):
        simulate(table, **args)


def test_float32_close_to_float64():
    table = build_schedule("1f1b", 8, 32)
    bandwidth = np.logspace(9, 12, 64)
    args = (table, 0.03, 0.06, 5e-7, bandwidth, 33.5e6)
    r64 = simulate(*args)
    r32 = simulate(*args, dtype=np.float32)
    np.testing.assert_allclose(r32.t_sim, r64.t_sim, rtol=1e-5)


def test_costs_form_equals_keyword_form():
    from ppsweep.engine.cost_grid import Costs

    table = build_schedule("chimera", 4, 8)
    rng = np.random.default_rng(7)
    c = random_costs(rng, table.n_stages, 5)
    for mode in MODES:
        keyword = simulate(table, c["t_f"], c["t_b"], c["alpha"], c["beta"], c["msg_bytes"], mode,
                           grad_bytes=c["grad_bytes"], t_opt=c["t_opt"], backend="scan")
        costs = Costs.of(table.n_stages, c["t_f"], c["t_b"], c["alpha"], c["beta"], c["msg_bytes"],
                         grad_bytes=c["grad_bytes"], t_opt=c["t_opt"])
        pytree = simulate(table, costs, mode, backend="scan")
        assert np.array_equal(keyword.t_sim, pytree.t_sim) and np.array_equal(keyword.comm_time, pytree.comm_time)


def test_import_leaves_jax_x64_flag_alone():
    # A fresh interpreter (spawned, never forked): importing ppsweep and running the engine keeps
    # JAX's global flag as it was, and the engine still computes in float64.
    import subprocess
    import sys

    code = (
        "import jax; before = jax.config.jax_enable_x64; import ppsweep, ppsweep.engine.core, ppsweep.engine.envelope, ppsweep.sweep.evaluate;"
        "from ppsweep.engine.core import simulate; from ppsweep import build_schedule;"
        "r = simulate(build_schedule('1f1b', 2, 2), 1.0, 2.0, 1e-9, 1e10, 1.0, backend='scan');"
        "assert jax.config.jax_enable_x64 == before == False, jax.config.jax_enable_x64;"
        "assert r.t_sim.dtype == 'float64' and abs(float(r.t_sim) - 9.0 - 2.2e-9) < 1e-13, repr(r.t_sim)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bad_dtype_and_chunk_are_one_line_errors():
    table = build_schedule("1f1b", 2, 2)
    with pytest.raises(ValueError, match=r"engine\.dtype: must be float64 or float32, got int32"):
        simulate(table, 0.03, 0.06, 5e-7, 1e10, 33.5e6, dtype=np.int32)
    with pytest.raises(ValueError, match=r"engine\.chunk: must be an integer >= 1"):
        simulate(table, 0.03, 0.06, 5e-7, 1e10, 33.5e6, chunk=0)
    scalar = simulate(table, 0.03, 0.06, 5e-7, 1e10, 33.5e6, backend="scan")  # scalars on the scan
    assert scalar.t_sim.shape == () and scalar.t_sim > 0
