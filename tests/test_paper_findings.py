"""Each finding of the paper reproduction on a reduced study, against values derived by hand or
recomputed independently from the stores (not taken from the finding's own tables).

Reduced study: ``conf/sweep/paper.yaml`` with p = 8, m ∈ {8, 16}, comm mode ``blocking`` (the
nine systems stay: the findings select them from the compute × bandwidth × latency grid).
"""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep.paper import findings, reproduce
from ppsweep.paper.claims import CLAIMS
from ppsweep.paper.sweeps import load_plan, run_or_load
from ppsweep.paper.systems import SYSTEMS
from ppsweep.paper.verdict import verdicts

REDUCED = ["p=[8]", "m=[8,16]", "comm.mode=[blocking]", "engine.compilation_cache=null"]
# megatron_128l by hand: L = 128, h = s = 4096, a = 32, V = 51200, G = 256, bf16.
L, H, S, A, V, G = 128, 4096, 4096, 32, 51200, 256


def forward_seconds_per_stage(p: int, m: int, peak: float) -> float:
    """SPEC §3: (L/p) layers × (24·b·s·h² + 4·b·s²·h) FLOPs / peak (compute-bound at b >= 1)."""
    b = G / m
    return (L / p) * (24 * b * S * H**2 + 4 * b * S**2 * H) / peak


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The reduced study's stores and its five findings."""
    out = tmp_path_factory.mktemp("paper")
    overrides = [*REDUCED, f"results_dir={out}"]
    ds, spec = run_or_load("paper", overrides, False, lambda msg: None)
    asym, _ = run_or_load("paper_asym", overrides, False, lambda msg: None)
    results = {
        1: findings.finding1(ds, spec), 2: findings.finding2(ds, spec), 3: findings.finding3(ds, spec),
        4: findings.finding4(ds, spec), 5: findings.finding5(ds, asym, spec),
    }
    return ds, asym, spec, results


def store_t(ds, schedule, system, m, mode="blocking", p=8):
    return float(ds.t_sim.sel(schedule=schedule, p=p, m=m, comm=mode, compute=system.peak_flops,
                              bandwidth=system.bandwidth, latency=system.latency))


def test_finding1_free_communication_and_activation_ratio_by_hand(study):
    _, _, spec, r = study
    csv = r[1].csv
    free = csv[csv.kind == "free comm"]
    assert len(free) == 9 * 2  # nine systems × m ∈ {8, 16}
    for row in free.itertuples():
        system = next(s for s in SYSTEMS if s.label == row.system)
        t_f = forward_seconds_per_stage(8, row.m, system.peak_flops)
        # Without communication both take (m + p − 1)(t_f + t_b), t_b = 2 t_f.
        assert row.t_gpipe == pytest.approx((row.m + 8 - 1) * 3 * t_f, rel=1e-12)
        assert row.t_1f1b == pytest.approx((row.m + 8 - 1) * 3 * t_f, rel=1e-12)
    # 1F1B's bottleneck worker holds min(p, m) microbatches' activations, GPipe's all m.
    ratio = r[1].measured["1b"][""]
    assert ratio["p = 8, m = 8"] == pytest.approx(1.0, rel=1e-12)
    assert ratio["p = 8, m = 16"] == pytest.approx(0.5, rel=1e-12)
    # Claim 1a's cases are 1F1B vs GPipe of the store, per system and m.
    cases = r[1].measured["1a"]["blocking"]
    s = SYSTEMS[6]
    expected = 100 * (store_t(ds := study[0], "1f1b", s, 16) / store_t(ds, "gpipe", s, 16) - 1)
    assert cases[f"{s.label}, p = 8, m = 16"] == pytest.approx(expected, rel=1e-12)
    assert len(cases) == 18


