"""The peers of ``scripts/bench.py --peers`` against ppsweep, so that the bench's ratios compare like with like.

The zero-bubble repository's evaluation rule (reimplemented in the bench: an operation ends at
``max(its worker's last end + cost, its cross-stage input's end + comm + cost)``) is ppsweep's
``overlap`` mode for schedules with one stage per worker: its step time must equal the engine's
``t_sim`` at every point (no optimizer step, no gradient synchronisation), one point at a time and
over a whole grid.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench  # noqa: E402

from ppsweep import build_schedule  # noqa: E402
from ppsweep.engine.core import simulate  # noqa: E402


@pytest.mark.parametrize("name", ["1f1b", "zb_h1", "gpipe"])
def test_zero_bubble_rule_is_the_overlap_mode(name):
    p, m = 4, 6
    table = build_schedule(name, p, m)
    t_f = np.array([1.0, 1.5, 0.75, 1.25])  # unequal stages: the rule takes each stage's cost
    t_i, t_w = 0.4 * t_f * 2, 0.6 * t_f * 2
    t_b = t_i + t_w
    alpha = np.array([0.0, 1e-3, 0.3])[:, None]
    beta = np.array([1e3, 1e6])[None, :]
    msg = 100.0
    engine = simulate(table, t_f, t_b, alpha, beta, msg, "overlap", t_i=t_i, t_w=t_w, grad_bytes=0.0, t_opt=0.0)
    hop = (alpha + msg / beta).ravel()
    plan = bench._peer_plan(table)
    cost = {"F": t_f, "B": t_b, "I": t_i, "W": t_w}
    stage = bench._peer_stages(table)
    grid, _ = bench.zero_bubble_rule(plan, cost, hop, p, maximum=np.maximum, stage=stage)
    assert np.allclose(grid, np.asarray(engine.t_sim).ravel(), rtol=1e-12, atol=0)
    points = [bench.zero_bubble_rule(plan, cost, float(h), p, stage=stage)[0] for h in hop]
    assert np.allclose(points, grid, rtol=1e-12, atol=0)
