"""Broadcasting in ``simulate``: every input varies along its own grid axis, and each point must be
the reference simulator's result for exactly that point's values (mixed-up axes would fail)."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep import build_schedule
from ppsweep.engine.core import MODES, simulate
from ppsweep.engine.reference import reference_simulate


@pytest.mark.parametrize("mode", MODES)
def test_each_axis_carries_its_own_values(mode):
    table = build_schedule("chimera", 4, 4)  # replicated stages: the gradient sync is exercised too
    scale = np.array([1.0, 3.0])[:, None, None, None, None]            # axis 0: compute scale
    alpha = np.array([0.0, 0.2, 1.5])[None, :, None, None]              # axis 1: latency
    beta = np.array([5.0, 50.0, 500.0, 5000.0])[None, None, :, None]    # axis 2: bandwidth
    msg = np.array([10.0, 200.0])[None, None, None, :]                  # axis 3: message bytes
    per_stage = np.array([1.0, 2.0, 0.5, 1.5])                          # stages differ too
    t_f = scale * per_stage                                             # (2, 1, 1, 1, S)
    grad = np.array([40.0, 80.0, 20.0, 60.0])
    r = simulate(table, t_f, 2 * t_f, alpha, beta, msg, mode, grad_bytes=grad)
    assert r.t_sim.shape == (2, 3, 4, 2)
    for i, c in enumerate([1.0, 3.0]):
        for j, a in enumerate([0.0, 0.2, 1.5]):
            for k, b in enumerate([5.0, 50.0, 500.0, 5000.0]):
                for n, mb in enumerate([10.0, 200.0]):
                    ref = reference_simulate(table, c * per_stage, 2 * c * per_stage, a, b, mb, mode, grad_bytes=grad)
                    assert r.t_sim[i, j, k, n] == pytest.approx(ref.t_sim, rel=1e-12), (i, j, k, n)
    # Distinct inputs give distinct results along every axis (a swapped axis cannot hide).
    for axis in range(4):
        assert np.all(np.diff(r.t_sim, axis=axis) != 0)
