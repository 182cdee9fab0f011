"""Hand-checked cases pinning the reference simulator to docs/contract.md §4 and the README rules.

Every expected number below is derived by hand in the comment next to it; none comes from
another simulator. Notation: ``tf``, ``tb`` compute times, ``L = msg_bytes/beta`` the wire time,
``c = alpha + L`` the message time.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from ppsweep import build_schedule, realize, validate_table
from ppsweep.tables.ops import Kind, Op
from ppsweep.engine.reference import ReferenceResult, reference_simulate
from ppsweep.schedules.base import ScheduleOrder

F, B, I, W = Kind.F, Kind.B, Kind.I, Kind.W


def make_table(p, m, n_stages, orders, placement, micro_replica=None, split=False):
    """A validated table realized from a hand-written per-worker order."""
    placement = np.asarray(placement, dtype=np.int64)
    if placement.ndim == 1:
        placement = placement[None, :]
    micro_replica = np.zeros(m, dtype=np.int64) if micro_replica is None else np.asarray(micro_replica)
    order = ScheduleOrder(
        name="hand",
        p=p,
        m=m,
        n_stages=n_stages,
        orders=tuple(tuple(Op(k, j, s) for k, j, s in row) for row in orders),
        placement=placement,
        micro_replica=micro_replica,
        stage_fractions=np.full(n_stages, 1.0 / n_stages),
        split_backward=split,
    )
    table = realize(order)
    validate_table(table)
    return table


def chimera_like():
    """p=2, S=2, two replicas: replica 0 puts stage s on worker s, replica 1 on worker 1-s.

    Microbatch 0 runs through replica 0, microbatch 1 through replica 1, so both stages are held
    by both workers and are synchronised.
    """
    orders = [
        [(F, 0, 0), (F, 1, 1), (B, 1, 1), (B, 0, 0)],
        [(F, 1, 0), (F, 0, 1), (B, 0, 1), (B, 1, 0)],
    ]
    return make_table(2, 2, 2, orders, [[0, 1], [1, 0]], micro_replica=[0, 1])


# ---------------------------------------------------------------------------------------------
# no communication: the simulation is the ASAP table


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(2, 1), (2, 2), (3, 5), (4, 3), (4, 8)])
def test_no_communication_gives_fill_drain_formula(name, p, m):
    # Uniform stages, free messages: the last worker's last F ends at (m+p-1)·tf for GPipe
    # and the backwards drain back in (m+p-1)·tb; 1F1B has the same length.
    tf, tb = 0.7, 1.3
    r = reference_simulate(build_schedule(name, p, m), tf, tb, 0.0, math.inf, 1e9)
    assert r.t_sim == pytest.approx((m + p - 1) * (tf + tb), rel=1e-12)
    assert r.compute_time == pytest.approx(m * p * (tf + tb), rel=1e-12)
    assert r.comm_time == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("mode", ["overlap", "blocking", "contention"])
def test_no_communication_reproduces_table_length(mode):
    # With tf = f_slots, tb = b_slots and zero message time the simulation is the ASAP
    # realization of docs/contract.md §2, so t_sim is the table length, for any placement.
    tables = [
        build_schedule("1f1b", 4, 6),
        build_schedule("gpipe", 3, 4, f_slots=2, b_slots=3),
        chimera_like(),
    ]
    for table in tables:
        r = reference_simulate(table, table.f_slots, table.b_slots, 0.0, 1.0, 0.0, mode)
        assert r.t_sim == pytest.approx(table.length)


# ---------------------------------------------------------------------------------------------
# two workers, by hand


@pytest.mark.parametrize("mode", ["overlap", "blocking", "contention"])
def test_gpipe_two_workers_one_microbatch(mode):
    # F(0,0) [0,tf]; message c; F(0,1) [tf+c, 2tf+c]; B(0,1) ends 2tf+c+tb;
    # message c; B(0,0) ends 2tf+2c+2tb.  One message per link: all modes agree.
    tf, tb, alpha, msg, beta = 1.0, 2.0, 0.5, 30.0, 10.0
    c = alpha + msg / beta  # 3.5
    r = reference_simulate(build_schedule("gpipe", 2, 1), tf, tb, alpha, beta, msg, mode)
    assert r.t_sim == pytest.approx(2 * tf + 2 * tb + 2 * c)  # 13
    assert r.comm_time == pytest.approx(2 * c)
    assert r.compute_time == pytest.approx(2 * tf + 2 * tb)
    # worker 1 ends with B(0,1) at 2tf+c+tb; in blocking it also waits for its send (+c)
    w1 = 2 * tf + c + tb + (c if mode == "blocking" else 0.0)
    np.testing.assert_allclose(r.worker_finish, [2 * tf + 2 * tb + 2 * c, w1])


def test_per_stage_times():
    # GPipe p=2, m=1 with stage times tf=[1,3], tb=[2,5]: 1 + c + 3 + 5 + c + 2.
    r = reference_simulate(build_schedule("gpipe", 2, 1), [1.0, 3.0], [2.0, 5.0], 0.25, 4.0, 3.0)
    c = 0.25 + 3.0 / 4.0
    assert r.t_sim == pytest.approx(11.0 + 2 * c)
    assert r.compute_time == pytest.approx(11.0)


def test_gpipe_two_workers_two_microbatches_each_mode():
    tf, tb, alpha, msg, beta = 1.0, 2.0, 0.5, 10.0, 1.0
    L = msg / beta  # 10
    c = alpha + L  # 10.5
    table = build_schedule("gpipe", 2, 2)

    # overlap: w1 runs F0 [tf+c, 2tf+c], F1 [2tf+c, 3tf+c], B0, B1 ending 3tf+c+2tb;
    # w0's B0 waits for B(0,1)'s message (3tf+2c+tb), B1 for B(1,1)'s (3tf+2c+2tb):
    # t_sim = 3tf + 3tb + 2c.  Path: F(0,0), msg, F(0,1), F(1,1), B(0,1), msg, B(0,0), B(1,0):
    # compute 3tf+3tb, comm_time 2c.
    r = reference_simulate(table, tf, tb, alpha, beta, msg, "overlap")
    assert r.t_sim == pytest.approx(3 * tf + 3 * tb + 2 * c)  # 30
    assert r.comm_time == pytest.approx(2 * c)  # 21
    np.testing.assert_allclose(r.worker_finish, [3 * tf + 3 * tb + 2 * c, 3 * tf + 2 * tb + c])

    # blocking: w0 F0 [0,tf] sends until tf+c, F1 [tf+c, 2tf+c] sends until 2tf+2c;
    # w1 F1 starts 2tf+2c, B0 [3tf+2c, 3tf+2c+tb] sends until 3tf+3c+tb, B1 ends 3tf+3c+2tb
    # and sends until 3tf+4c+2tb; w0 B1 starts then: t_sim = 3tf + 3tb + 4c.
    r = reference_simulate(table, tf, tb, alpha, beta, msg, "blocking")
    assert r.t_sim == pytest.approx(3 * tf + 3 * tb + 4 * c)  # 51
    assert r.comm_time == pytest.approx(4 * c)
    np.testing.assert_allclose(r.worker_finish, [3 * tf + 3 * tb + 4 * c, 3 * tf + 2 * tb + 4 * c])

    # contention (L > tf, L > tb so messages queue on each link):
    # link (0,1): F(0,0)'s message [tf, tf+L], F(1,0)'s waits for the link: [tf+L, tf+2L],
    # arrives tf+2L+alpha; w1's F1 ends 2tf+2L+alpha, B0 and B1 end +tb, +2tb.
    # link (1,0): B(0,1)'s message starts 2tf+2L+alpha+tb, B(1,1)'s waits until the link frees
    # at 2tf+3L+alpha+tb and arrives 2tf+4L+2alpha+tb; w0's B(1,0) ends +tb:
    # t_sim = 2tf + 2tb + 4L + 2alpha.  Path compute: F(0,0), F(1,1), B(0,1), B(1,0).
    r = reference_simulate(table, tf, tb, alpha, beta, msg, "contention")
    assert r.t_sim == pytest.approx(2 * tf + 2 * tb + 4 * L + 2 * alpha)  # 47
    assert r.comm_time == pytest.approx(4 * L + 2 * alpha)  # 41
    assert r.t_sim > reference_simulate(table, tf, tb, alpha, beta, msg, "overlap").t_sim


def test_1f1b_two_workers_two_microbatches_overlap():
    # w0: F0 F1 B0 B1; w1: F0 B0 F1 B1.  w1: F0 [tf+c, 2tf+c], B0 to 2tf+c+tb, F1 to 3tf+c+tb,
    # B1 to 3tf+c+2tb, message arrives 3tf+2c+2tb; w0's B1 ends 3tf+2c+3tb.
    tf, tb, alpha, msg, beta = 1.0, 3.0, 0.2, 2.0, 4.0
    c = alpha + msg / beta
    r = reference_simulate(build_schedule("1f1b", 2, 2), tf, tb, alpha, beta, msg)
    assert r.t_sim == pytest.approx(3 * tf + 3 * tb + 2 * c)


def test_infinite_bandwidth_leaves_latency_only():
    tf, tb, alpha = 1.0, 2.0, 0.125
    r = reference_simulate(build_schedule("gpipe", 2, 1), tf, tb, alpha, math.inf, 1e12, "contention")
    assert r.t_sim == pytest.approx(2 * tf + 2 * tb + 2 * alpha)
    assert r.comm_time == pytest.approx(2 * alpha)


def test_optimizer_update_is_compute():
    # GPipe p=2, m=1 plus one update per worker after its finish: + t_opt; comm_time unchanged.
    tf, tb, alpha, msg, beta, t_opt = 1.0, 2.0, 0.5, 30.0, 10.0, 0.75
    r = reference_simulate(build_schedule("gpipe", 2, 1), tf, tb, alpha, beta, msg, t_opt=t_opt)
    c = alpha + msg / beta
    assert r.t_sim == pytest.approx(2 * tf + 2 * tb + 2 * c + t_opt)
    assert r.comm_time == pytest.approx(2 * c)
    assert r.compute_time == pytest.approx(2 * tf + 2 * tb)  # without the optimizer
    np.testing.assert_allclose(r.worker_finish, [2 * tf + 2 * tb + 2 * c, 2 * tf + tb + c])


# ---------------------------------------------------------------------------------------------
# general tables: several stages per worker, split backward, replicas


@pytest.mark.parametrize("mode", ["overlap", "blocking", "contention"])
def test_consecutive_stages_on_one_worker_send_no_message(mode):
    # S=4 stages on 2 workers (0,0,1,1), m=1: only the 1->2 boundary crosses workers,
    # once forward and once backward: t_sim = 4tf + 4tb + 2c.
    orders = [
        [(F, 0, 0), (F, 0, 1), (B, 0, 1), (B, 0, 0)],
        [(F, 0, 2), (F, 0, 3), (B, 0, 3), (B, 0, 2)],
    ]
    table = make_table(2, 1, 4, orders, [0, 0, 1, 1])
    tf, tb, alpha, msg, beta = 1.0, 2.0, 1.0, 8.0, 2.0
    c = alpha + msg / beta
    r = reference_simulate(table, tf, tb, alpha, beta, msg, mode)
    assert r.t_sim == pytest.approx(4 * tf + 4 * tb + 2 * c)
    assert r.comm_time == pytest.approx(2 * c)


def test_split_backward():
    # p=2, S=2, m=1, I/W split. tf=1, ti=1.5, tw=0.5, c = 0.25 + 1/0.5 = 2.25.
    # overlap: F00 [0,1]; F01 [3.25,4.25]; I01 [4.25,5.75]; W01 [5.75,6.25];
    # I01's message arrives 8; I00 [8,9.5]; W00 [9.5,10].
    orders = [[(F, 0, 0), (I, 0, 0), (W, 0, 0)], [(F, 0, 1), (I, 0, 1), (W, 0, 1)]]
    table = make_table(2, 1, 2, orders, [0, 1], split=True)
    kw = dict(t_i=1.5, t_w=0.5)
    r = reference_simulate(table, 1.0, 99.0, 0.25, 0.5, 1.0, "overlap", **kw)
    assert r.t_sim == pytest.approx(10.0)
    assert r.compute_time == pytest.approx(2 * (1.0 + 1.5 + 0.5))
    np.testing.assert_allclose(r.worker_finish, [10.0, 6.25])
    assert r.comm_time == pytest.approx(4.5)
    # blocking: w1 stays busy sending I01's output until 8, so W01 is [8, 8.5].
    r = reference_simulate(table, 1.0, 99.0, 0.25, 0.5, 1.0, "blocking", **kw)
    assert r.t_sim == pytest.approx(10.0)
    np.testing.assert_allclose(r.worker_finish, [10.0, 8.5])
    # default t_i = t_w = t_b/2: t_b = 2 gives ti = tw = 1; 1 + c + 1 + 1 + c + 1 + 1.
    r = reference_simulate(table, 1.0, 2.0, 0.25, 0.5, 1.0)
    assert r.t_sim == pytest.approx(5.0 + 2 * 2.25)


def test_gradient_sync_overlap_blocking_contention():
    # chimera_like(): tf=1, tb=2, alpha=1, L=4/1=4, c=5; grad_bytes=2, n=2 holders:
    # sync time 2(n-1)(alpha + g/(n beta)) = 2(1 + 1) = 4.
    # overlap: F(0,0), F(1,0) [0,1]; F(1,1) on w0 and F(0,1) on w1 [6,7]; B [7,9];
    # messages arrive 14; B(0,0) and B(1,0) [14,16].  Sync of stage 1 starts at 9 (ends 13),
    # stage 0 at 16 (ends 20): t_sim = 20.  Path: F(0,0), msg, F(1,1), B(1,1), msg, B(0,0),
    # sync 0 -> compute 6, comm_time 14.
    table = chimera_like()
    args = (table, 1.0, 2.0, 1.0, 1.0, 4.0)
    r = reference_simulate(*args, "overlap", grad_bytes=2.0)
    assert r.t_sim == pytest.approx(20.0)
    np.testing.assert_allclose(r.worker_finish, [16.0, 16.0])
    assert r.comm_time == pytest.approx(14.0)
    assert r.compute_time == pytest.approx(12.0)

    # blocking: every send keeps its worker busy c, but each worker waits for the other's
    # message anyway: the same 16 finish and 20.
    r = reference_simulate(*args, "blocking", grad_bytes=2.0)
    assert r.t_sim == pytest.approx(20.0)

    # contention: both syncs use links (0,1) and (1,0); synchronisations take the links in
    # the order the idealized table makes them ready (README), after all pipeline messages (the
    # B messages hold the links [9,13]).  Stage 1's last backward ends first: sync 1 ready 9,
    # links free 13 -> [13,17]; sync 0 ready 16, links free 17 -> [17,21]: t_sim = 21.
    # Path: sync 0 <- link (sync 1) <- link (B(1,1)'s message, started at 9) <- B(1,1), which
    # ends at 9 after compute 4 (F, F, B on the path): comm_time 21 - 4 = 17.
    r = reference_simulate(*args, "contention", grad_bytes=2.0)
    assert r.t_sim == pytest.approx(21.0)
    assert r.comm_time == pytest.approx(17.0)

    # contention with free messages (L=0, alpha=1, c=1): B(0,0), B(1,0) end 2+2c+2tb=8; the
    # links are last used by the B messages [5,5]: sync 1 (ready 5) [5,9], then sync 0 (ready 8)
    # waits for the links: [9,13].  Overlap instead runs sync 1 [5,9] and sync 0 [8,12]: 12.
    free_args = (table, 1.0, 2.0, 1.0, 1.0, 0.0)
    assert reference_simulate(*free_args, "contention", grad_bytes=2.0).t_sim == pytest.approx(13.0)
    assert reference_simulate(*free_args, "overlap", grad_bytes=2.0).t_sim == pytest.approx(12.0)

    # per-stage gradient bytes [0, 2]: sync 0 takes 2·alpha = 2 -> 18 in overlap;
    # an optimizer update (0.5) on each worker after the syncs of its stages -> 18.5.
    r = reference_simulate(*args, "overlap", grad_bytes=[0.0, 2.0], t_opt=0.5)
    assert r.t_sim == pytest.approx(18.5)
    np.testing.assert_allclose(r.worker_finish, [16.0, 16.0])


# ---------------------------------------------------------------------------------------------
# properties at random points


def test_ports_on_two_workers_are_the_two_links():
    # chimera_like() in ports: worker 0's egress and worker 1's ingress carry exactly what link
    # (0,1) carries in contention, and vice versa; a sync's ring hops 0->1 and 1->0 hold both
    # workers' ports as contention's ring holds both links. So the hand-derived contention
    # numbers above hold: t_sim 21, comm_time 17; with free messages 13.
    table = chimera_like()
    r = reference_simulate(table, 1.0, 2.0, 1.0, 1.0, 4.0, "ports", grad_bytes=2.0)
    assert r.t_sim == pytest.approx(21.0)
    assert r.comm_time == pytest.approx(17.0)
    assert reference_simulate(table, 1.0, 2.0, 1.0, 1.0, 0.0, "ports", grad_bytes=2.0).t_sim == pytest.approx(13.0)


def fan_out_table():
    """p=3, S=2, two replicas sharing stage 0 on worker 0: microbatch 0 runs stage 1 on worker 1,
    microbatch 1 on worker 2. Worker 0 sends two forward messages (to 1, then 2) and receives two
    backward ones (from 1, then 2)."""
    orders = [
        [(F, 0, 0), (F, 1, 0), (B, 0, 0), (B, 1, 0)],
        [(F, 0, 1), (B, 0, 1)],
        [(F, 1, 1), (B, 1, 1)],
    ]
    return make_table(3, 2, 2, orders, [[0, 1], [0, 2]], micro_replica=[0, 1])


def test_ports_one_egress_and_one_ingress_per_worker():
    # tf=1, tb=2, alpha=0, L=4/1=4 (c=4), no gradient bytes (syncs of stage 1 take 0 s).
    # overlap and contention (four distinct links): F(0,0) [0,1] -> w1 at 5; F(1,0) [1,2] -> w2 at 6;
    # w1: F [5,6], B [6,8] -> w0 at 12; w2: F [6,7], B [7,9] -> w0 at 13;
    # w0: B(0,0) [12,14], B(1,0) [14,16]: t_sim 16.
    # ports: w0's egress holds F(0,0)'s message [1,5], so F(1,0)'s leaves at 5, arrives 9;
    # w1: F [5,6], B [6,8], its message holds w0's ingress [8,12], arrives 12 (the table sends it
    # first: slot 4 < 5); w2: F [9,10], B [10,12], its message waits for w0's ingress until 12,
    # arrives 16; w0: B(0,0) [12,14], B(1,0) [16,18]: t_sim 18.
    # Critical path: B(1,0) <- message (started 12 with its data) <- B(1,1), F(1,1) <- F(1,0)'s
    # message (started 5 by the egress) <- F(0,0)'s message (started 1 with its data) <- F(0,0):
    # compute 1 + 1 + 2 + 2 = 6, comm_time 12.
    table = fan_out_table()
    args = (table, 1.0, 2.0, 0.0, 1.0, 4.0)
    assert reference_simulate(*args, "overlap").t_sim == pytest.approx(16.0)
    assert reference_simulate(*args, "contention").t_sim == pytest.approx(16.0)
    r = reference_simulate(*args, "ports", record=True)
    assert r.t_sim == pytest.approx(18.0)
    assert r.comm_time == pytest.approx(12.0)
    np.testing.assert_allclose(r.worker_finish, [18.0, 8.0, 12.0])
    sends = {(m.src, m.dst): (m.ready, m.send, m.arrive) for m in r.record.messages}
    assert sends[(0, 2)] == pytest.approx((2.0, 5.0, 9.0))
    assert sends[(2, 0)] == pytest.approx((12.0, 12.0, 16.0))


def test_blocking_and_contention_never_beat_overlap():
    rng = random.Random(1234)
    for _ in range(20):
        name = rng.choice(["gpipe", "1f1b"])
        p, m = rng.randint(2, 5), rng.randint(1, 8)
        table = build_schedule(name, p, m)
        t_f = [rng.uniform(0.1, 2.0) for _ in range(p)]
        t_b = [rng.uniform(0.1, 4.0) for _ in range(p)]
        alpha, beta, msg = rng.uniform(0, 1), rng.uniform(0.5, 5), rng.uniform(0, 10)
        res = {
            mode: reference_simulate(table, t_f, t_b, alpha, beta, msg, mode)
            for mode in ("overlap", "blocking", "contention")
        }
        free = reference_simulate(table, t_f, t_b, 0.0, math.inf, 0.0)
        assert res["blocking"].t_sim >= res["overlap"].t_sim * (1 - 1e-12)
        assert res["contention"].t_sim >= res["overlap"].t_sim * (1 - 1e-12)
        assert res["overlap"].t_sim >= free.t_sim * (1 - 1e-12)
        for r in res.values():
            assert isinstance(r, ReferenceResult)
            assert -1e-9 <= r.comm_time <= r.t_sim + 1e-9
            assert r.compute_time == pytest.approx(m * (sum(t_f) + sum(t_b)))
            assert r.t_sim >= r.worker_finish.max() - 1e-12
            assert r.worker_finish.shape == (p,)


# ---------------------------------------------------------------------------------------------
# bad inputs


@pytest.mark.parametrize(
    "field,kwargs",
    [
        ("mode", dict(mode="async")),
        ("alpha", dict(alpha=-1.0)),
        ("alpha", dict(alpha=math.nan)),
        ("beta", dict(beta=0.0)),
        ("beta", dict(beta=-2.0)),
        ("msg_bytes", dict(msg_bytes=-1.0)),
        ("t_f", dict(t_f=[1.0, 2.0, 3.0])),
        ("t_f", dict(t_f=-1.0)),
        ("t_b", dict(t_b=[1.0, -2.0])),
        ("t_i", dict(t_i=[1.0])),
        ("t_w", dict(t_w=-0.5)),
        ("grad_bytes", dict(grad_bytes=-3.0)),
        ("t_opt", dict(t_opt=-0.1)),
    ],
)
def test_bad_inputs_name_the_field(field, kwargs):
    args = dict(table=build_schedule("gpipe", 2, 2), t_f=1.0, t_b=2.0, alpha=0.1, beta=1.0, msg_bytes=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        reference_simulate(**args)


def test_mode_error_lists_accepted_values():
    with pytest.raises(ValueError, match="overlap, blocking, contention"):
        reference_simulate(build_schedule("gpipe", 2, 2), 1.0, 2.0, 0.1, 1.0, 1.0, "Overlap")


def test_the_reference_names_no_mode_in_its_rules():
    """Its message, synchronisation and end-of-step rules come from ppsweep.engine.comm (the mode's
    record, send, synchronise, step_end), as the scan's do: no comparison with a mode's name."""
    import ast
    import inspect

    from ppsweep.engine import reference
    from ppsweep.engine.comm import MODES

    tree = ast.parse(inspect.getsource(reference))
    named = [
        ast.unparse(node) for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(isinstance(side, ast.Constant) and side.value in MODES for side in (node.left, *node.comparators))
    ]
    assert named == []
