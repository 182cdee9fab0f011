"""Mode ``ports``: the order at a port (README "Communication modes", "Order at a port"), the
routing's array code against a plain restatement of it, and the engine's refusal where its waves
cannot follow that order."""

from __future__ import annotations

import numpy as np
import pytest

import ppsweep
from ppsweep.engine.comm import MODE_RULES, MODES, route
from ppsweep.engine.compiled import compiled_for
from ppsweep.engine.core import _compile_refusal, simulate
from ppsweep.tables.ops import dependencies, halves
from ppsweep.engine.program import compile_program
from ppsweep.engine.reference import reference_simulate


def _plain_routing(program, mode):
    """The routing restated lane by lane: each wave's senders in (end slot, worker) order take,
    at every resource they hold, the round after the last one taken there in this wave."""
    p, links = program.p, program.links
    hops = {"contention": lambda i: (i,), "ports": lambda i: (int(links[i, 0]), p + int(links[i, 1]))}
    hop = hops.get(mode, lambda i: ())
    k = len(hop(0)) if program.n_links else 0
    lanes = np.full(program.link.shape + (k,), -1, dtype=np.int64)
    rounds = np.zeros(program.link.shape, dtype=np.int64)
    for t, w in zip(*np.nonzero(program.link != program.trash_link)):
        lanes[t, w] = hop(int(program.link[t, w]))
    if mode == "ports":
        for t in range(lanes.shape[0]):
            taken: dict[int, int] = {}
            for w in sorted(np.flatnonzero(lanes[t, :, 0] >= 0), key=lambda w: (program.lane_end[t, w], w)):
                rounds[t, w] = max(taken.get(int(i), 0) for i in lanes[t, w])
                for i in lanes[t, w]:
                    taken[int(i)] = rounds[t, w] + 1
    sync = tuple(tuple(i for link in row if link >= 0 for i in hop(int(link))) for row in program.sync_ring_links)
    return lanes, rounds, sync


@pytest.mark.parametrize("name", sorted(ppsweep.SCHEDULES))
def test_routing_equals_its_plain_restatement(name):
    for p, m in [(4, 8), (3, 6), (8, 16)]:
        try:
            table = ppsweep.build_schedule(name, p, m)
        except ppsweep.UnsupportedPointError:
            continue
        program = compile_program(table)
        for mode in MODES:
            got = route(program, mode)
            lanes, rounds, sync = _plain_routing(program, mode)
            assert got.lane_resources.dtype == lanes.dtype and np.array_equal(got.lane_resources, lanes), (p, m, mode)
            assert got.rounds.dtype == rounds.dtype and np.array_equal(got.rounds, rounds), (p, m, mode)
            assert got.sync_resources == sync, (p, m, mode)


def _table_order(table):
    """Every message's place in the table's sending order, computed from the table: (producer's
    end slot, its start slot, the message's place among its operation's messages, the sender)."""
    placed = table.placed_ops()
    where = {h: item for item in placed for h in halves(item.op)}
    outputs = {id(item): [] for item in placed}
    for item in placed:
        for dep in dependencies(item.op, table.n_stages, table.split_backward):
            if where[dep].worker != item.worker:
                outputs[id(where[dep])].append((item.worker, item.start, dep, item.op))
    keys = {}
    for item in placed:
        for k, (_, _, half, consumer) in enumerate(sorted(outputs[id(item)], key=lambda o: o[:2])):
            keys[(half, consumer)] = (item.end, item.start, k, item.worker)
    return keys


@pytest.mark.parametrize("name,p,m", [("dualpipev", 4, 8), ("dualpipev", 6, 12), ("dualpipe", 8, 16)])
def test_reference_ports_take_messages_in_the_table_order(name, p, m):
    # At every port, messages leave in the table's order, each after the previous one cleared it.
    table = ppsweep.build_schedule(name, p, m)
    rng = np.random.default_rng(p * m)
    wire = 0.7
    t_f = rng.uniform(0.5, 1.5, table.n_stages)
    r = reference_simulate(table, t_f, 2 * t_f, 0.1, 1 / wire, 1.0, "ports", fb_overlap=0.3, record=True)
    keys = _table_order(table)
    assert len(keys) == len(r.record.messages)
    contested = 0  # ingress ports where one pair's second message and another sender's message end together
    for side in ("src", "dst"):
        for port in range(p):
            mine = sorted((msg for msg in r.record.messages if getattr(msg, side) == port),
                          key=lambda msg: keys[(msg.producer, msg.consumer)])
            sends = np.array([msg.send for msg in mine])
            assert np.all(np.diff(sends) >= wire * (1 - 1e-9)), (side, port)
            order = [keys[(msg.producer, msg.consumer)] for msg in mine]
            contested += side == "dst" and any(a[:2] == b[:2] and a[3] != b[3] and 1 in (a[2], b[2])
                                               for a, b in zip(order, order[1:]))
    assert contested  # the case the rule decides: several pairs' messages, firsts and seconds, at one port


