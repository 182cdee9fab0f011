"""Orders computed as arrays, and the two ways of placing an order as soon as possible.

- 1F1B, Hanayo, Chimera (direct concatenation), interleaved 1F1B, looped BFS, interleaved ZB (and ZB-H1),
  ZB-V, DualPipe and DualPipeV build their orders with numpy (``build_order``); their one-operation-at-a-time
  descriptions (``worker_order``, ``worker_orders``) are the readable references they must equal. GPipe's array order
  is checked against its definition written out here.
- ``OrderArrays`` behaves as the tuples of operations it stands for.
- ``fast_realize`` places an order in one compiled pass (``_longest_paths``, compiled or as Python on
  small orders): every registered schedule's start slots are the reference's, an order whose inputs
  sit in later positions of their workers' orders too, and a deadlocked order places nothing.
"""

from __future__ import annotations

import dataclasses
import numpy as np
import pytest

from ppsweep import SCHEDULES
from ppsweep.tables.build import resolve_options, why_unsupported
from ppsweep.tables.fast_realize import (
    _asap_starts,
    _longest_paths,
    _order_arrays,
    input_positions,
    kind_slots,
    realize_fast,
    well_formed,
)
from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules import (
    chimera,
    dualpipe,
    dualpipev,
    get_schedule,
    gpipe,
    hanayo,
    interleaved_1f1b,
    interleaved_zb,
    looped_bfs,
    one_f_one_b,
    zb_h1,
    zb_h2,
    zbv,
)
from ppsweep.schedules.base import OrderArrays, ScheduleOrder, one_replica_layout
from ppsweep.tables.table import realize

SMALL = [(p, m) for p in (2, 3, 4, 5, 8) for m in range(1, 2 * p + 3)]


@pytest.mark.parametrize("p,m", SMALL)
def test_1f1b_and_gpipe_array_orders_equal_their_definitions(p, m):
    expected = tuple(one_f_one_b.worker_order(p, m, w) for w in range(p))
    assert one_f_one_b.build_order(p, m).orders == expected
    gpipe_rows = tuple(
        tuple(Op(Kind.F, j, w) for j in range(m)) + tuple(Op(Kind.B, j, w) for j in range(m)) for w in range(p)
    )
    assert gpipe.build_order(p, m).orders == gpipe_rows


@pytest.mark.parametrize("p", [2, 3, 4, 6])
@pytest.mark.parametrize("units", [1, 2, 3])
@pytest.mark.parametrize("waves", [1, 2, 3])
def test_hanayo_array_order_equals_its_slot_by_slot_description(p, units, waves):
    m = units * p
    expected = tuple(hanayo.worker_order(p, m, waves, w) for w in range(p))
    assert hanayo.build_order(p, m, waves).orders == expected


@pytest.mark.parametrize("p", [2, 4, 6, 8])
@pytest.mark.parametrize("units", [1, 2, 3, 5])
def test_chimera_array_order_equals_its_worker_by_worker_description(p, units):
    m = units * p
    expected = tuple(chimera.worker_order(p, m, w) for w in range(p))
    order = chimera.build_order(p, m)
    assert isinstance(order.orders, OrderArrays) and order.orders == expected


#: (p, m) of the looped, V-shaped and DualPipe families: every m in the small range, so that every
#: phase length (warm-up clipped by m, steady states of length 0, the V not filled) occurs.
LOOPED = [(p, m) for p in (2, 3, 4, 5, 8) for m in range(1, 3 * p + 3)]


@pytest.mark.parametrize("p,m", LOOPED)
def test_looped_array_orders_equal_their_phase_by_phase_descriptions(p, m):
    for v in (1, 2, 3):
        expected = tuple(tuple(looped_bfs.worker_order(p, m, v, w)) for w in range(p))
        assert looped_bfs.build_order(p, m, v).orders == expected, ("looped_bfs", v)
        if interleaved_1f1b.why_unsupported(p, m, v) is not None:
            continue
        for module in (interleaved_1f1b, interleaved_zb):
            order = module.build_order(p, m, v)
            assert isinstance(order.orders, OrderArrays)
            assert order.orders == tuple(tuple(module.worker_order(p, m, v, w)) for w in range(p)), (module.__name__, v)
    assert zb_h1.build_order(p, m).orders == tuple(tuple(interleaved_zb.worker_order(p, m, 1, w)) for w in range(p))
    for lag in (0, 1, 2, 3):  # ZB-H2's W passes trail by lag·w: past the whole order where lag·w >= m
        assert zb_h2.order_arrays(p, m, lag) == tuple(tuple(zb_h2.worker_order(p, m, w, lag)) for w in range(p)), lag
    assert zbv.build_order(p, m).orders == tuple(tuple(zbv.worker_order(p, m, w)) for w in range(p))


