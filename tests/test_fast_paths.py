"""The array paths (ppsweep.tables.fast_realize, ppsweep.engine.fast_program) against the per-operation references.

Every registered schedule and variant over small (p, m) and several slot settings, and random
valid orders (several stages per worker, two replicas, split backward): the realized tables, the
validator's verdicts and messages, the activation profiles and the compiled programs must be
equal to the reference's, array for array.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

import ppsweep.tables.fast_realize as fast_realize
import ppsweep.tables.table as table_mod
from ppsweep import SCHEDULES
from ppsweep.tables.build import resolve_options, why_unsupported
from ppsweep.engine.fast_program import _allocate_registers, _messages, compile_program_fast
from ppsweep.tables.fast_realize import realize_fast, table_ops, validate_fast
from ppsweep.tables.ops import Kind, Op, dependencies, expected_ops
from ppsweep.engine.program import compile_program
from ppsweep.schedules import get_schedule
from ppsweep.schedules.base import ScheduleOrder
from ppsweep.tables.table import OrderDeadlockError, ScheduleTable, realize
from ppsweep.tables.validate import InvalidTableError, validate_table

#: Option values tried beyond each schedule's defaults (schedules not named here: defaults only).
VARIANTS = {"hanayo": [{"waves": 2}, {"waves": 3}], "chimera": [{"split": "1:2"}]}
POINTS = [(2, 1), (2, 4), (3, 5), (4, 4), (4, 8), (6, 12), (8, 8), (8, 24)]
SLOTS = [(1, 2), (1, 1), (2, 3)]


def _cases():
    cases = []
    for name in sorted(SCHEDULES):
        for options in [{}] + VARIANTS.get(name, []):
            for p, m in POINTS:
                if why_unsupported(name, p, m, **options) is None:
                    cases.append((name, p, m, options))
    return cases


CASES = _cases()


def _case_id(case) -> str:
    name, p, m, options = case
    return f"{name}-p{p}-m{m}" + "".join(f"-{k}={v}" for k, v in options.items())


def assert_fields_equal(fast, ref) -> None:
    """Every field of two dataclasses (tables, programs) equal; arrays also in dtype and shape."""
    for f in dataclasses.fields(ref):
        a, b = getattr(fast, f.name), getattr(ref, f.name)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), f.name
        else:
            assert a == b, f.name


assert_tables_equal = assert_programs_equal = assert_fields_equal


def reference_profile(table: ScheduleTable, weights, monkeypatch) -> np.ndarray:
    """``activation_profile`` with its array path switched off (the per-operation loop)."""
    with monkeypatch.context() as patch:
        patch.setattr(table_mod, "activation_profile_fast", lambda *args: None)
        return table.activation_profile(weights)


def check_array_readings(order: ScheduleOrder, f_slots: int, b_slots: int, monkeypatch) -> None:
    """What tests/conformance does not cover: the operations realize_fast remembers, the activation
    profiles and a split backward's pending bytes, arrays against the per-operation loops."""
    ref = realize(order, f_slots, b_slots)
    fast = realize_fast(order, f_slots, b_slots)
    # the operations realize_fast remembers are those read back off the dense arrays (None for
    # both where the table has kinds the array paths leave to the references, e.g. F&B pairs)
    remembered, read_back = table_ops(fast), fast_realize._read_ops(ref)
    assert (remembered is None) == (read_back is None)
    if read_back is not None:
        assert_fields_equal(remembered, read_back)
        # the inputs realize_fast found, renamed into the program's order, are those found afresh there
        order_by_start = np.argsort(remembered.start, kind="stable")
        ops = remembered.taken(order_by_start)
        afresh = fast_realize.input_halves(ops.kind, ops.micro, ops.stage, fast.m, fast.n_stages, fast.split_backward,
                                           ops.micro2, ops.stage2)
        kept = fast_realize.taken_halves(fast, order_by_start)
        assert kept is not None and kept.dtype == afresh.dtype and np.array_equal(kept, afresh)
        assert fast_realize.taken_halves(ref, order_by_start) is None  # not built here: found afresh
    weights = np.linspace(0.5, 2.0, ref.n_stages)
    for w in (None, weights):
        expected = reference_profile(ref, w, monkeypatch)
        got = fast.activation_profile(w)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
    if ref.split_backward:  # a split backward's pending bytes, I to W: arrays against the loop
        from ppsweep.cost_model.memory import pending_profile

        pending = np.linspace(1.0, 3.0, ref.n_stages)
        with monkeypatch.context() as patch:
            patch.setattr(fast_realize, "table_ops", lambda table: None)
            expected = pending_profile(ref, pending)
        assert np.array_equal(pending_profile(fast, pending), expected)


