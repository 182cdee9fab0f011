"""The ``flex`` schedule family (issue 28): its special cases, its ranges, its memory limit, its deadlocks."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ppsweep.schedules import SCHEDULES
from ppsweep.schedules.phases import one_f_one_b
from ppsweep.search.region import Region, peak_activations
from ppsweep.search.spaces import SPACES, label, strip_times
from ppsweep.tables.build import UnsupportedPointError, build_schedule
from ppsweep.tables.ops import Kind, Op
from ppsweep.tables.table import OrderDeadlockError, realize
from ppsweep.tables.validate import validate_table

FLEX = SCHEDULES["flex"].build_order


def rows(orders):
    return tuple(tuple(row) for row in orders)


@pytest.mark.parametrize("p,m", [(4, 8), (8, 24), (5, 3)])
def test_special_cases_are_the_hand_made_orders(p, m):
    assert rows(FLEX(p, m, split=False, warmup=p - 1).orders) == rows(SCHEDULES["1f1b"].build_order(p, m).orders)
    assert rows(FLEX(p, m).orders) == rows(SCHEDULES["zb_h1"].build_order(p, m).orders)
    assert rows(FLEX(p, m, warmup=2 * (p - 1), lag=2 * (p - 1)).orders) == rows(SCHEDULES["zb_h2"].build_order(p, m).orders)
    # the rule written out: ZB-H2's warm-up, ZB-H1's trailing W
    trapezoid = [one_f_one_b([Op(Kind.F, j, w) for j in range(m)], [Op(Kind.I, j, w) for j in range(m)],
                             min(2 * (p - 1 - w), m), weight_lag=w) for w in range(p)]
    assert rows(FLEX(p, m, warmup=2 * (p - 1)).orders) == rows(trapezoid)
    if m % max(1, m // p) == 0:
        assert rows(FLEX(p, m, v=2, split=False, warmup=2 * (p - 1)).orders) == rows(
            SCHEDULES["interleaved_1f1b"].build_order(p, m, v=2).orders)
        assert rows(FLEX(p, m, v=2).orders) == rows(SCHEDULES["interleaved_zb"].build_order(p, m, v=2).orders)


def test_per_worker_lists_equal_the_integer_rule():
    p, m = 6, 12
    assert rows(FLEX(p, m, warmup="10:8:6:4:2:0", lag="0:1:2:3:4:5").orders) == rows(FLEX(p, m, warmup=10, lag=5).orders)


@pytest.mark.parametrize("space", sorted(SPACES))
def test_every_variant_is_valid_or_one_line(space):
    """A sample of each space at p=4, m=8: valid tables (the reference validator), or a one-line reason."""
    p, m = 4, 8
    variants = SPACES[space].variants(p, m, 4.0, "1:1.2:0.6:0.1", 40)
    random.Random(1).shuffle(variants)
    built = failed = 0
    for options in variants[:40]:
        name = label(strip_times(options))
        try:
            order = FLEX(p, m, **{k: v for k, v in strip_times(options).items()})
            table = realize(order)
        except (ValueError, OrderDeadlockError) as error:
            assert "\n" not in str(error) and str(error)
            failed += 1
            continue
        validate_table(table)
        built += 1
        assert build_schedule(name, p, m).length == table.length
    assert built > 0


@pytest.mark.parametrize("fill", ["lag", "timed"])
@pytest.mark.parametrize("wshare", [100, 37])
def test_memory_limit_holds(fill, wshare):
    p, m = 6, 18
    region = Region.of(1.0, 1.0, 0.5, w_share=wshare / 100)
    for mem in (p, p + 3, 2 * p):
        table = build_schedule(f"flex@fill={fill}@warmup={3 * p}@lag={m}@mem={mem}@wshare={wshare}@times=1:1:0.5:0.05", p, m)
        assert peak_activations(table, region) <= mem + 1e-9
    # without the limit the same options hold more
    free = build_schedule(f"flex@fill={fill}@warmup={3 * p}@lag={m}@times=1:1:0.5:0.05", p, m)
    assert peak_activations(free, region) > p


def test_chunks_count_their_share_of_a_stage():
    p, m = 4, 8
    region = Region.of(1.0, 1.0, 1.0)
    assert peak_activations(build_schedule("interleaved_1f1b@v=2", p, m), region) == pytest.approx(
        build_schedule("interleaved_1f1b@v=2", p, m).peak_activations() / 2)
    assert peak_activations(build_schedule("1f1b", p, m), region) == p


def test_vee_placement_runs_back_up():
    order = FLEX(4, 8, v=2, shape="vee")
    assert order.placement.tolist() == [[0, 1, 2, 3, 3, 2, 1, 0]]
    validate_table(realize(order))


def test_bad_options_are_one_line():
    with pytest.raises(ValueError, match="unknown option 'depth'"):
        build_schedule("flex@depth=3", 4, 8)
    with pytest.raises(ValueError, match="shape must be one of loop, vee"):
        build_schedule("flex@shape=zigzag", 4, 8)
    with pytest.raises(ValueError, match="times must be F:I:W:C"):
        build_schedule("flex@fill=timed@times=1:2", 4, 8)
    with pytest.raises(UnsupportedPointError, match="option warmup lists 3 workers, p = 4"):
        build_schedule("flex@warmup=1:2:3", 4, 8)
    with pytest.raises(UnsupportedPointError, match="option lag must give every worker a value >= 0, got -1"):
        build_schedule("flex@lag=0:0:-1:0", 4, 8)
    with pytest.raises(UnsupportedPointError, match=r"option mem must be 0 \(no limit\) or in \[1, m=8\]"):
        build_schedule("flex@mem=9", 4, 8)


def test_deadlock_is_one_line():
    # a later worker deeper than an earlier one waits for a forward its neighbour has not run
    with pytest.raises(OrderDeadlockError) as error:
        build_schedule("flex@warmup=0:1:2:3", 4, 8)
    assert "deadlocks" in str(error.value) and "\n" not in str(error.value)
    # the timed fill runs the other pass where the one the alternation asks for cannot come
    validate_table(build_schedule("flex@fill=timed@warmup=0:1:2:3", 4, 8))


def test_timed_fill_fills_the_drain():
    """At the zero-bubble paper's 1.5B costs, the timed fill with an unbounded lag leaves less idle than
    ZB-H1's fixed lag at the same warm-up (the W passes go where the I passes would wait)."""
    from ppsweep.engine import simulate

    p, m = 8, 24
    times = "18.522:18.086:9.337:0.601"
    idle = {}
    for name in ("flex@warmup=14", f"flex@fill=timed@gap=0@lag={m}@warmup=14@times={times}"):
        table = build_schedule(name, p, m)
        idle[name] = float(np.asarray(simulate(table, 18.522, 27.423, 0.601, np.inf, 0.0, "overlap", t_i=18.086,
                                               t_w=9.337, backend="scan").t_sim))
    assert idle[f"flex@fill=timed@gap=0@lag={m}@warmup=14@times={times}"] < idle["flex@warmup=14"]