@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 8])
def test_dualpipe_array_orders_equal_their_phase_by_phase_descriptions(p):
    # pairs F&B, the middle worker's first step apart, the split from phase 6's middle on, W in FIFO order
    for m in range(2 * p, 4 * p + 3):
        for module in (dualpipe, dualpipev):
            if module.why_unsupported(p, m) is not None:
                continue
            expected, split = module.worker_orders(p, m)
            order = module.build_order(p, m)
            assert isinstance(order.orders, OrderArrays) and order.orders.micro2 is not None
            assert order.orders == expected and order.split_backward == split, (module.__name__, m)


def test_order_arrays_behave_as_the_tuples_they_hold():
    rows = ((Op(Kind.F, 0, 0), Op(Kind.B, 0, 0)), (Op(Kind.F, 0, 1),))
    arrays = OrderArrays(np.array([2, 1]), [1, 2, 1], [0, 0, 0], [0, 0, 1])
    assert len(arrays) == 2 and arrays[0] == rows[0] and arrays[1] == rows[1]
    assert arrays == rows and rows == arrays and list(arrays) == list(rows)
    assert isinstance(arrays[0][1].kind, Kind) and arrays[0][1].kind == Kind.B
    assert arrays != rows[:1]
    with pytest.raises(ValueError, match="sum\\(lengths\\)=3"):
        OrderArrays(np.array([2, 1]), [1, 2], [0, 0], [0, 0])
    # a pair F&B carries its backward half in micro2, stage2 (-1 for the other operations)
    with_pair = OrderArrays(np.array([1, 1]), [5, 1], [0, 0], [0, 1], micro2=[1, -1], stage2=[1, -1])
    assert with_pair == ((Op(Kind.FB, 0, 0, 1, 1),), (Op(Kind.F, 0, 1),))
    with pytest.raises(ValueError, match="sum\\(lengths\\)=2"):
        OrderArrays(np.array([1, 1]), [5, 1], [0, 0], [0, 1], micro2=[1], stage2=[1, -1])


def _asap_inputs(order: ScheduleOrder, f_slots: int, b_slots: int):
    ops = _order_arrays(order)
    assert well_formed(ops.kind, ops.micro, ops.stage, order.m, order.n_stages, ops.micro2, ops.stage2)
    inputs = input_positions(ops.kind, ops.micro, ops.stage, order.m, order.n_stages, order.split_backward, ops.micro2,
                             ops.stage2)
    return ops.lengths, np.where(inputs >= 0, inputs, len(ops.kind)), kind_slots(ops.kind, f_slots, b_slots)


def _schedule_cases():
    """Registered schedules at small (p, m), pairs F&B (four rows of inputs) included."""
    return [(name, p, m) for name in sorted(SCHEDULES) for p, m in [(2, 3), (4, 4), (4, 8), (6, 12)]
            if why_unsupported(name, p, m) is None]


@pytest.mark.parametrize("name,p,m", _schedule_cases())
@pytest.mark.parametrize("f_slots,b_slots", [(1, 2), (1, 1), (2, 3)])
def test_placements_are_the_references(name, p, m, f_slots, b_slots):
    order = get_schedule(name).build_order(p, m, **resolve_options(name, {}))
    args = _asap_inputs(order, f_slots, b_slots)
    starts = _asap_starts(*args)
    compiled = np.zeros_like(starts)
    assert _longest_paths(*args, compiled) and np.array_equal(compiled, starts)  # compiled, whatever the size
    reference = realize(order, f_slots, b_slots)
    placed = sorted(reference.placed_ops(), key=lambda item: (item.worker, item.start))
    assert starts.tolist() == [item.start for item in placed]


def test_a_deadlocked_order_places_nothing():
    order = get_schedule("1f1b").build_order(3, 3)
    rows = list(order.orders)
    rows[0] = tuple(reversed(rows[0]))  # worker 0 waits for a backward that its own later forward must precede
    args = _asap_inputs(dataclasses.replace(order, orders=tuple(rows)), 1, 2)
    assert _asap_starts(*args) is None
    assert not _longest_paths(*args, np.zeros(len(args[2]), dtype=np.int64))


def test_an_order_whose_inputs_sit_later_in_their_workers_orders_is_placed_as_the_reference_places_it():
    # Worker 0 holds stages 0 and 1, worker 1 stage 2: F(0, 2) sits in column 0 of worker 1, its
    # input F(0, 1) in column 1 of worker 0, a later column.
    p, m, stages = 2, 2, 3
    worker0 = tuple(Op(Kind.F, j, s) for j in range(m) for s in (0, 1)) + tuple(
        Op(Kind.B, j, s) for j in range(m) for s in (1, 0)
    )
    worker1 = tuple(op for j in range(m) for op in (Op(Kind.F, j, 2), Op(Kind.B, j, 2)))
    order = ScheduleOrder("two_stages_on_w0", p, m, stages, (worker0, worker1), **one_replica_layout(p, m, stages, [0, 0, 1]))
    for f_slots, b_slots in [(1, 2), (2, 3)]:
        fast, ref = realize_fast(order, f_slots, b_slots), realize(order, f_slots, b_slots)
        for field in ("kind", "micro", "stage", "replica"):
            assert np.array_equal(getattr(fast, field), getattr(ref, field)), field