#: Every case with the default slots (1, 2); the other slot settings on every case with p <= 4
#: (every schedule and variant has such cases): the larger tables add time, not code paths.
SLOT_CASES = [(slots, case) for case in CASES for slots in (SLOTS if case[1] <= 4 else SLOTS[:1])]


# (The realized tables, the validator's verdicts and the compiled programs of every registered
# schedule against the references: tests/conformance.)
@pytest.mark.parametrize("slots, case", SLOT_CASES, ids=[f"f{s[0]}b{s[1]}-{_case_id(c)}" for s, c in SLOT_CASES])
def test_registered_schedules_read_as_the_reference_reads_them(slots, case, monkeypatch):
    name, p, m, options = case
    order = get_schedule(name).build_order(p, m, **resolve_options(name, options))
    check_array_readings(order, *slots, monkeypatch)


def random_order(rng: random.Random, p: int, m: int, n_stages: int, replicas: int, split: bool) -> ScheduleOrder:
    """A random valid order: a random topological order of all operations, dealt to their workers."""
    placement = np.array([[rng.randrange(p) for _ in range(n_stages)] for _ in range(replicas)], dtype=np.int64)
    micro_replica = np.array([rng.randrange(replicas) for _ in range(m)], dtype=np.int64)
    pending = set(expected_ops(m, n_stages, split))
    done: set[Op] = set()
    rows: list[list[Op]] = [[] for _ in range(p)]
    while pending:
        ready = sorted(op for op in pending if all(d in done for d in dependencies(op, n_stages, split)))
        op = rng.choice(ready)
        pending.remove(op)
        done.add(op)
        rows[int(placement[micro_replica[op.micro], op.stage])].append(op)
    return ScheduleOrder(
        name="random", p=p, m=m, n_stages=n_stages, orders=tuple(tuple(r) for r in rows),
        placement=placement, micro_replica=micro_replica,
        stage_fractions=np.full(n_stages, 1.0 / n_stages), split_backward=split,
    )


@pytest.mark.parametrize("seed", range(24))
def test_random_valid_orders_match_reference(seed, monkeypatch):
    rng = random.Random(seed)
    p = rng.choice([2, 3, 4])
    order = random_order(rng, p, rng.randint(1, 5), rng.randint(1, 6), rng.choice([1, 2]), rng.random() < 0.5)
    f_slots, b_slots = rng.choice(SLOTS)
    ref = realize(order, f_slots, b_slots)
    assert_tables_equal(realize_fast(order, f_slots, b_slots), ref)
    # Random placements may send one output to two workers: then both compilers refuse it.
    try:
        expected = compile_program(ref)
    except NotImplementedError as err:
        with pytest.raises(NotImplementedError) as fast_err:
            compile_program_fast(ref)
        assert str(fast_err.value) == str(err)
    else:
        assert_programs_equal(compile_program_fast(ref), expected)
    weights = np.linspace(0.5, 2.0, ref.n_stages)
    assert np.array_equal(ref.activation_profile(weights), reference_profile(ref, weights, monkeypatch))


def test_deadlock_and_malformed_orders_give_the_reference_errors():
    order = get_schedule("1f1b").build_order(3, 3)
    # Worker 0 waits for a backward that its own later forward must precede: a cycle.
    rows = list(order.orders)
    rows[0] = tuple(reversed(rows[0]))
    stuck = dataclasses.replace(order, orders=tuple(rows))
    with pytest.raises(OrderDeadlockError) as ref_err:
        realize(stuck)
    with pytest.raises(OrderDeadlockError) as fast_err:
        realize_fast(stuck)
    assert str(fast_err.value) == str(ref_err.value)
    # An operation listed twice and one out of range: the reference's table either way.
    rows = list(order.orders)
    rows[2] = rows[2] + (rows[2][-1],)
    twice = dataclasses.replace(order, orders=tuple(rows))
    assert_tables_equal(realize_fast(twice), realize(twice))
    with pytest.raises(ValueError, match="f_slots"):
        realize_fast(order, 0, 2)


