"""The overlapped pair F&B and mixed split backwards in the reference simulator and the cost model."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ppsweep
from ppsweep.tables.ops import pair_time
from ppsweep.tables.ops import Kind
from ppsweep.engine.reference import reference_simulate

CASES = [("dualpipev", 2, 4), ("dualpipev", 3, 7), ("dualpipev", 4, 8), ("dualpipe", 2, 4), ("dualpipe", 4, 10)]


@pytest.mark.parametrize("name,p,m", CASES)
def test_without_communication_the_step_is_the_table(name, p, m):
    # Unit slots and no message cost: the simulation is the ASAP table (realized by other code).
    table = ppsweep.build_schedule(name, p, m)
    r = reference_simulate(table, 1.0, 2.0, 0.0, math.inf, 0.0, "overlap")
    assert r.t_sim == table.length
    assert r.compute_time == pytest.approx(int((table.kind != Kind.IDLE).sum()))


@pytest.mark.parametrize("name,p,m", CASES)
@pytest.mark.parametrize("mode", ["overlap", "blocking", "contention"])
def test_a_pair_waits_for_both_inputs_and_sends_both_outputs(name, p, m, mode):
    table = ppsweep.build_schedule(name, p, m)
    r = reference_simulate(table, 1.0, 2.0, 0.5, 1.0, 1.0, mode, record=True)  # each message 1.5
    ends = {}
    for event in r.record.ops:
        for half in ppsweep.tables.ops.halves(event.op):
            ends[half] = event
    arrivals = {(msg.producer, msg.consumer): msg for msg in r.record.messages}
    pairs = [e for e in r.record.ops if e.op.kind == Kind.FB]
    assert pairs
    for event in pairs:
        assert event.end - event.start == pytest.approx(3.0)  # F 1 + B 2, no overlap credit
        for dep in ppsweep.tables.ops.dependencies(event.op, table.n_stages, table.split_backward):
            producer = ends[dep]
            ready = producer.end if producer.worker == event.worker else arrivals[(dep, event.op)].arrive
            assert event.start >= ready - 1e-12
        sent = [msg for msg in r.record.messages if msg.producer in ppsweep.tables.ops.halves(event.op)]
        assert all(msg.ready == pytest.approx(event.end) for msg in sent)  # both outputs at its end
    assert {(m.src, m.dst) for m in r.record.messages if m.producer.kind == Kind.B} <= {
        (a, b) for a in range(p) for b in range(p) if a != b
    }


def test_overlap_credit_shortens_pairs_only():
    table = ppsweep.build_schedule("dualpipev", 4, 8)
    base = reference_simulate(table, 1.0, 2.0, 1e-6, 1e10, 1e3, "overlap")
    credit = reference_simulate(table, 1.0, 2.0, 1e-6, 1e10, 1e3, "overlap", fb_overlap=0.5)
    n_pairs = int(sum(1 for item in table.placed_ops() if item.op.kind == Kind.FB))
    assert credit.compute_time == pytest.approx(base.compute_time - 0.5 * n_pairs)
    assert credit.t_sim < base.t_sim
    one_f_one_b = ppsweep.build_schedule("1f1b", 4, 8)
    assert reference_simulate(one_f_one_b, 1.0, 2.0, 0, math.inf, 0, fb_overlap=0.5).t_sim == one_f_one_b.length


def test_pair_time():
    assert pair_time(1.0, 2.0) == 3.0
    assert pair_time(1.0, 2.0, 0.5) == 2.5
    np.testing.assert_allclose(pair_time(np.array([1.0, 3.0]), 2.0, 1.0), [2.0, 2.0])


def test_dualpipe_synchronises_both_replicas():
    # Two directions keep every stage twice: each stage's gradients are all-reduced once.
    table = ppsweep.build_schedule("dualpipe", 4, 8)
    no_sync = reference_simulate(table, 1.0, 2.0, 0.0, 1e9, 0.0)
    with_sync = reference_simulate(table, 1.0, 2.0, 0.0, 1e9, 0.0, grad_bytes=1e9, record=True)
    assert len(with_sync.record.syncs) == 4 and with_sync.t_sim > no_sync.t_sim
