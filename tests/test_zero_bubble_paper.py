"""The zero-bubble paper's Table 5 from its own Table 9 inputs (Qi et al., ICLR 2024, arXiv 2401.10241).

ppsweep's 1f1b, zb_h1 and zb_h2 on the twelve published settings (overlap, message time T_comm per
hop) give the paper's 1F1B, ZB-H1 and ZB-H2 bubble rates to its 4 decimals: 36 values. The cost,
the post-validated step, is checked against back-to-back steps simulated as one table.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppsweep.engine.reference import post_validated_step, reference_simulate
from ppsweep.paper import zero_bubble
from ppsweep.schedules import get_schedule
from ppsweep.schedules.base import ScheduleOrder, one_replica_layout
from ppsweep.tables.ops import Op
from ppsweep.tables.table import realize


@pytest.fixture(scope="module")
def comparison() -> zero_bubble.Comparison:
    return zero_bubble.compare()


def test_the_published_data_are_whole():
    rows = zero_bubble.settings()
    assert [(s.model, s.p, s.m) for s in rows[::3]] == [("1.5B", 8, 24), ("6.2B", 8, 24), ("14.6B", 16, 48), ("28.3B", 32, 96)]
    assert all(len(s.bubble) == 6 and len(s.throughput) == 4 for s in rows)


@pytest.mark.parametrize("column", ["1f1b", "zb_h1", "zb_h2"])
def test_table5_column_to_4_decimals(comparison, column):
    paper = np.array([s.bubble[column] for s in zero_bubble.settings()])
    ours = comparison.bubble[column]
    assert np.array_equal(np.round(ours, 4), paper), np.c_[ours, paper]


def test_isolated_and_post_validated_steps(comparison):
    # 1F1B and ZB-H1 end on the worker that starts first: both costs agree. ZB-H2's last worker
    # starts (p-1)(T_F + T_comm) late and runs without idling, worker 0 idles
    # (p-1)(T_F + T_B + 2 T_comm - 2 T_W): the isolated step is longer than the span wherever
    # 2 T_W > T_B + T_comm (6.2B, 14.6B, 28.3B), the same where not (1.5B).
    for column in ("1f1b", "zb_h1"):
        assert all(st.t_sim == pytest.approx(st.post_validated, rel=1e-12) for st in comparison.steps[column])
    for s, st in zip(zero_bubble.settings(), comparison.steps["zb_h2"]):
        late = 2 * s.t_w > s.t_b + s.t_comm
        assert (st.t_sim > st.post_validated * (1 + 1e-9)) == late, s
        # the paper's (p-1)(T_F + T_B + 2 T_comm - 2 T_W) idle per worker (its script's assertion)
        assert st.post_validated - s.busy == pytest.approx((s.p - 1) * (s.t_f + s.t_b + 2 * s.t_comm - 2 * s.t_w), rel=1e-9)


def back_to_back(name: str, p: int, m: int, steps: int, **options):
    """``steps`` steps of ``name`` as one table: step ``i`` runs microbatches ``i·m … i·m+m-1`` in
    the one-step order; only each worker's order links the steps (no synchronisation between)."""
    one = get_schedule(name).build_order(p, m, **options)
    orders = tuple(tuple(Op(op.kind, op.micro + i * m, op.stage) for i in range(steps) for op in row) for row in one.orders)
    order = ScheduleOrder(name, p, steps * m, one.n_stages, orders, split_backward=one.split_backward,
                          **one_replica_layout(p, steps * m, one.n_stages, list(range(p))))
    return realize(order, 1, 2)


@pytest.mark.parametrize("name,options", [("1f1b", {}), ("zb_h1", {}), ("zb_h2", {}), ("zb_h2", {"lag": 1})])
def test_post_validated_step_is_the_period_of_back_to_back_steps(name, options):
    # The rule checked from outside: with nothing between steps but each worker's own order, the
    # second and third steps each add exactly the longest worker span (6.2B, m = 24, where ZB-H2's
    # isolated step is 3 % longer than its span).
    s = zero_bubble.settings()[3]
    costs = (s.t_f, s.t_b + s.t_w, s.t_comm, math.inf, 0.0, "overlap")
    one = reference_simulate(back_to_back(name, s.p, s.m, 1, **options), *costs, t_i=s.t_b, t_w=s.t_w, record=True)
    t = [reference_simulate(back_to_back(name, s.p, s.m, k, **options), *costs, t_i=s.t_b, t_w=s.t_w).t_sim for k in (2, 3)]
    assert t[0] - one.t_sim == pytest.approx(post_validated_step(one), rel=1e-12)
    assert t[1] - t[0] == pytest.approx(post_validated_step(one), rel=1e-12)
