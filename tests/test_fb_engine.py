"""The engine on overlapped pairs F&B, mixed and split backwards: equal to the reference simulator."""

from __future__ import annotations


import numpy as np
import pytest

import ppsweep
from ppsweep.engine.core import simulate
from ppsweep.engine.program import compile_program
from ppsweep.engine.reference import reference_simulate

CASES = [("dualpipe", 4, 8), ("dualpipev", 3, 6), ("zb_h2", 3, 5), ("zbv", 2, 4)]
MODES = ["overlap", "blocking", "contention", "ports"]


def test_a_pair_is_four_steps_of_one_worker():
    table = ppsweep.build_schedule("dualpipev", 2, 4)
    program = compile_program(table)
    n_pairs = sum(1 for item in table.placed_ops() if item.op.kind == ppsweep.Kind.FB)
    assert program.n_ops == len(table.placed_ops())
    assert len(program.compute_rows) == program.n_ops + 3 * n_pairs
    assert int(program.active.sum()) == len(program.compute_rows)


def test_without_communication_the_engine_step_is_the_table():
    for name, p, m in CASES:
        table = ppsweep.build_schedule(name, p, m)
        r = simulate(table, np.ones((1, 1)), 2 * np.ones((1, 1)), np.zeros(1), np.full(1, np.inf), np.zeros(1))
        assert r.t_sim[0] == table.length, name


def test_bad_fb_overlap_is_refused():
    table = ppsweep.build_schedule("dualpipev", 2, 4)
    with pytest.raises(ValueError, match="fb_overlap: must be in"):
        simulate(table, np.ones(1), np.ones(1), np.zeros(1), np.ones(1), np.ones(1), fb_overlap=1.5)


def test_ports_mode_runs_split_backwards():
    zbv = ppsweep.build_schedule("zbv", 3, 6)
    rng = np.random.default_rng(3)
    t_f, t_b = rng.uniform(0.2, 1.0, zbv.n_stages), rng.uniform(0.4, 2.0, zbv.n_stages)
    got = simulate(zbv, t_f[None], t_b[None], np.zeros(1), np.full(1, 5.0), np.full(1, 3.0), "ports", backend="scan")
    want = reference_simulate(zbv, t_f, t_b, 0.0, 5.0, 3.0, "ports")
    assert got.t_sim[0] == pytest.approx(want.t_sim, rel=1e-9)
