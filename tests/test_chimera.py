"""Chimera: valid tables, the paper's formula, the table's closed forms, memory, options."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ppsweep
from ppsweep.tables.ops import Kind, dependencies
from ppsweep.schedules import chimera

POINTS = [(p, k * p) for p in (2, 4, 6, 8) for k in (1, 2, 3)]


def cross_worker_consumers(table: ppsweep.ScheduleTable) -> dict:
    """For each operation, the set of other workers that consume its output."""
    where = {placed.op: placed.worker for placed in table.placed_ops()}
    sends: dict = {op: set() for op in where}
    for op, worker in where.items():
        for dep in dependencies(op, table.n_stages, table.split_backward):
            if where[dep] != worker:
                sends[dep].add(worker)
    return sends


@pytest.mark.parametrize("p,m", POINTS)
@pytest.mark.parametrize("split", ["1:1", "1:2"])
def test_table_is_valid_and_has_the_closed_form_length(p, m, split):
    table = ppsweep.build_schedule("chimera", p, m, split=split)  # validates
    assert table.n_replicas == 2 and table.n_stages == p
    assert table.length == chimera.table_length(p, m)
    assert table.kind[table.kind != Kind.IDLE].size == p * 3 * m  # m F (1 slot) + m B (2 slots) per worker


@pytest.mark.parametrize("p,m", POINTS)
def test_equal_slots_reproduce_the_paper_formula(p, m):
    table = ppsweep.build_schedule("chimera", p, m, f_slots=1, b_slots=1)
    assert table.length == 2 * m + p - 2
    assert table.bubble_ratio() == pytest.approx(ppsweep.bubble_formula("chimera", p, m))
    assert table.bubble_ratio() == pytest.approx((p - 2) / (2 * m + p - 2))


@pytest.mark.parametrize("p,m", POINTS)
@pytest.mark.parametrize("f_slots,b_slots", [(1, 2), (2, 4), (1, 3), (2, 2)])
def test_table_bubble_closed_form(p, m, f_slots, b_slots):
    table = ppsweep.build_schedule("chimera", p, m, f_slots=f_slots, b_slots=b_slots)
    assert table.length == chimera.table_length(p, m, f_slots, b_slots)
    assert table.bubble_ratio() == pytest.approx(chimera.table_bubble(p, m, f_slots, b_slots))


@pytest.mark.parametrize("p", [4, 6, 8, 10])
def test_single_unit_closed_forms(p):
    assert ppsweep.build_schedule("chimera", p, p).bubble_ratio() == pytest.approx((2 * p - 4) / (5 * p - 4))
    assert ppsweep.build_schedule("chimera", p, p, b_slots=1).bubble_ratio() == pytest.approx((p - 2) / (3 * p - 2))


def test_default_slots_leave_more_idle_than_the_formula_at_p8_m16():
    """The seed paper: ~16 % by formula, ~26 % by table; this table gives 27.3 % (66 slots)."""
    formula = ppsweep.bubble_formula("chimera", 8, 16)
    table = ppsweep.build_schedule("chimera", 8, 16)
    assert formula == pytest.approx(6 / 38)
    assert table.length == 66
    assert table.bubble_ratio() == pytest.approx(18 / 66)
    assert table.bubble_ratio() == pytest.approx((6 * 24) / (6 * 24 + 3 * 16 * 8))


def test_units_interleave_so_the_formula_is_exact_beyond_one_unit():
    """Direct concatenation: unit 1's first forward runs before unit 0's last backward on worker 0."""
    order = chimera.build_order(4, 8).orders[0]
    first_of_unit1 = next(i for i, op in enumerate(order) if op.micro >= 4)
    last_of_unit0 = max(i for i, op in enumerate(order) if op.micro < 4)
    assert first_of_unit1 < last_of_unit0


@pytest.mark.parametrize("p,m", POINTS)
@pytest.mark.parametrize("b_slots", [1, 2])
def test_peak_activations(p, m, b_slots):
    table = ppsweep.build_schedule("chimera", p, m, b_slots=b_slots)
    assert table.peak_activations() == ppsweep.peak_activations_formula("chimera", p, m) == p
    per_worker = table.peak_activations_per_worker()
    if p >= 4:
        assert per_worker[0] == per_worker[-1] == p // 2 + 1  # the paper's range [p/2+1, p]


def test_placement_and_replicas():
    table = ppsweep.build_schedule("chimera", 4, 8)
    assert table.placement.tolist() == [[0, 1, 2, 3], [3, 2, 1, 0]]
    assert table.micro_replica.tolist() == [0, 0, 1, 1, 0, 0, 1, 1]


@pytest.mark.parametrize("p", [4, 8])
def test_split_stage_fractions(p):
    even = chimera.stage_fractions(p, "1:1")
    uneven = chimera.stage_fractions(p, "1:2")
    for fractions in (even, uneven):
        assert fractions.shape == (p,) and fractions.sum() == pytest.approx(1.0)
        for w in range(p):  # each worker: down stage w and up stage p-1-w, 2/p of the layers
            assert fractions[w] + fractions[p - 1 - w] == pytest.approx(2 / p)
    assert np.allclose(even, 1 / p)
    assert np.allclose(uneven[: p // 2], (1 / 3) * (2 / p))
    assert np.allclose(uneven[p // 2 :], (2 / 3) * (2 / p))
    order = chimera.build_order(p, p, split="1:2")
    assert np.allclose(order.stage_fractions, uneven) and order.options == {"split": "1:2", "concat": "direct"}


@pytest.mark.parametrize("p", [4, 8])
def test_split_lightens_edge_workers_but_not_the_bottleneck(p):
    """Weighted by stage size (units of 1/p of the model), 1:2 lowers worker 0, not the peak."""
    peaks = {}
    for split in ("1:1", "1:2"):
        table = ppsweep.build_schedule("chimera", p, 2 * p, split=split)
        peaks[split] = table.peak_activations_per_worker(table.stage_fractions * p)
    assert peaks["1:1"][0] == pytest.approx(p / 2 + 1)
    assert peaks["1:2"][0] == pytest.approx((p + 4) / 3)
    assert peaks["1:2"].max() == pytest.approx(peaks["1:1"].max()) == pytest.approx(p)


@pytest.mark.parametrize("split", ["1-2", "0:1", "1:", "a:b", "1:2:3", 12, None])
def test_bad_split_is_a_value_error_naming_split(split):
    with pytest.raises(ValueError, match="split"):
        ppsweep.build_schedule("chimera", 4, 4, split=split)


@pytest.mark.parametrize(
    "p,m,reason",
    [(5, 10, "p must be even for chimera, got 5"), (3, 6, "p must be even"), (4, 6, "multiple of p=4"), (8, 4, "got 4")],
)
def test_unsupported_points(p, m, reason):
    assert reason in ppsweep.tables.build.why_unsupported("chimera", p, m)
    with pytest.raises(ppsweep.UnsupportedPointError, match=reason):
        ppsweep.build_schedule("chimera", p, m)
    assert math.isnan(ppsweep.bubble_formula("chimera", p, m))


@pytest.mark.parametrize("p,m", [(4, 8), (8, 16)])
def test_each_operation_sends_at_most_one_message_to_a_neighbour(p, m):
    table = ppsweep.build_schedule("chimera", p, m)
    where = {placed.op: placed.worker for placed in table.placed_ops()}
    for op, receivers in cross_worker_consumers(table).items():
        assert len(receivers) <= 1
        replica = table.micro_replica[op.micro]
        step = 1 if replica == 0 else -1  # down pipeline sends forwards to w+1, up pipeline to w-1
        if op.kind == Kind.F:
            expected = set() if op.stage == p - 1 else {where[op] + step}
        else:
            expected = set() if op.stage == 0 else {where[op] - step}
        assert receivers == expected, op
