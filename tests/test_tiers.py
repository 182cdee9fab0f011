"""The two-tier network (issue 27): each message and synchronisation takes the tier of the nodes it joins.

Pipeline worker ``w`` on node ``worker_node[w]``: a hop between two workers of one node costs
``alpha_intra + bytes/beta_intra``, any other ``alpha + bytes/beta`` (ppsweep/engine/tiers.py).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from conftest import rotated_modes
from ppsweep import SCHEDULES, build_schedule
from ppsweep.engine.core import simulate
from ppsweep.engine.reference import reference_simulate
from ppsweep.engine.tiers import nodes_of

MODES = ["overlap", "blocking", "contention", "ports"]


def _crossing(p: int, gpus_per_node: int) -> set[tuple[int, int]]:
    nodes = nodes_of(p, gpus_per_node)
    return {(a, b) for a in range(p) for b in range(p) if nodes[a] != nodes[b]}


# ---- a hop's tier follows placement ------------------------------------------------------------

def test_gpipe_pays_the_network_only_on_hops_that_cross_nodes():
    # GPipe, p = 16, m = 4, t_f = F, t_b = B, the intra tier free (alpha_intra = 0, beta_intra = inf),
    # every hop between nodes costs c = alpha + bytes/beta. The forward wave crosses X node
    # boundaries (c each) on its way to the last worker, which then runs its m forwards; the
    # backward wave crosses them again on its way back: t_sim = (m + p - 1)(F + B) + 2·X·c.
    # gpus_per_node = 1: X = 15 (every hop); gpus_per_node = 8: X = 1 (worker 7 <-> 8 only).
    p, m, F, B, alpha, beta, size = 16, 4, 1.0, 2.0, 0.25, 10.0, 5.0
    c = alpha + size / beta
    table = build_schedule("gpipe", p, m)
    for gpn, crossings in ((1, 15), (8, 1), (16, 0)):
        want = (m + p - 1) * (F + B) + 2 * crossings * c
        nodes = nodes_of(p, gpn)
        ref = reference_simulate(table, F, B, alpha, beta, size, alpha_intra=0.0, beta_intra=np.inf, worker_node=nodes)
        got = simulate(table, F, B, alpha, beta, size, alpha_intra=0.0, beta_intra=np.inf, worker_node=nodes)
        assert ref.t_sim == pytest.approx(want, rel=1e-12)
        assert float(got.t_sim) == pytest.approx(want, rel=1e-12)
        assert float(got.comm_time) == pytest.approx(2 * crossings * c, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name, m, extra", [
    ("1f1b", 8, set()),
    ("zbv", 8, set()),  # V: the turn from chunk 0 to chunk 1 stays on worker 15, no message
    ("dualpipev", 32, set()),
    ("chimera", 16, set()),  # both directions cross between workers 7 and 8
    ("interleaved_1f1b", 16, {(15, 0), (0, 15)}),  # the last-to-first hop between chunks crosses
])
def test_the_messages_that_take_the_network_are_exactly_those_between_nodes(name, m, extra):
    """p = 16, 8 GPUs a node, the intra tier free: in the reference's record every message between
    workers 7 and 8 (and, for the interleaved schedule, 15 and 0) takes the message time c, every
    other one takes 0; with 1 GPU a node every message takes c. The engine agrees on the step."""
    p, alpha, beta, size = 16, 0.125, 8.0, 2.0
    c = alpha + size / beta
    table = build_schedule(name, p, m)
    for gpn in (1, 8):
        nodes = nodes_of(p, gpn)
        ref = reference_simulate(table, 1.0, 2.0, alpha, beta, size, grad_bytes=4.0, alpha_intra=0.0, beta_intra=np.inf,
                                 worker_node=nodes, record=True)
        hops = {(e.src, e.dst) for e in ref.record.messages}
        crossing = hops & _crossing(p, gpn)
        if gpn == 8:
            assert crossing == {(7, 8), (8, 7)} | extra
        else:
            assert crossing == hops
        for e in ref.record.messages:
            assert e.arrive - e.send == pytest.approx(c if (e.src, e.dst) in crossing else 0.0, abs=1e-12)
        got = simulate(table, 1.0, 2.0, alpha, beta, size, grad_bytes=4.0, alpha_intra=0.0, beta_intra=np.inf,
                       worker_node=nodes)
        assert float(got.t_sim) == pytest.approx(ref.t_sim, rel=1e-12)


def test_replica_sync_takes_the_intra_tier_only_where_every_holder_shares_a_node():
    # Chimera p = 4: stage s is held by workers s and 3 - s. Placement [0, 1, 1, 0] puts both holders
    # of every stage on one node: the ring all-reduce (2 steps of alpha + (g/2)/beta) is on the
    # intra tier; placement [0, 0, 1, 1] splits them: on the tier between nodes. Only the syncs'
    # costs differ between the two runs below (messages free), and t_opt makes each one wait.
    table = build_schedule("chimera", 4, 4)
    g, alpha, beta, ai, bi = 8.0, 0.5, 4.0, 0.0625, 64.0
    inter_sync, intra_sync = 2 * (alpha + g / 2 / beta), 2 * (ai + g / 2 / bi)
    base = reference_simulate(table, 1.0, 2.0, 0.0, np.inf, 1.0, grad_bytes=0.0)
    for nodes, sync in (([0, 1, 1, 0], intra_sync), ([0, 0, 1, 1], inter_sync)):
        # messages free on both tiers: only the synchronisations pay (alpha, beta apply to them alone)
        ref = reference_simulate(table, 1.0, 2.0, alpha, beta, 0.0, grad_bytes=g, alpha_intra=ai, beta_intra=bi,
                                 worker_node=nodes, record=True)
        assert all(s.end - s.start == pytest.approx(sync, rel=1e-12) for s in ref.record.syncs)
        assert ref.t_sim > base.t_sim
        got = simulate(table, 1.0, 2.0, alpha, beta, 0.0, grad_bytes=g, alpha_intra=ai, beta_intra=bi, worker_node=nodes)
        assert float(got.t_sim) == pytest.approx(ref.t_sim, rel=1e-12)


# ---- every backend equals the reference on two tiers --------------------------------------------

def _small_point(name: str) -> tuple[int, int]:
    from ppsweep.tables.build import why_unsupported

    return next((p, m) for p, m in ((4, 8), (4, 4), (4, 16)) if why_unsupported(name, p, m) is None)


#: Two placements of p = 4: two nodes of two, and nodes that put a replicated stage's holders together.
PLACEMENTS = ([0, 0, 1, 1], [0, 1, 1, 0])


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_every_backend_equals_the_reference_on_two_tiers(name):
    """Every registered schedule at p = 4, both placements, every mode: the compiled scan and the
    envelope (all four modes; a cap of 1024 vectors, so that it compiles), the JAX scan (one mode on
    every third schedule: each mode once), equal to the reference at random points whose tiers differ."""
    p, m = _small_point(name)
    table = build_schedule(name, p, m)
    S, n = table.n_stages, 3
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    t_f = rng.uniform(0.5, 1.5, (n, 1))  # one profile: the envelope compiles within its cap
    t_b = 2.0 * t_f
    alpha, beta = rng.uniform(0.05, 0.2, n), rng.uniform(2.0, 8.0, n)
    # within a node faster than between: in a fixed ratio (the envelope merges the tiers' features)
    # on the first placement, independently on the second (features of their own)
    ratios = [(0.25, 8.0), (rng.uniform(0.0, 0.5, n), rng.uniform(2.0, 20.0, n))]
    msg, t_opt, grad = rng.uniform(0.5, 2.0, n), rng.uniform(0, 0.3, n), rng.uniform(1, 5, S)
    k = sorted(SCHEDULES).index(name)
    runs = [(mode, "native_scan") for mode in MODES] + [(mode, "envelope") for mode in MODES]
    if k % 3 == 0:  # each JAX scan compiles (seconds): four schedules, one mode each
        runs += [(mode, "jax_scan") for mode in rotated_modes(MODES, k // 3, 1)]
    for nodes, (a_ratio, b_ratio) in zip(PLACEMENTS, ratios):
        alpha_intra, beta_intra = alpha * a_ratio, beta * b_ratio
        want = [reference_simulate(table, t_f[i, 0], t_b[i, 0], alpha[i], beta[i], msg[i], mode, grad_bytes=grad,
                                   t_opt=t_opt[i], alpha_intra=alpha_intra[i], beta_intra=beta_intra[i], worker_node=nodes)
                for mode in MODES for i in range(n)]
        for mode, backend in runs:
            got = simulate(table, t_f, t_b, alpha, beta, msg, mode, grad_bytes=grad, t_opt=t_opt, backend=backend,
                           alpha_intra=alpha_intra, beta_intra=beta_intra, worker_node=nodes, cap=1024)
            where = f"{name} p={p} m={m} nodes={nodes} {mode} {backend}"
            assert got.backend == backend, where
            for i in range(n):
                ref = want[MODES.index(mode) * n + i]
                assert got.t_sim[i] == pytest.approx(ref.t_sim, rel=1e-9), where
                np.testing.assert_allclose(got.worker_finish[i], ref.worker_finish, rtol=1e-9, err_msg=where)
                assert got.comm_time[i] == pytest.approx(ref.comm_time, rel=1e-9, abs=1e-9 * ref.t_sim), where


def test_noisy_scan_takes_each_message_tier_times_its_factor():
    """The JAX scan with noise on two tiers: each message's time is its tier's times its own factor.
    The reference gets those times explicitly (its tier's ``reference_inputs`` per message; the tier
    from the message's workers), for Chimera with its replicas' holders on one node (intra syncs)."""
    from ppsweep.engine.noise import NoiseConfig, op_factors, op_identities, reference_inputs
    from ppsweep.tables.ops import Kind

    noise = NoiseConfig.from_mapping({"samples": 2, "seed": 3, "compute": {"dist": "lognormal", "cv": 0.1},
                                      "message": {"dist": "normal", "cv": 0.3}})
    table, mode, nodes = build_schedule("chimera", 4, 4), "contention", [0, 1, 1, 0]
    t_f, t_b, alpha, beta, ai, bi, size, grad = 1.0, 2.0, 0.1, 2.0, 0.01, 40.0, 1.5, np.full(table.n_stages, 3.0)
    got = simulate(table, t_f, t_b, alpha, beta, size, mode, grad_bytes=grad, alpha_intra=ai, beta_intra=bi,
                   worker_node=nodes, noise=noise, backend="scan")
    crossing = {e.producer for e in reference_simulate(table, t_f, t_b, alpha, beta, size, record=True).record.messages
                if nodes[e.src] != nodes[e.dst]}
    f = op_factors(noise, op_identities(table), table.p, np.arange(noise.samples))
    S = table.n_stages
    durations = {Kind.F: [t_f] * S, Kind.B: [t_b] * S, Kind.I: [t_b / 2] * S, Kind.W: [t_b / 2] * S}
    for k in range(noise.samples):
        ops, inter = reference_inputs(table, f, k, durations, alpha, size / beta)
        _, intra = reference_inputs(table, f, k, durations, ai, size / bi)
        msgs = {op: inter[op] if op in crossing else intra[op] for op in inter}
        ref = reference_simulate(table, t_f, t_b, alpha, beta, size, mode, grad_bytes=grad, alpha_intra=ai, beta_intra=bi,
                                 worker_node=nodes, op_durations=ops, message_times=msgs)
        assert got.t_sim[k] == pytest.approx(ref.t_sim, rel=1e-12)
        np.testing.assert_allclose(got.worker_finish[k], ref.worker_finish, rtol=1e-12)


# ---- the default is the single-tier engine -------------------------------------------------------

@pytest.mark.parametrize("name", ["1f1b", "chimera", "dualpipev"])
def test_equal_tiers_give_the_single_tier_result_to_the_bit_whatever_the_placement(name):
    """With the intra tier equal to the inter one (the default), any placement gives the bits of the
    default placement (each worker its own node: every hop between nodes), on the scan and the envelope."""
    table = build_schedule(name, 4, 8)
    alpha, beta = np.array([0.0, 1e-3, 0.1])[:, None], np.array([1e3, 1e6, np.inf])
    for method in ("scan", "envelope"):
        for mode in MODES:
            plain = simulate(table, 1.0, 2.0, alpha, beta, 5e3, mode, grad_bytes=1e4, t_opt=0.5, backend=method)
            for nodes in ([0, 0, 0, 0], [0, 1, 1, 0]):
                same = simulate(table, 1.0, 2.0, alpha, beta, 5e3, mode, grad_bytes=1e4, t_opt=0.5, backend=method,
                                alpha_intra=alpha, beta_intra=beta, worker_node=nodes)
                for field in ("t_sim", "worker_finish", "comm_time", "compute_time"):
                    assert np.array_equal(getattr(same, field), getattr(plain, field)), (name, method, mode, nodes, field)


# ---- bad input -------------------------------------------------------------------------------------

def test_bad_placement_and_tier_costs_name_the_field():
    table = build_schedule("1f1b", 4, 4)
    with pytest.raises(ValueError, match="worker_node: must be 4 integers"):
        simulate(table, 1.0, 2.0, 0.0, 1.0, 1.0, worker_node=[0, 1])
    with pytest.raises(ValueError, match="worker_node: must be 4 integers"):
        simulate(table, 1.0, 2.0, 0.0, 1.0, 1.0, worker_node=[0, 0, -1, 1])
    with pytest.raises(ValueError, match="alpha_intra: must be finite and >= 0"):
        simulate(table, 1.0, 2.0, 0.0, 1.0, 1.0, alpha_intra=-1.0)
    with pytest.raises(ValueError, match="beta_intra: bandwidth must be > 0"):
        simulate(table, 1.0, 2.0, 0.0, 1.0, 1.0, beta_intra=0.0)
    with pytest.raises(ValueError, match="worker_node: must be 4 integers"):
        reference_simulate(table, 1.0, 2.0, 0.0, 1.0, 1.0, worker_node=[0, 1, 2])
    with pytest.raises(ValueError, match="system.gpus_per_node: must be an integer >= 1"):
        nodes_of(4, 0)


# ---- the sweep -----------------------------------------------------------------------------------

def test_a_sweep_places_workers_by_gpus_per_node():
    """``system.gpus_per_node`` and ``system.intra_bandwidth``/``intra_latency`` reach the engine: the
    sweep's t_sim is the engine's with worker w on node w // gpus_per_node and the intra tier's costs."""
    from conftest import SMALL_MODEL, SMALL_SYSTEM
    from ppsweep.cost_model import ModelConfig, SystemConfig, engine_costs, stage_costs
    from ppsweep.sweep.evaluate import SweepSpec, simulate_table

    system = {**SMALL_SYSTEM, "gpus_per_node": 2, "intra_bandwidth": 4e11, "intra_latency": 1e-7}
    spec = SweepSpec.from_config({"name": "tiers", "schedules": ["1f1b"], "p": [4], "m": [4], "bandwidth": [1e9, 1e10],
                                  "latency": [1e-6], "model": SMALL_MODEL, "system": system})
    table = build_schedule("1f1b", 4, 4)
    got = simulate_table(spec, table)["t_sim"].ravel()
    costs = stage_costs(ModelConfig.from_mapping(SMALL_MODEL), SystemConfig.from_mapping(system), table)
    point = engine_costs(costs, alpha=1e-6, beta=np.array([1e9, 1e10]), alpha_intra=1e-7, beta_intra=4e11)
    want = simulate(table, point, "overlap", worker_node=[0, 0, 1, 1]).t_sim.ravel()
    single = simulate(table, point, "overlap").t_sim.ravel()
    assert np.array_equal(got, want)
    assert np.all(got < single)  # the hops within a node are faster
    with pytest.raises(ValueError, match="system.gpus_per_node"):
        SystemConfig.from_mapping({**SMALL_SYSTEM, "gpus_per_node": 0})