def test_engine_refuses_a_later_producer_ending_first_at_a_port():
    # 1F1B with a backward of 3 slots: a forward that starts after a backward ends before it, and
    # both send into one ingress port; the scan cannot take the later one first. The reference runs it.
    table = ppsweep.build_schedule("1f1b", 3, 6, f_slots=1, b_slots=3)
    with pytest.raises(NotImplementedError, match="must take a port before one sent at slot"):
        simulate(table, np.ones((1, 1)), 2 * np.ones((1, 1)), np.zeros(1), np.ones(1), np.ones(1), "ports")
    assert reference_simulate(table, 1.0, 2.0, 0.0, 1.0, 1.0, "ports").t_sim > 0
    default = ppsweep.build_schedule("1f1b", 3, 6)
    r = simulate(default, np.ones((1, 1)), 2 * np.ones((1, 1)), np.zeros(1), np.ones(1), np.ones(1), "ports")
    assert r.t_sim[0] == pytest.approx(reference_simulate(default, 1.0, 2.0, 0.0, 1.0, 1.0, "ports").t_sim, rel=1e-12)


def test_only_a_mode_that_orders_a_port_is_routed_to_ask_whether_it_runs_a_table():
    # Only ports orders a port's messages as the table sends them, so only its routing can refuse a
    # table (the one above); the engine asks the others nothing, and a warm run, its envelopes on disk,
    # then routes only the tables it scans.
    table = ppsweep.build_schedule("1f1b", 3, 6, f_slots=1, b_slots=3)
    program = compile_program(table)
    for mode in MODES:
        if MODE_RULES[mode].sends_in_table_order:
            with pytest.raises(NotImplementedError):
                route(program, mode)
            assert "must take a port" in _compile_refusal(table, mode)
        else:
            route(program, mode)  # never refuses
            assert _compile_refusal(table, mode) is None
    assert not compiled_for(table)._routes  # nothing routed to ask (and ports' refusal is not kept)


@pytest.mark.parametrize("name,p,m", [("dualpipev", 4, 8), ("dualpipev", 6, 12)])
def test_scan_equals_reference_where_pairs_meet_at_a_port(name, p, m):
    # Tables where several pairs ending in one slot send into one ingress port (see
    # test_reference_ports_take_messages_in_the_table_order), per-stage costs, tight bandwidth.
    table = ppsweep.build_schedule(name, p, m)
    S, n = table.n_stages, 3
    rng = np.random.default_rng(7 * p + m)
    t_f = rng.uniform(0.5, 1.5, (n, S))
    t_b = 2 * t_f * rng.uniform(0.8, 1.2, (n, S))
    alpha, beta, msg = rng.uniform(0, 0.2, n), rng.uniform(0.5, 2.0, n), rng.uniform(0.5, 2.0, n)
    overlap, grad = rng.uniform(0, 1, n), rng.uniform(1, 5, S)
    got = simulate(table, t_f, t_b, alpha, beta, msg, "ports", grad_bytes=grad, fb_overlap=overlap, backend="scan")
    for k in range(n):
        want = reference_simulate(table, t_f[k], t_b[k], alpha[k], beta[k], msg[k], "ports", grad_bytes=grad,
                                  fb_overlap=overlap[k])
        assert got.t_sim[k] == pytest.approx(want.t_sim, rel=1e-9)
        np.testing.assert_allclose(got.worker_finish[k], want.worker_finish, rtol=1e-9)
        assert got.comm_time[k] == pytest.approx(want.comm_time, rel=1e-9, abs=1e-9 * want.t_sim)