def test_finding2_api_runs_match_the_store_and_spread_is_recomputed(study):
    ds, _, spec, r = study
    abw = r[2].numbers["abw"]
    base = abw[abw.variant == "as swept"]
    for s in SYSTEMS:  # the Python API's systems are the store's diagonal, point for point
        for m in spec.m:
            row = base[(base.system == s.label) & (base.m == m)].iloc[0]
            assert row.gpipe == pytest.approx(store_t(ds, "gpipe", s, m), rel=1e-9)
            assert row.chimera == pytest.approx(store_t(ds, "chimera", s, m), rel=1e-9)
    # GPipe holds no replicated stage: dropping the gradient sync changes nothing for it.
    nog = abw[abw.variant == "no grad sync"].set_index(["system", "m"]).gpipe
    np.testing.assert_allclose(nog.sort_index().values, base.set_index(["system", "m"]).gpipe.sort_index().values, rtol=1e-12)
    # Claim 2d: spread of GPipe, 1F1B, Chimera at the largest m, straight from the store.
    spread = r[2].measured["2d"]["blocking"]
    for s in SYSTEMS:
        t = [store_t(ds, x, s, 16) for x in ("gpipe", "1f1b", "chimera")]
        assert spread[f"{s.label}, p = 8, m = 16"] == pytest.approx(100 * (max(t) / min(t) - 1), rel=1e-9)
    # Claim 2c-crossover: the largest m where Chimera beats GPipe on some system.
    wins = [m for m in spec.m if any(store_t(ds, "chimera", s, m) < store_t(ds, "gpipe", s, m) for s in SYSTEMS)]
    assert r[2].measured["2c-crossover"]["blocking"]["p = 8"] == (max(wins) if wins else pytest.approx(np.nan, nan_ok=True))


def test_claim_2d_joined_recomputed_with_the_reference_simulator(study):
    # Claim 2d-joined: GPipe and 1F1B from the store, Chimera with doubled forwards (the faster of
    # forward doubling and backward halving) through the reference simulator, not the engine.
    from ppsweep.tables.build import build_schedule
    from ppsweep.cost_model import stage_costs
    from ppsweep.engine.reference import reference_simulate

    ds, _, spec, r = study
    cases = r[2].measured["2d-joined"]["blocking"]
    assert len(cases) == 9
    tables = [build_schedule("chimera", 8, 16, concat=c) for c in ("forward_doubling", "backward_halving")]
    for s in SYSTEMS[::4]:
        chim = []
        for table in tables:
            costs = stage_costs(spec.model, spec.system, table, peak_flops=[s.peak_flops])
            chim.append(reference_simulate(table, costs.t_f[0], costs.t_b[0], s.latency, s.bandwidth, costs.msg_bytes,
                                           "blocking", grad_bytes=costs.grad_bytes, t_opt=spec.system.optimizer_time).t_sim)
        t = [store_t(ds, "gpipe", s, 16), store_t(ds, "1f1b", s, 16), min(chim)]
        assert cases[f"{s.label}, p = 8, m = 16"] == pytest.approx(100 * (max(t) / min(t) - 1), rel=1e-9)


def test_finding3_chimera_bubbles_by_hand(study):
    ds, _, _, r = study
    m3 = r[3].measured
    assert m3["3-formula"][""]["p = 8, m = 16"] == pytest.approx(100 * 6 / 38, rel=1e-12)
    assert m3["3-table"][""]["p = 8, m = 16"] == pytest.approx(100 * 144 / 528, rel=1e-12)
    assert r[3].numbers["equal"] == pytest.approx(6 / 38, rel=1e-12)  # F = B = 1 slot: the formula
    # GPipe's table with F = 1, B = 2: 3(m + p − 1) slots, 3m busy per worker: bubble 7/15 at m = 8.
    b = r[3].numbers["b"].set_index(["schedule", "p", "m"])
    assert b.loc[("gpipe", 8, 8), "bubble_table"] == pytest.approx(7 / 15, rel=1e-12)
    # Claim 2a: Chimera's bubble minus the smallest other's, from the store.
    for m in (8, 16):
        bub = ds.bubble_table.sel(p=8, m=m)
        others = min(float(bub.sel(schedule=x)) for x in ("gpipe", "1f1b", "hanayo"))
        assert m3["2a-table"][""][f"p = 8, m = {m}"] == pytest.approx(100 * (float(bub.sel(schedule="chimera")) - others), rel=1e-9)


