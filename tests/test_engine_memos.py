"""What the engine keeps per table and costs while a sweep asks for each comm mode in turn."""

from __future__ import annotations

import dataclasses

import numpy as np

from ppsweep import build_schedule
from ppsweep.engine import envelope as env_mod
from ppsweep.engine.comm import MODES
from ppsweep.engine.core import simulate
from ppsweep.engine.cost_grid import Costs


def test_one_costs_in_every_mode_computes_the_features_once(monkeypatch):
    table = build_schedule("1f1b", 4, 8)
    costs = Costs.of(table.n_stages, 1e-3, 2e-3, np.logspace(-8, -4, 3)[None, :], np.logspace(9, 12, 4)[:, None], 1e6)
    computed = []
    real = env_mod.features

    def counted(*args, **kwargs):
        computed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(env_mod, "features", counted)
    kept = [simulate(table, costs, mode, finish=False) for mode in MODES]
    assert len(computed) == 1, "simulate(table, costs, mode) must hand every mode the same validated costs"
    # each mode with costs of its own (nothing kept between them) gives the same bits
    for mode, result in zip(MODES, kept):
        fresh = simulate(table, dataclasses.replace(costs), mode, finish=False)
        assert result.backend == fresh.backend == "envelope"
        for field in ("t_sim", "comm_time", "compute_time"):
            np.testing.assert_array_equal(getattr(result, field), getattr(fresh, field))
    assert len(computed) == 1 + len(MODES)
