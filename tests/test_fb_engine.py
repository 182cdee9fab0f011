"""The engine on overlapped pairs F&B, mixed and split backwards: equal to the reference simulator."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import ppsweep
from conftest import rotated_modes
from ppsweep.engine.core import simulate
from ppsweep.engine.program import compile_program
from ppsweep.engine.reference import reference_simulate

CASES = [("dualpipe", 4, 8), ("dualpipev", 3, 6), ("zb_h2", 3, 5), ("zbv", 2, 4)]
MODES = ["overlap", "blocking", "contention", "ports"]


#: Each case in two modes per method, the envelope in the two the scan leaves (every case meets
#: every mode; each method meets every mode over the cases): each (table, mode, method) is one compilation.
METHOD_CASES = [(name, p, m, mode, method) for i, (name, p, m) in enumerate(CASES)
                for method, k in (("scan", i), ("envelope", i + 1)) for mode in rotated_modes(MODES, k)]


@pytest.mark.parametrize("name,p,m,mode,method", METHOD_CASES)
def test_engine_equals_reference_on_random_points(name, p, m, mode, method):
    table = ppsweep.build_schedule(name, p, m)
    S, n = table.n_stages, 3
    rng = np.random.default_rng(zlib.crc32(f"{name}-{p}-{m}-{mode}-{method}".encode()))
    if method == "scan":  # any per-stage costs
        t_f = rng.uniform(0.5, 1.5, (n, S))
        t_b = 2 * t_f * rng.uniform(0.8, 1.2, (n, S))
        t_i = t_b * rng.uniform(0.3, 0.7, (n, S))
    else:  # the cost model's shape (one per-stage profile), which the envelope compiles within its cap
        # (in ports, with equal stages: unequal ones need more vectors than the cap on these tables)
        profile = np.ones(S) if mode == "ports" else rng.uniform(0.5, 1.5, S)
        t_f = rng.uniform(0.5, 2.0, (n, 1)) * profile
        t_b = 2.2 * t_f
        t_i = 0.4 * t_b
    t_w = t_b - t_i
    alpha, beta = rng.uniform(0, 0.2, n), rng.uniform(2.0, 20.0, n)
    msg, overlap, t_opt = rng.uniform(0.5, 2.0, n), rng.uniform(0, 1, n), rng.uniform(0, 0.3, n)
    grad = rng.uniform(1, 5, S)
    got = simulate(table, t_f, t_b, alpha, beta, msg, mode, t_i=t_i, t_w=t_w, grad_bytes=grad, t_opt=t_opt,
                   fb_overlap=overlap, backend=method)
    assert got.method == method
    for k in range(n):
        want = reference_simulate(table, t_f[k], t_b[k], alpha[k], beta[k], msg[k], mode, t_i=t_i[k], t_w=t_w[k],
                                  grad_bytes=grad, t_opt=t_opt[k], fb_overlap=overlap[k])
        assert got.t_sim[k] == pytest.approx(want.t_sim, rel=1e-9)
        np.testing.assert_allclose(got.worker_finish[k], want.worker_finish, rtol=1e-9)
        assert got.comm_time[k] == pytest.approx(want.comm_time, rel=1e-9, abs=1e-9 * want.t_sim)
        assert got.compute_time[k] == pytest.approx(want.compute_time + p * t_opt[k], rel=1e-9)


def test_a_pair_is_four_steps_of_one_worker():
    table = ppsweep.build_schedule("dualpipev", 2, 4)
    program = compile_program(table)
    n_pairs = sum(1 for item in table.placed_ops() if item.op.kind == ppsweep.Kind.FB)
    assert program.n_ops == len(table.placed_ops())
    assert len(program.compute_rows) == program.n_ops + 3 * n_pairs
    assert int(program.active.sum()) == len(program.compute_rows)


def test_without_communication_the_engine_step_is_the_table():
    for name, p, m in CASES:
        table = ppsweep.build_schedule(name, p, m)
        r = simulate(table, np.ones((1, 1)), 2 * np.ones((1, 1)), np.zeros(1), np.full(1, np.inf), np.zeros(1))
        assert r.t_sim[0] == table.length, name


def test_bad_fb_overlap_is_refused():
    table = ppsweep.build_schedule("dualpipev", 2, 4)
    with pytest.raises(ValueError, match="fb_overlap: must be in"):
        simulate(table, np.ones(1), np.ones(1), np.zeros(1), np.ones(1), np.ones(1), fb_overlap=1.5)


def test_ports_mode_runs_split_backwards():
    zbv = ppsweep.build_schedule("zbv", 3, 6)
    rng = np.random.default_rng(3)
    t_f, t_b = rng.uniform(0.2, 1.0, zbv.n_stages), rng.uniform(0.4, 2.0, zbv.n_stages)
    got = simulate(zbv, t_f[None], t_b[None], np.zeros(1), np.full(1, 5.0), np.full(1, 3.0), "ports", backend="scan")
    want = reference_simulate(zbv, t_f, t_b, 0.0, 5.0, 3.0, "ports")
    assert got.t_sim[0] == pytest.approx(want.t_sim, rel=1e-9)