def corrupted_tables(table: ScheduleTable):
    """Copies of a valid table, each breaking one rule of the validator."""

    def copy(**changes):
        arrays = {k: getattr(table, k).copy() for k in ("kind", "micro", "stage", "replica")}
        for name, edit in changes.items():
            edit(arrays[name])
        return dataclasses.replace(table, **arrays)

    ops = table_ops(table)
    w, t = int(ops.worker[-1]), int(ops.start[-1])
    yield copy(kind=lambda a: a.__setitem__((w, slice(t, t + int(ops.slots[-1]))), int(Kind.IDLE)))  # missing op
    yield copy(replica=lambda a: a.__setitem__((w, t), 7))  # wrong replica cell
    yield copy(micro=lambda a: a.__setitem__((w, t), table.m))  # microbatch out of range
    yield copy(kind=lambda a: a.__setitem__((w, t), 9))  # unknown kind code
    # Two cells swapped on worker 0: order or duration broken.
    yield copy(**{name: (lambda a: a.__setitem__((0, slice(0, 2)), a[0, 1::-1].copy())) for name in ("kind", "micro", "stage")})
    # The first operation of worker 1 moved to slot 0 (before its input exists).
    first = int(np.flatnonzero(ops.worker == 1)[0])
    t1, d1 = int(ops.start[first]), int(ops.slots[first])

    if t1 >= d1:
        arrays = {k: getattr(table, k).copy() for k in ("kind", "micro", "stage", "replica")}
        for name, array in arrays.items():
            values = array[1, t1 : t1 + d1].copy()
            array[1, t1 : t1 + d1] = int(Kind.IDLE) if name == "kind" else -1
            array[1, :d1] = values
        yield dataclasses.replace(table, **arrays)
    if ops.has_pairs:  # a pair's backward half moved to another stage; or made the same as another pair's
        pairs = np.flatnonzero(ops.kind == Kind.FB)
        a, b = pairs[0], pairs[-1]
        cells = (int(ops.worker[a]), slice(int(ops.start[a]), int(ops.end[a])))
        for micro2, stage2 in ((ops.micro2[a], (ops.stage2[a] + 1) % table.n_stages), (ops.micro2[b], ops.stage2[b])):
            pair_micro, pair_stage = table.pair_micro.copy(), table.pair_stage.copy()
            pair_micro[cells], pair_stage[cells] = micro2, stage2
            yield dataclasses.replace(table, pair_micro=pair_micro, pair_stage=pair_stage)


@pytest.mark.parametrize("size", [(4, 8), (2, 4)], ids=["compiled", "python"])  # the checks' kernel, and as Python below SMALL_INPUT
@pytest.mark.parametrize("name", ["1f1b", "chimera", "zb_h1", "dualpipe", "dualpipev"])
def test_validator_verdicts_and_messages_match_reference(name, size):
    order = get_schedule(name).build_order(*size)
    table = realize_fast(order)
    n = 0
    for bad in corrupted_tables(table):
        with pytest.raises(InvalidTableError) as ref_err:
            validate_table(bad)
        with pytest.raises(InvalidTableError) as fast_err:
            validate_fast(bad)
        assert str(fast_err.value) == str(ref_err.value)
        n += 1
    assert n >= 5  # chimera at p = 2: worker 1 starts at slot 0, so its first operation cannot move earlier


def test_validator_leaves_replicas_out_of_the_placement_to_the_reference():
    # The compiled checks read placement[replica, stage] without bounds checks: a replica the
    # placement lacks (here 5 of 1) goes to the reference, which names the first cell it breaks.
    table = realize_fast(get_schedule("1f1b").build_order(4, 8))
    bad = dataclasses.replace(table, micro_replica=np.full(table.m, 5))
    with pytest.raises(InvalidTableError) as ref_err:
        validate_table(bad)
    with pytest.raises(InvalidTableError) as fast_err:
        validate_fast(bad)
    assert str(fast_err.value) == str(ref_err.value) and "replica" in str(fast_err.value)


