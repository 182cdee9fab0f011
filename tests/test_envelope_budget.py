"""The envelope's work budget (ppsweep.engine.core.envelope_budget): ``auto`` scans where the
programme's work passes its budget for the grid's points, a backend asked for by name has no
budget, and the on-disk cache answers a budget exactly as a build with that budget would."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ppsweep import build_schedule
from ppsweep.engine import core
from ppsweep.engine import envelope as envelope_mod
from ppsweep.engine import envelope_cache
from ppsweep.engine.compiled import compiled_for
from ppsweep.engine.core import simulate

ALPHA = np.array([[1e-7, 3e-6, 1e-4]])
BETA = np.array([[1e9], [3e10], [1e12]])


def _run(table, backend="auto"):
    return simulate(dataclasses.replace(table), 1e-3, 2e-3, ALPHA, BETA, 4e6, mode="contention", grad_bytes=5e7,
                    backend=backend)


def _features(table):
    return envelope_mod.features(compiled_for(table).program, {"t_f": np.array([1e-3]), "t_b": np.array([2e-3]),
                                 "grad_bytes": np.array(5e7)}, ALPHA, BETA, np.array(4e6), np.array(0.0), ndim=2)


def test_the_work_count_decides_exactly_where_a_budget_stops_the_programme():
    table = build_schedule("hanayo", 4, 8, waves=2)
    program, feats = compiled_for(table).program, _features(table)
    full = envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm)
    assert full.work > 0
    within = envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm, budget=full.work)
    assert np.array_equal(within.t_sim, full.t_sim) and within.work == full.work
    with pytest.raises(envelope_mod.EnvelopeOverBudget):
        envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm, budget=full.work - 1)


def test_auto_scans_past_the_budget_and_the_envelope_by_name_ignores_it(monkeypatch):
    table = build_schedule("hanayo", 4, 8, waves=2)
    assert _run(table).backend == "envelope"  # within the floor of the budget
    monkeypatch.setattr(core, "ENVELOPE_MIN_WORK", 1)
    monkeypatch.setattr(core, "ENVELOPE_WORK_PER_OP_POINT", 1e-6)
    auto = _run(table)
    assert auto.backend == "piecewise_scan" and "budget of work" in auto.reason  # the next backend, a scan
    piecewise = _run(table, "piecewise_scan")
    assert np.array_equal(auto.t_sim, piecewise.t_sim) and np.array_equal(auto.comm_time, piecewise.comm_time)
    assert _run(table, "envelope").backend == "envelope"


def test_the_cache_answers_each_budget_as_a_build_with_it_would(tmp_path, monkeypatch):
    monkeypatch.setenv(envelope_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(envelope_cache, "MIN_WAVES", 0)
    table = build_schedule("hanayo", 4, 8, waves=2)
    program, feats = compiled_for(table).program, _features(table)
    digest = envelope_cache.table_digest(table)
    work = envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm).work

    def cached(budget, build=None):
        def make():
            if build is None:
                pytest.fail("built again")
            try:
                return envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm, budget=budget)
            except envelope_mod.EnvelopeTooLarge as err:
                return type(err)(*err.args)
        return envelope_cache.cached_envelope(lambda: digest, program, "contention", feats.weights, feats.comm, 64, make,
                                              budget=budget)

    assert isinstance(cached(work // 2, build=True), envelope_mod.EnvelopeOverBudget)  # built, stored "over work // 2"
    assert isinstance(cached(work // 4), envelope_mod.EnvelopeOverBudget)  # answered from the file
    assert isinstance(cached(work, build=True), envelope_mod.Envelope)  # a larger budget builds again
    assert isinstance(cached(work - 1), envelope_mod.EnvelopeOverBudget)  # the stored envelope's work decides
    assert isinstance(cached(None), envelope_mod.Envelope)


def test_a_routing_reads_back_equal_and_a_refusal_is_raised_again(tmp_path, monkeypatch):
    from ppsweep.engine.comm import route

    monkeypatch.setenv(envelope_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(envelope_cache, "MIN_WAVES", 0)
    table = build_schedule("chimera", 4, 8)
    program = compiled_for(table).program
    digest = envelope_cache.table_digest(table)
    built = envelope_cache.cached_routing(lambda: digest, program, "ports", lambda: route(program, "ports"))
    read = envelope_cache.cached_routing(lambda: digest, program, "ports", lambda: pytest.fail("routed again"))
    assert read.mode == built.mode and read.n_resources == built.n_resources
    assert read.sync_resources == built.sync_resources
    for a, b in ((built.lane_resources, read.lane_resources), (built.rounds, read.rounds)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    for mode in ("overlap", "blocking", "contention"):  # routed in milliseconds: routed each time, never stored
        calls = []
        for _ in range(2):
            envelope_cache.cached_routing(lambda: digest, program, mode, lambda: calls.append(mode) or route(program, mode))
        assert calls == [mode, mode]
    assert len(list(tmp_path.iterdir())) == 1

    def refuse():
        raise NotImplementedError("mode ports: refused")
    with pytest.raises(NotImplementedError, match="refused"):
        envelope_cache.cached_routing(lambda: "other", program, "ports", refuse)
    with pytest.raises(NotImplementedError, match="refused"):
        envelope_cache.cached_routing(lambda: "other", program, "ports", lambda: pytest.fail("routed again"))


def test_a_walk_that_runs_ahead_of_its_budgets_pace_stops_early_and_need_decides_exactly():
    """A programme stops once its work runs ahead of its budget's pace (native_envelope.PACE_NUM), not only
    past the budget: a doomed walk spends a fraction of its budget. ``need`` is the least budget it passes."""
    from ppsweep.engine import native_envelope
    from ppsweep.engine.comm import route

    table = build_schedule("interleaved_1f1b", 16, 128)
    program, feats = compiled_for(table).program, _features(table)
    full = envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm)
    assert full.work > 4 * native_envelope.PACE_FLOOR and full.need >= full.work
    within = envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm, budget=full.need)
    assert np.array_equal(within.t_sim, full.t_sim)
    with pytest.raises(envelope_mod.EnvelopeOverBudget):
        envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm, budget=full.need - 1)
    # a third of the work it needs: stopped by its projected work well before the budget is spent
    rows = feats.weights[:, : program.n_stages * 5 + 1].T
    idx = envelope_mod.raw_index(program)
    wire, msg = feats.weights[:, idx["wire"]], feats.weights[:, idx["alpha"]] + feats.weights[:, idx["wire"]]
    budget = full.work // 3
    *_, too_many, spent, _ = native_envelope.run_waves(program, route(program, "contention"), rows, wire, msg, 64,
                                                        envelope_mod._SAME, None, budget)
    assert too_many == -1 and spent < budget * 3 // 4


def test_a_walk_whose_steps_alone_pass_its_budget_is_refused_before_it_walks(tmp_path, monkeypatch):
    """Every step counts native_envelope.STEP_WORK: where those alone pass the budget, the walk's own
    verdict (over budget) is given before any routing, walk or cache file, and ``auto`` scans."""
    from ppsweep.engine import native_envelope

    monkeypatch.setenv(envelope_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(envelope_cache, "MIN_WAVES", 0)
    table = build_schedule("1f1b", 16, 256)  # 8,192 steps: 1,048,576 units of step work
    program, feats = compiled_for(table).program, _features(table)
    least = native_envelope.least_work(program)
    assert least == native_envelope.STEP_WORK * int(np.count_nonzero(program.active)) > core.ENVELOPE_MIN_WORK
    full = envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm)
    assert full.work >= least
    # the walk itself, without the shortcut, reaches the same verdict
    with monkeypatch.context() as walked:
        walked.setattr(envelope_mod, "unwalked_refusal", lambda *args: None)
        with pytest.raises(envelope_mod.EnvelopeOverBudget):
            envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm, budget=least - 1)
    with monkeypatch.context() as unrouted:
        unrouted.setattr(envelope_mod, "route", lambda *args: pytest.fail("routed"))
        with pytest.raises(envelope_mod.EnvelopeOverBudget):
            envelope_mod.build_envelope(program, "contention", feats.weights, feats.comm, budget=least - 1)
    verdict = compiled_for(table).envelope("contention", feats.weights, feats.comm, ("k",), 64, budget=least - 1)
    assert isinstance(verdict, envelope_mod.EnvelopeOverBudget) and not list(tmp_path.iterdir())
    # auto: on 9 points (the budget's floor, 10⁶) it scans; on 4,096 points (1,024 units a step) it walks
    auto = _run(table)
    assert auto.backend == "piecewise_scan" and "budget of work" in auto.reason
    wide = simulate(table, 1e-3, 2e-3, np.geomspace(1e-7, 1e-4, 64)[None], np.geomspace(1e9, 1e12, 64)[:, None], 4e6,
                    mode="contention", grad_bytes=5e7)
    assert wide.backend == "envelope", wide.reason
