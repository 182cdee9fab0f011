"""The zero-bubble paper's Table 5 from its own Table 9 inputs (Qi et al., ICLR 2024, arXiv 2401.10241).

ppsweep's 1f1b, zb_h1 and zb_h2 on the twelve published settings (overlap, message time T_comm per
hop) give the paper's 1F1B, ZB-H1 and ZB-H2 bubble rates to its 4 decimals: 36 values.
"""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep.paper import zero_bubble


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