def test_register_allocation_is_first_fit():
    # Waves 0, 0, 1, 3: messages 0 and 1 hold registers 0 and 1 until waves 1 and 3; message 2
    # (wave 1) reuses register 0 (its last reader is in wave 1), message 3 (wave 3) takes 0 again
    # (message 2 died in wave 2)... written out by hand from the rule.
    register, n_regs = _allocate_registers(np.array([0, 0, 1, 3]), np.array([1, 3, 2, 5]))
    assert register.tolist() == [0, 1, 0, 0] and n_regs == 2
    register, n_regs = _allocate_registers(np.array([0, 0, 1, 1]), np.array([4, 4, 2, 2]))
    assert register.tolist() == [0, 1, 2, 3] and n_regs == 4


@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_messages_refuse_what_the_reference_decides(compiled):
    """``_messages`` (compiled, and as Python on small inputs) reads each operation's remote inputs and
    sends its outputs in the reference's order, and leaves to the reference the tables it refuses."""
    messages = _messages if compiled else _messages.py_func

    def run(halves, worker, start=None, pairs=None):
        n = len(worker)
        halves = np.array(halves, dtype=np.int64).reshape(-1, n)
        start = np.arange(n, dtype=np.int64) if start is None else np.array(start, dtype=np.int64)
        pairs = np.zeros(n, dtype=bool) if pairs is None else np.array(pairs, dtype=bool)
        reads, out, destination = np.empty((2, n), np.int64), np.empty((n, 2), np.int64), np.empty(2 * n, np.int64)
        ok = messages(halves, np.array(worker, dtype=np.int64), start, pairs, reads, out, destination)
        return ok, reads, out, destination

    # A chain over three workers: op 1 reads op 0's output, op 2 reads op 1's.
    ok, reads, out, destination = run([[-1, 0, 2], [-1, -1, -1]], [0, 1, 2])
    assert ok and reads[0].tolist() == [-1, 0, 2] and out[:, 0].tolist() == [0, 2, -1]
    assert destination.tolist() == [1, -1, 2, -1, -1, -1]
    assert not run([[-1, -1, 0], [-1, -1, 2]], [0, 1, 2])[0]  # two remote inputs to op 2
    assert not run([[-1, 0, 0], [-1, -1, -1]], [0, 1, 2])[0]  # op 0's output read on workers 1 and 2
    assert run([[-1, 0, 0], [-1, -1, -1]], [0, 1, 1])[0]  # both readers on worker 1: one message
    assert not run([[-1, 1], [-1, -1]], [0, 1])[0]  # a non-pair's backward half (message 1) sent
    # A pair (op 1 on worker 1) reads op 0's output in both halves: the reference decides.
    assert not run([[-1, 0], [-1, -1], [-1, 0], [-1, -1]], [0, 1], pairs=[False, True])[0]
    # A pair (op 0) whose halves both send to worker 1: the output read first goes first.
    ok, _, out, _ = run([[-1, -1, 1], [-1, 0, -1], [-1, -1, -1], [-1, -1, -1]], [0, 1, 1], start=[0, 3, 2],
                        pairs=[True, False, False])
    assert ok and out[0].tolist() == [1, 0]


