"""A table's compiled form goes with the table, also when its envelope passes the cap (the verdict cached)."""

from __future__ import annotations

import gc
import weakref

import numpy as np

from ppsweep.engine.compiled import compiled_for
from ppsweep.engine.core import simulate
from ppsweep.engine.compiled import envelope_for
from ppsweep.engine.envelope import EnvelopeTooLarge, features
from ppsweep.schedules import get_schedule
from ppsweep.tables.fast_realize import realize_fast


def _too_large_table():
    # built outside build_schedule (whose LRU cache would keep it alive on purpose)
    return realize_fast(get_schedule("gpipe").build_order(4, 80))


def test_a_too_large_verdict_does_not_keep_its_table_alive(monkeypatch):
    monkeypatch.setenv("PPSWEEP_ENVELOPE_CACHE", "off")
    table = _too_large_table()
    alpha, beta = np.array([1e-6, 1e-5])[None, :], np.array([1e9, 1e10])[:, None]
    result = simulate(table, 1e-3, 2e-3, alpha, beta, 1e7, "contention", backend="auto", cap=2)
    assert result.method == "scan"  # GPipe in contention at m = 80: 3 vectors, past a cap of 2
    verdict = compiled_for(table).envelope("contention", *_feature_args(table, alpha, beta), 2)
    assert isinstance(verdict, EnvelopeTooLarge) and verdict.__traceback__ is None
    try:  # raising it again hands out a new error, so the cached verdict keeps no frames either
        envelope_for(table, compiled_for(table).program, "contention", _features(table, alpha, beta), cap=2)
    except EnvelopeTooLarge as err:
        assert err is not verdict
    assert verdict.__traceback__ is None
    alive = weakref.ref(table)
    del table, verdict, result
    gc.collect()
    assert alive() is None


def _features(table, alpha, beta):
    from ppsweep.engine.cost_grid import Costs

    costs = Costs.of(table.n_stages, 1e-3, 2e-3, alpha, beta, 1e7)
    return features(compiled_for(table).program, costs.stages(), costs.alpha, costs.beta, costs.msg_bytes, costs.t_opt, 2)


def _feature_args(table, alpha, beta):
    feats = _features(table, alpha, beta)
    return feats.weights, feats.comm, feats.key()
