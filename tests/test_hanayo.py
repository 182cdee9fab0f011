"""Hanayo: zig-zag placement, valid tables, bubble and memory closed forms, options."""

from __future__ import annotations

import math

import pytest

import ppsweep
from ppsweep.tables.ops import Kind, dependencies
from ppsweep.schedules import hanayo

POINTS = [(p, k * p, w) for p in (2, 3, 4, 5, 8) for k in (1, 2) for w in (1, 2)] + [(4, 4, 3), (4, 12, 1)]


@pytest.mark.parametrize("p,m,waves", POINTS)
def test_table_is_valid_and_has_the_closed_form_length(p, m, waves):
    table = ppsweep.build_schedule("hanayo", p, m, waves=waves)  # validates
    assert table.n_stages == 2 * waves * p and table.n_replicas == 1
    assert table.length == hanayo.table_length(p, m, waves)
    assert (table.kind != Kind.IDLE).sum() == p * 2 * waves * m * 3  # per worker 2Wm F (1) + 2Wm B (2)


@pytest.mark.parametrize("p,m,waves", POINTS)
def test_equal_slots_bubble(p, m, waves):
    table = ppsweep.build_schedule("hanayo", p, m, f_slots=1, b_slots=1, waves=waves)
    assert table.length == 4 * waves * m + 2 * p - 2
    assert table.bubble_ratio() == pytest.approx(hanayo.bubble_equal_slots(p, m, waves))
    assert table.bubble_ratio() == pytest.approx((p - 1) / (2 * waves * m + p - 1))


@pytest.mark.parametrize("p,m,waves", POINTS)
def test_default_slots_bubble_formula(p, m, waves):
    table = ppsweep.build_schedule("hanayo", p, m, waves=waves)
    formula = ppsweep.bubble_formula("hanayo", p, m, waves=waves)
    assert table.bubble_ratio() == pytest.approx(formula)
    assert formula == pytest.approx((p - 1) * (m + p) / ((p - 1) * (m + p) + 3 * waves * m * p))


@pytest.mark.parametrize("p,m,waves", [(4, 4, 1), (4, 8, 2), (5, 10, 1), (8, 8, 2)])
@pytest.mark.parametrize("f_slots,b_slots", [(2, 4), (1, 3), (2, 2), (1, 4)])
def test_table_closed_form_for_other_slot_ratios(p, m, waves, f_slots, b_slots):
    table = ppsweep.build_schedule("hanayo", p, m, f_slots=f_slots, b_slots=b_slots, waves=waves)
    assert table.length == hanayo.table_length(p, m, waves, f_slots, b_slots)
    assert table.bubble_ratio() == pytest.approx(hanayo.table_bubble(p, m, waves, f_slots, b_slots))


def test_known_values_at_p8():
    assert ppsweep.build_schedule("hanayo", 8, 8).length == 76  # 48 busy + 28 idle per worker
    assert ppsweep.bubble_formula("hanayo", 8, 8) == pytest.approx(28 / 76)
    assert ppsweep.build_schedule("hanayo", 8, 8, b_slots=1).bubble_ratio() == pytest.approx(7 / 23)
    assert ppsweep.build_schedule("hanayo", 8, 16, waves=2).bubble_ratio() == pytest.approx(7 * 24 / (7 * 24 + 768))


@pytest.mark.parametrize("p,m,waves", POINTS)
@pytest.mark.parametrize("b_slots", [1, 2])
def test_peak_activations(p, m, waves, b_slots):
    table = ppsweep.build_schedule("hanayo", p, m, b_slots=b_slots, waves=waves)
    assert table.peak_activations() == ppsweep.peak_activations_formula("hanayo", p, m, waves=waves)
    assert table.peak_activations() == 2 * waves * p
    assert table.peak_activations_per_worker().argmax() == p - 1


def test_zig_zag_placement():
    table = ppsweep.build_schedule("hanayo", 4, 4, waves=2)
    assert table.placement.tolist() == [[0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0]]
    assert table.stage_fractions.tolist() == [1 / 16] * 16
    for w in range(4):
        assert len(hanayo.worker_stages(4, 2, w)) == 4


@pytest.mark.parametrize("p,m,waves", [(4, 8, 1), (5, 5, 2), (8, 8, 2)])
def test_each_operation_sends_at_most_one_message_and_turns_send_none(p, m, waves):
    table = ppsweep.build_schedule("hanayo", p, m, waves=waves)
    where = {placed.op: placed.worker for placed in table.placed_ops()}
    receivers: dict = {op: set() for op in where}
    for op, worker in where.items():
        for dep in dependencies(op, table.n_stages, False):
            if where[dep] != worker:
                receivers[dep].add(worker)
    for op, to in receivers.items():
        assert len(to) <= 1
        nxt = op.stage + 1 if op.kind == Kind.F else op.stage - 1
        if 0 <= nxt < table.n_stages:
            turn = table.placement[0, nxt] == where[op]
            assert (to == set()) == bool(turn), op
            assert all(abs(r - where[op]) == 1 for r in to)
        else:
            assert to == set()


@pytest.mark.parametrize("p,m", [(4, 6), (4, 2), (8, 12), (3, 4)])
def test_unsupported_points(p, m):
    with pytest.raises(ppsweep.UnsupportedPointError, match=f"multiple of p={p}"):
        ppsweep.build_schedule("hanayo", p, m)
    assert math.isnan(ppsweep.bubble_formula("hanayo", p, m))
    assert math.isnan(ppsweep.peak_activations_formula("hanayo", p, m))


@pytest.mark.parametrize("waves", [0, -1, 1.5, "two"])
def test_bad_waves_is_a_value_error_naming_waves(waves):
    with pytest.raises(ValueError, match="waves"):
        ppsweep.build_schedule("hanayo", 4, 4, waves=waves)


def test_boolean_waves_is_rejected():
    # Checked directly: build_schedule's cache key cannot tell True from 1.
    with pytest.raises(ValueError, match="waves"):
        hanayo.why_unsupported(4, 4, waves=True)