def random_weights(program, rng: np.random.Generator, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Random non-negative feature weights (half of the features communication), some zeros."""
    from ppsweep.engine.envelope import raw_size

    weights = rng.random((n_features, raw_size(program))) * (rng.random((n_features, raw_size(program))) < 0.7)
    comm = np.arange(n_features) >= n_features // 2
    return weights, comm


def _envelopes_equal(fast, ref) -> None:
    """Two built envelopes (or the messages of their EnvelopeTooLarge) the same to the bit."""
    if isinstance(ref, str):
        assert fast == ref
        return
    assert fast.t_sim.shape == ref.t_sim.shape and np.array_equal(fast.t_sim, ref.t_sim)
    assert len(fast.finish) == len(ref.finish)
    assert all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(fast.finish, ref.finish))
    assert np.array_equal(fast.compute, ref.compute)
    assert (fast.depth, fast.largest) == (ref.depth, ref.largest)


def _both_envelopes(program, mode, weights, comm, cap):
    """The compiled programme's envelope and the lane-by-lane reference's (or their errors' messages)."""
    from ppsweep.engine.envelope import EnvelopeTooLarge, build_envelope

    results = []
    for native in (True, False):
        try:
            results.append(build_envelope(program, mode, weights, comm, cap=cap, native=native))
        except EnvelopeTooLarge as err:
            results.append(str(err))
    return results


@pytest.mark.parametrize("case", [c for c in CASES if c[1] <= 6], ids=_case_id)
def test_native_envelope_matches_lane_by_lane(case):
    """Random feature weights (3 to 9 features: numpy's pairwise sums from 8), every mode, a cap
    that some tables pass: the compiled programme keeps the reference's vectors, in its order."""
    from ppsweep.engine.comm import MODES

    name, p, m, options = case
    order = get_schedule(name).build_order(p, m, **resolve_options(name, options))
    program = compile_program_fast(realize_fast(order))
    rng = np.random.default_rng(p * 1000 + m)
    for mode in MODES:
        for cap, n_features in ((64, 3), (3, 4), (64, 5), (64, 9)):
            weights, comm = random_weights(program, rng, n_features)
            _envelopes_equal(*_both_envelopes(program, mode, weights, comm, cap))


@pytest.mark.parametrize("name, p, m", [("hanayo", 8, 32), ("chimera", 8, 16), ("gpipe", 8, 32), ("zbv", 4, 16),
                                        ("dualpipe", 8, 16)])
def test_native_envelope_matches_on_the_cost_models_features(name, p, m):
    """The cost model's features (sets of many vectors, tables past the cap) in every mode."""
    from ppsweep.engine.comm import MODES

    program = compile_program_fast(realize_fast(get_schedule(name).build_order(p, m)))
    weights, comm = _cost_model_weights(program)
    for mode in MODES:
        _envelopes_equal(*_both_envelopes(program, mode, weights, comm, 64))


def test_native_row_sum_is_numpys():
    """numpy sums a row in order below 8 values and pairwise (blocks of 8) above: so does row_sum."""
    from ppsweep.engine.native_envelope import row_sum

    rng = np.random.default_rng(7)
    for n in range(1, 129):
        rows = rng.standard_normal((4, n)) * 10.0 ** rng.uniform(-8, 3, (4, n))
        assert [row_sum(rows, i, n) for i in range(4)] == rows.sum(axis=1).tolist(), n


def _cost_model_weights(program) -> tuple[np.ndarray, np.ndarray]:
    """Feature weights of the cost model's shape: one compute feature (F 1, B 2 per stage, a pair's
    forward part 1), latency and wire (each with the all-reduces' share)."""
    from ppsweep.engine.envelope import raw_index, raw_size

    S = program.n_stages
    weights = np.zeros((3, raw_size(program)))
    weights[0, :S], weights[0, S : 2 * S], weights[0, 4 * S : 5 * S] = 1.0, 2.0, 1.0
    idx = raw_index(program)
    weights[1, idx["alpha"]] = weights[2, idx["wire"]] = 1.0
    weights[1, idx["sync"] : idx["sync"] + program.n_sync] = 2.0
    weights[2, idx["sync"] : idx["sync"] + program.n_sync] = 40.0
    return weights, np.array([False, True, True])


@pytest.mark.parametrize("name", ["dualpipe", "dualpipev", "zbv", "chimera"])
def test_the_array_paths_take_every_registered_schedule(name, monkeypatch):
    """Pairs F&B and mixed split backwards included: no reference walk is needed to build, check,
    compile or profile a registered schedule's table."""
    import ppsweep.engine.fast_program as fast_program
    from ppsweep.tables import validate as validate_mod

    def refused(*args, **kwargs):
        raise AssertionError("the reference was asked")

    monkeypatch.setattr(fast_realize, "realize", refused)
    monkeypatch.setattr(validate_mod, "validate_table", refused)
    monkeypatch.setattr(fast_program, "compile_program", refused)
    monkeypatch.setattr(ScheduleTable, "placed_ops", refused)
    table = realize_fast(get_schedule(name).build_order(8, 16))
    validate_fast(table)
    compile_program_fast(table)
    assert table.activation_profile().shape == (8, table.length)
