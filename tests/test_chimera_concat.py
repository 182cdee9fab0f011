"""Chimera with more microbatches than workers: forward doubling and backward halving (option ``concat``)."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

import ppsweep
from conftest import rotated_modes
from ppsweep.tables.build import why_unsupported
from ppsweep.cost_model import ModelConfig, SystemConfig, memory_figures
from ppsweep.engine.core import simulate
from ppsweep.tables.ops import Kind
from ppsweep.engine.reference import reference_simulate
from ppsweep.schedules import chimera

DOUBLING = ["forward_doubling", "backward_halving"]
MODES = ["overlap", "blocking", "contention", "ports"]


def build(p: int, m: int, concat: str, **kw) -> ppsweep.ScheduleTable:
    return ppsweep.build_schedule("chimera", p, m, concat=concat, **kw)


def test_direct_is_the_default_and_unchanged():
    for p, m in [(4, 8), (8, 16), (6, 18)]:
        default, direct = ppsweep.build_schedule("chimera", p, m), build(p, m, "direct")
        for name in ("kind", "micro", "stage", "replica"):
            np.testing.assert_array_equal(getattr(default, name), getattr(direct, name))
        # the direct table's closed form (derived before this option existed) still holds
        assert direct.length == chimera.table_length(p, m)


def test_variant_label_selects_the_method():
    table = ppsweep.build_schedule("chimera@concat=forward_doubling", 4, 8)
    assert table.options == {"split": "1:1", "concat": "forward_doubling"}
    assert table.length == build(4, 8, "forward_doubling").length


@pytest.mark.parametrize(
    "p,m,concat,reason",
    [
        (4, 4, "forward_doubling", "m must be at least 2p=8"),
        (4, 4, "backward_halving", "m must be at least 2p=8"),
        (6, 18, "forward_doubling", "m must be a multiple of 4"),
        (5, 20, "backward_halving", "p must be even"),
        (4, 10, "backward_halving", "multiple of p=4"),
    ],
)
def test_operating_range(p, m, concat, reason):
    assert reason in why_unsupported("chimera", p, m, concat=concat)
    with pytest.raises(ppsweep.UnsupportedPointError, match=reason):
        build(p, m, concat)
    assert math.isnan(ppsweep.bubble_formula("chimera", p, m, concat=concat))


def test_bad_concat_names_the_option_and_the_accepted_values():
    with pytest.raises(ValueError, match="concat: must be one of direct, forward_doubling, backward_halving"):
        build(4, 8, "halving")


@pytest.mark.parametrize("concat", DOUBLING)
@pytest.mark.parametrize("p", [2, 4, 6, 8])
def test_valid_everywhere_in_range(p, concat):
    for m in range(2 * p, 8 * p + 1, p):
        if why_unsupported("chimera", p, m, concat=concat):
            continue
        table = build(p, m, concat)  # build_schedule validates it
        n_micro = m if concat == "forward_doubling" else 2 * m
        assert table.m == n_micro
        # both forwards of a pair run back to back on every worker, same stage
        for row in table.orders():
            forwards = [op for op in row if op.kind == Kind.F]
            for k in range(0, len(forwards), 2):
                first, second = forwards[k], forwards[k + 1]
                assert first.stage == second.stage and table.micro_replica[first.micro] == table.micro_replica[second.micro]
                assert row.index(second) == row.index(first) + 1
        if concat == "backward_halving":  # the halves 2i and 2i+1 share microbatch i's direction
            np.testing.assert_array_equal(table.micro_replica[0::2], table.micro_replica[1::2])


@pytest.mark.parametrize("p", [2, 4, 6])
@pytest.mark.parametrize("concat", DOUBLING)
def test_bubble_formula_is_exact_for_small_p(p, concat):
    # (p-2)/(3m/2+p-2) resp. (p-2)/(3m+p-2): p-2 idle forward-sized cells of 2 slots per worker
    for k in (4, 8, 16):
        m = k * p
        if why_unsupported("chimera", p, m, concat=concat):
            continue
        table = build(p, m, concat)
        n_micro = table.m
        assert table.length == 3 * n_micro + 2 * (p - 2)
        assert table.bubble_ratio() == pytest.approx(ppsweep.bubble_formula("chimera", p, m, concat=concat), abs=1e-12)


@pytest.mark.parametrize("p", [8, 16])
def test_bubble_at_larger_p_is_not_the_formula(p):
    # Measured, not derived: for p >= 8 and m >= 8p the doubling rule idles 2p slots per worker,
    # 4 more than the formula's 2(p-2).
    for m in (8 * p, 16 * p):
        table = build(p, m, "forward_doubling")
        assert table.length == 3 * m + 2 * p
        assert table.bubble_ratio() > ppsweep.bubble_formula("chimera", p, m, concat="forward_doubling")


@pytest.mark.parametrize("p,m", [(2, 8), (4, 8), (4, 16), (6, 12), (8, 16), (8, 32)])
def test_backward_halving_at_m_is_forward_doubling_at_2m(p, m):
    halving, doubling = build(p, m, "backward_halving"), build(p, 2 * m, "forward_doubling")
    assert halving.length == doubling.length
    assert halving.bubble_ratio() == doubling.bubble_ratio()
    assert halving.peak_activations() == doubling.peak_activations()


@pytest.mark.parametrize("concat", DOUBLING)
@pytest.mark.parametrize("p", [2, 4, 6, 8])
def test_peak_activations_formula(p, concat):
    for m in (2 * p, 4 * p, 8 * p):
        if why_unsupported("chimera", p, m, concat=concat):
            continue
        assert build(p, m, concat).peak_activations() == ppsweep.peak_activations_formula("chimera", p, m, concat=concat) == 2 * p


def test_doubling_removes_direct_concatenations_intermediate_bubbles():
    # With B = 2F direct concatenation tends to (p-2)/(4p-2) idle; the doubling methods to 0.
    for p in (4, 8):
        m = 16 * p
        direct = build(p, m, "direct").bubble_ratio()
        for concat in DOUBLING:
            assert build(p, m, concat).bubble_ratio() < direct / 3


MODEL = ModelConfig(layers=16, hidden=1024, heads=16, sequence=1024, vocab=32000, global_batch=64)


def test_memory_figures_show_the_price_of_forward_doubling():
    # Activation bytes of the bottleneck worker: forward doubling holds two units' activations
    # (2p microbatches), backward halving the direct schedule's (2p halves = p microbatches).
    for p, m in [(4, 16), (8, 32)]:
        direct, doubling, halving = (memory_figures(MODEL, t, t.m).peak_activation_bytes
                                     for t in (build(p, m, c) for c in ("direct", *DOUBLING)))
        assert doubling == pytest.approx(2 * direct, rel=1e-12)
        assert halving == pytest.approx(direct, rel=1e-12)


def test_backward_halving_costs_use_half_microbatches():
    system = SystemConfig.from_mapping(dict(peak_flops=1e15, memory_bandwidth=1e20, bandwidth=5e10, latency=1e-6))
    from ppsweep.cost_model import stage_costs

    direct, halving = (stage_costs(MODEL, system, build(4, 16, c)) for c in ("direct", "backward_halving"))
    assert halving.msg_bytes == pytest.approx(direct.msg_bytes / 2, rel=1e-12)
    # compute-bound (memory bandwidth far above need): the two halves cost one microbatch's forward
    np.testing.assert_allclose(2 * halving.t_f, direct.t_f, rtol=1e-9)


#: Forward doubling at p=6, m=12 (a size tests/test_engine.py does not run) in every mode; the
#: others (which tests/test_engine.py also runs in every mode at p=4, m=8) in two modes each, rotating.
ENGINE_CASES = [("forward_doubling", 6, 12, mode) for mode in MODES] + [
    (*case, mode) for k, case in enumerate([("forward_doubling", 4, 8), ("backward_halving", 4, 8), ("backward_halving", 2, 4)])
    for mode in rotated_modes(MODES, k)]


@pytest.mark.parametrize("concat,p,m,mode", ENGINE_CASES)
def test_engine_equals_reference_on_random_points(concat, p, m, mode):
    table = build(p, m, concat)
    S, n = table.n_stages, 3
    rng = np.random.default_rng(zlib.crc32(f"{concat}-{p}-{m}-{mode}".encode()))
    t_f = rng.uniform(0.5, 1.5, (n, S))
    t_b = 2 * t_f * rng.uniform(0.8, 1.2, (n, S))
    alpha, beta = rng.uniform(0, 0.2, n), rng.uniform(2.0, 20.0, n)
    msg, t_opt = rng.uniform(0.5, 2.0, n), rng.uniform(0, 0.3, n)
    grad = rng.uniform(1, 5, S)
    got = simulate(table, t_f, t_b, alpha, beta, msg, mode, grad_bytes=grad, t_opt=t_opt)
    for k in range(n):
        want = reference_simulate(table, t_f[k], t_b[k], alpha[k], beta[k], msg[k], mode, grad_bytes=grad, t_opt=t_opt[k])
        assert got.t_sim[k] == pytest.approx(want.t_sim, rel=1e-9)
        np.testing.assert_allclose(got.worker_finish[k], want.worker_finish, rtol=1e-9)
        assert got.comm_time[k] == pytest.approx(want.comm_time, rel=1e-9, abs=1e-9 * want.t_sim)


def test_without_communication_the_engine_step_is_the_table():
    for concat in DOUBLING:
        table = build(4, 16, concat)
        r = simulate(table, np.ones((1, 1)), 2 * np.ones((1, 1)), np.zeros(1), np.full(1, np.inf), np.zeros(1))
        assert r.t_sim[0] == table.length
