"""Schedule tables: validity, closed forms, peak activations, and the validator's messages."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import case_id, supported_cases
from ppsweep import InvalidTableError, Kind, build_schedule, bubble_formula, peak_activations_formula, validate_table
from ppsweep.schedules.base import ScheduleOrder, one_replica_layout
from ppsweep.tables.table import OrderDeadlockError, realize
from ppsweep.tables.ops import Op

PM = [(p, m) for p in (2, 3, 4, 8) for m in (1, 2, 3, 4, 8, 16, 32)]


@pytest.mark.parametrize("case", supported_cases(), ids=case_id)
def test_every_registered_schedule_builds_a_valid_table(case):
    name, p, m, options = case
    table = build_schedule(name, p, m, **options)
    validate_table(table)  # build_schedule validates too; a broken generator fails here
    assert table.kind.shape == (p, table.length) and table.kind.dtype.kind == "i"
    # Every microbatch runs once through every stage: F and B (or I and W) cells add up.
    assert np.count_nonzero(table.kind != Kind.IDLE) == m * table.n_stages * (table.f_slots + table.b_slots)


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p, m", PM)
def test_gpipe_and_1f1b_bubble_equals_formula(name, p, m):
    table = build_schedule(name, p, m)
    assert table.bubble_ratio() == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)
    assert bubble_formula(name, p, m) == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)
    assert table.length == 3 * (m + p - 1)  # F 1 slot, B 2 slots


@pytest.mark.parametrize("p, m", PM)
def test_peak_activations(p, m):
    assert build_schedule("gpipe", p, m).peak_activations() == m
    assert build_schedule("1f1b", p, m).peak_activations() == min(p, m)
    assert peak_activations_formula("gpipe", p, m) == m
    assert peak_activations_formula("1f1b", p, m) == min(p, m)


def test_busy_cells_match_work():
    table = build_schedule("1f1b", 4, 8)
    assert np.count_nonzero(table.kind == Kind.F) == 4 * 8 * 1
    assert np.count_nonzero(table.kind == Kind.B) == 4 * 8 * 2


def test_to_xarray_has_named_dimensions():
    ds = build_schedule("1f1b", 4, 8).to_xarray()
    assert ds["kind"].dims == ("worker", "slot")
    assert ds.sizes["slot"] == 33 and ds.attrs["schedule"] == "1f1b"


def broken(table, **changes):
    return dataclasses.replace(table, **{k: v for k, v in changes.items()})


def test_validator_names_missing_operation():
    table = build_schedule("gpipe", 2, 2)
    kind = table.kind.copy()
    micro, stage, replica = table.micro.copy(), table.stage.copy(), table.replica.copy()
    last = table.length - 2  # B(1, 0) on worker 0 fills the last two slots
    kind[0, last:] = Kind.IDLE
    micro[0, last:] = stage[0, last:] = replica[0, last:] = -1
    with pytest.raises(InvalidTableError, match=r"worker 0, operation B\(mb=1, stage=0\): missing"):
        validate_table(broken(table, kind=kind, micro=micro, stage=stage, replica=replica))


def test_validator_names_dependency_violation():
    table = build_schedule("gpipe", 2, 1)
    # Move F(0, 1) on worker 1 from slot 1 to slot 0, before its input ends.
    kind, micro, stage, replica = (a.copy() for a in (table.kind, table.micro, table.stage, table.replica))
    for a, v in ((kind, Kind.F), (micro, 0), (stage, 1), (replica, 0)):
        a[1, 0], a[1, 1] = v, (Kind.IDLE if a is kind else -1)
    with pytest.raises(InvalidTableError, match=r"worker 1, slot 0, operation F\(mb=0, stage=1\): starts before its input"):
        validate_table(broken(table, kind=kind, micro=micro, stage=stage, replica=replica))


def test_validator_names_wrong_duration_and_duplicate():
    table = build_schedule("gpipe", 2, 2)
    kind = table.kind.copy()
    b_start = int(np.argmax(table.kind[1] == Kind.B))
    kind[1, b_start + 1] = Kind.IDLE  # a B of one slot
    with pytest.raises(InvalidTableError, match=rf"worker 1, slot {b_start}, .*occupies 1 slots, expected 2"):
        validate_table(broken(table, kind=kind))
    table = build_schedule("gpipe", 2, 3)
    micro = table.micro.copy()
    micro[0, 2] = 0  # F(2, 0) becomes a second F(0, 0)
    with pytest.raises(InvalidTableError, match=r"worker 0, slot 2, .*runs a second time \(first at worker 0, slot 0\)"):
        validate_table(broken(table, micro=micro))


def test_validator_names_wrong_worker():
    table = build_schedule("gpipe", 2, 1)
    stage = table.stage.copy()
    stage[0, 0] = 1
    with pytest.raises(InvalidTableError, match=r"worker 0, slot 0, .*belongs to worker 1"):
        validate_table(broken(table, stage=stage))


def test_deadlocking_order_is_rejected():
    orders = ((Op(Kind.B, 0, 0), Op(Kind.F, 0, 0)), (Op(Kind.F, 0, 1), Op(Kind.B, 0, 1)))
    order = ScheduleOrder("bad", 2, 1, 2, orders, **one_replica_layout(2, 1, 2, [0, 1]))
    with pytest.raises(OrderDeadlockError, match=r"worker 0 waits at B\(mb=0, stage=0\)"):
        realize(order)


@pytest.mark.parametrize(
    "name, p, m, options, field",
    [
        ("1f1b", 1, 8, {}, "p"),
        ("1f1b", 4, 0, {}, "m"),
        ("1f1b", 4.5, 8, {}, "p"),
        ("nope", 4, 8, {}, "schedule"),
        ("gpipe", 4, 8, {"waves": 2}, "option"),
    ],
)
def test_bad_build_input_names_the_field(name, p, m, options, field):
    with pytest.raises(ValueError, match=field):
        build_schedule(name, p, m, **options)