def test_finding4_table1_cases_and_two_waves(study):
    ds, _, _, r = study
    df = r[4].numbers["df"]
    time_cases = r[4].measured["4-time"]
    assert set(time_cases) == {"blocking", "blocking, W = 2"}
    assert "slow cp / slow nw" not in time_cases["blocking"].index  # no paper value there
    assert len(time_cases["blocking"]) == 8
    for s in SYSTEMS[1:]:
        expected = 100 * (store_t(ds, "hanayo", s, 8) / store_t(ds, "chimera", s, 8) - 1)
        assert time_cases["blocking"][s.label] == pytest.approx(expected, rel=1e-12)
        # The two-wave rows' Chimera comes from the Python API: the store's, point for point.
        two = df[(df.variant == "hanayo W=2, as swept") & (df["mode"] == "blocking") & (df.system == s.label)].iloc[0]
        assert two.t_chimera == pytest.approx(store_t(ds, "chimera", s, 8), rel=1e-9)
    idle = r[4].measured["4-idle-chimera"]["blocking"]
    assert sorted(idle.index) == sorted(s.label for s in SYSTEMS if s.network != "slow")


def test_finding5_memory_and_step_time_of_the_split(study):
    ds, asym, spec, r = study
    assert np.allclose(r[5].measured["5-memory"][""].values, 1.0, rtol=1e-12)
    # Persistent bytes summed over workers: two replicas of every layer, embedding and LM head,
    # 2 + 2 + 12 bytes per parameter, whatever the split.
    pw = r[5].numbers["pw"]
    expected = 2 * (L * (12 * H**2 + 13 * H) + 2 * V * H) * (2 + 2 + 12) / 1e12
    for split in ("1:1", "1:2"):
        sub = pw[(pw.p == 8) & (pw.split == split)]
        assert len(sub) == 8
        assert float((sub.total_TB - sub.activation_TB).sum()) == pytest.approx(expected, rel=1e-12)
    loss = r[5].measured["5-loss"]["blocking"]
    for s in SYSTEMS:
        t2 = float(asym.t_sim.sel(schedule="chimera", p=8, m=8, comm="blocking", compute=s.peak_flops,
                                  bandwidth=s.bandwidth, latency=s.latency))
        assert loss[f"{s.label}, m = 8"] == pytest.approx(100 * (t2 / store_t(ds, "chimera", s, 8) - 1), rel=1e-12)
    assert "5-gain" not in r[5].measured or not len(r[5].measured["5-gain"])  # p = 4 is not in the study


def test_verdicts_of_the_reduced_study(study):
    *_, r = study
    measured = reproduce.measured_of(*r.values())
    table = verdicts([c for c in CLAIMS if c.id in measured and measured[c.id]], measured)
    assert table.loc["3-formula", "verdict"] == "agrees" and table.loc["3-table", "verdict"] == "agrees"
    # 1F1B's activation peak equals GPipe's at m = p (ratio 1, not lower) and halves at m = 2p.
    assert table.loc["1b", ["verdict", "passed", "cases"]].tolist() == ["partly agrees", 1, 2]
    assert table.loc["5-memory", "verdict"] == "agrees"


def test_a_sweep_without_what_the_findings_read_is_refused():
    spec = load_plan("paper", ["p=[4]"]).spec
    with pytest.raises(ValueError, match="p: must include 8"):
        findings.check_spec(spec)
    spec = load_plan("paper", ["comm.mode=[overlap]"]).spec
    with pytest.raises(ValueError, match="comm.mode: must include 'blocking'"):
        findings.check_spec(spec)


def test_cost_facts_pair_message_and_forward_at_the_same_m():
    """REPORT.md's Setup: a slow-network message against one stage's forward at p = 8 on fast
    compute, at the same m: 2.18× at every m (not 0.21 s against 3.1 ms)."""
    from ppsweep.paper.report import cost_facts

    spec = load_plan("paper").spec
    facts = cost_facts(spec)
    for m in spec.m:
        b = G / m
        message = 5e-6 + b * S * H * 2 / 5e9
        forward = forward_seconds_per_stage(8, m, 1e16)
        assert f"m = {m}: {message * 1e3:.3g} ms against {forward * 1e3:.3g} ms" in facts["msg_pairs"]
        assert message / forward == pytest.approx(2.18, abs=0.005)
    assert facts["msg_ratio"] == "2.18"
    assert "m = 8: 215 ms against 98.5 ms" in facts["msg_pairs"]
    # One stage at p = 8: 16 layers × (12h² + 13h) × 2 bytes; ring all-reduce over 2 replicas.
    grad = 16 * (12 * H**2 + 13 * H) * 2
    assert facts["grad_gb"] == f"{grad / 1e9:.1f}" == "6.4"
    assert facts["sync_s"] == f"{2 * (5e-6 + grad / 2 / 5e9):.1f}" == "1.3"
