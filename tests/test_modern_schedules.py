"""Interleaved 1F1B, looped BFS, interleaved ZB, ZB-H1, ZB-H2, ZB-V: range, validity, formulas vs tables."""

from __future__ import annotations

import math

import pytest

import ppsweep
from ppsweep.engine.reference import post_validated_step, reference_simulate, worker_spans
from ppsweep.tables.build import UnsupportedPointError, why_unsupported
from ppsweep.tables.ops import Kind
from ppsweep.schedules import interleaved_zb, zb_h1, zb_h2

#: (name, options) of every schedule of this file; the looped ones with several chunk counts.
VARIANTS = [
    ("interleaved_1f1b", {"v": 1}), ("interleaved_1f1b", {"v": 2}), ("interleaved_1f1b", {"v": 3}),
    ("looped_bfs", {"v": 1}), ("looped_bfs", {"v": 2}), ("looped_bfs", {"v": 3}),
    ("interleaved_zb", {"v": 1}), ("interleaved_zb", {"v": 2}), ("interleaved_zb", {"v": 3}),
    ("zb_h1", {}), ("zb_h2", {}), ("zb_h2", {"lag": 1}), ("zb_h2", {"lag": 3}), ("zbv", {}), ("dualpipe", {}), ("dualpipev", {}),
]
REFUSAL = {"interleaved_1f1b": "multiple of its number of rounds", "interleaved_zb": "multiple of its number of rounds",
           "dualpipe": "(p must be even|m must be even and at least 2p)", "dualpipev": "m must be at least 2p"}
GRID = [(p, m) for p in range(2, 6) for m in range(1, 13)] + [(6, 9), (6, 13), (8, 5), (8, 12), (8, 16)]


def variant_id(variant) -> str:
    name, options = variant
    return name + "".join(f"@{k}={v}" for k, v in options.items())


def in_range(name: str, p: int, m: int, options: dict) -> bool:
    """The operating range as each module states it (written here from the docstrings)."""
    if name in ("interleaved_1f1b", "interleaved_zb"):
        return m % max(1, m // p) == 0
    if name == "dualpipe":
        return p % 2 == 0 and m % 2 == 0 and m >= 2 * p
    if name == "dualpipev":
        return m >= 2 * p
    return True


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_valid_for_every_point_in_range(variant):
    name, options = variant
    for p, m in GRID:
        if not in_range(name, p, m, options):
            assert why_unsupported(name, p, m, **options) is not None
            with pytest.raises(UnsupportedPointError, match=REFUSAL[name]):
                ppsweep.build_schedule(name, p, m, **options)
            continue
        table = ppsweep.build_schedule(name, p, m, **options)  # realized and validated
        v = options.get("v", 2 if name in ("zbv", "dualpipev") else 1)
        assert table.n_stages == v * p and table.n_replicas == (2 if name == "dualpipe" else 1)
        if name.startswith("dualpipe"):  # mixed: pairs carry full backwards, the cool-down splits
            assert isinstance(table.split_backward, frozenset) and 0 < len(table.split_backward) < m * table.n_stages
            assert (table.kind == Kind.FB).any() and (table.kind == Kind.B).any() and (table.kind == Kind.I).any()
        else:
            assert table.split_backward == (name not in ("interleaved_1f1b", "looped_bfs"))
        busy = (table.kind != Kind.IDLE).sum()
        assert busy == table.n_stages * m * 3  # F 1 slot, B 2 (or I 1 + W 1) per microbatch-stage


def exact_from(name: str, p: int) -> int:
    """Smallest m from which the bubble formula equals the table (found on the tables, stated in the README)."""
    return {"zbv": 3 * p // 2, "dualpipe": 2 * p, "dualpipev": 2 * p}.get(name, p)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v[0] != "zb_h2"], ids=variant_id)
def test_bubble_formula_is_the_table_from_m_at_least_p(variant):
    name, options = variant
    for p, m in GRID:
        if not in_range(name, p, m, options):
            continue
        table = ppsweep.build_schedule(name, p, m, **options)
        formula = ppsweep.bubble_formula(name, p, m, **options)
        if m >= exact_from(name, p):
            assert table.bubble_ratio() == pytest.approx(formula, abs=1e-12), (p, m)
        else:  # fewer microbatches than the pipeline needs: the table idles at least as much
            assert table.bubble_ratio() >= formula - 1e-12, (p, m)


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_peak_activations_formula_is_the_table(variant):
    name, options = variant
    for p, m in GRID:
        if in_range(name, p, m, options):
            table = ppsweep.build_schedule(name, p, m, **options)
            assert table.peak_activations() == ppsweep.peak_activations_formula(name, p, m, **options), (p, m)


def test_closed_forms_written_out():
    # Megatron's (p-1)/(v·m+p-1); the zero-bubble paper's (p-1)(F+I-W) with unit F, I, W; ZB-V.
    assert ppsweep.bubble_formula("interleaved_1f1b", 4, 8, v=2) == pytest.approx(3 / 19)
    assert ppsweep.build_schedule("interleaved_1f1b", 4, 8, v=2).bubble_ratio() == pytest.approx(3 / 19)
    assert ppsweep.build_schedule("zb_h1", 4, 8).bubble_ratio() == pytest.approx(3 / 27)
    assert ppsweep.build_schedule("1f1b", 4, 8).bubble_ratio() == pytest.approx(9 / 33)  # 3x ZB-H1's idle
    assert ppsweep.build_schedule("zbv", 4, 8).bubble_ratio() == pytest.approx(3 / 51)
    assert ppsweep.bubble_formula("zb_h2", 4, 8) == 0.0  # the paper's parallelogram count
    assert ppsweep.build_schedule("zb_h2", 4, 8).bubble_ratio() == pytest.approx(zb_h2.table_bubble(4, 8))
    assert ppsweep.peak_activations_formula("zb_h2", 8, 32) == 15  # the paper's (2p-1) M_B
    assert ppsweep.peak_activations_formula("zb_h1", 8, 32) == 8  # 1F1B's


@pytest.mark.parametrize("lag,exact_from", [(2, lambda p: 2 * (p - 1)), (1, lambda p: p)])
def test_zb_h2_table_bubble(lag, exact_from):
    # The parallelogram (lag 2) has the table's (p-1)/(3m+p-1) once its steady state hides the
    # tail's 2w W passes, m >= 2(p-1); the former order (lag 1) from m >= p.
    for p, m in GRID:
        table = ppsweep.build_schedule("zb_h2", p, m, lag=lag)
        if m >= exact_from(p):
            assert table.bubble_ratio() == pytest.approx(zb_h2.table_bubble(p, m), abs=1e-12), (p, m)


def test_zb_h2_is_a_parallelogram():
    # lag 2, unit F = I = W, free messages: no worker idles between its first and its last
    # operation (every span is 3m), so post-validated steps have no bubble; the isolated step
    # still pays the slant, (p-1) slots. The former order (lag 1) idles in its tail.
    p, m = 4, 10
    one = {"t_f": 1.0, "t_b": 2.0, "alpha": 0.0, "beta": math.inf, "msg_bytes": 0.0, "t_i": 1.0, "t_w": 1.0, "record": True}
    result = reference_simulate(ppsweep.build_schedule("zb_h2", p, m), **one)
    assert worker_spans(result) == pytest.approx([3 * m] * p) and result.t_sim == 3 * m + p - 1
    assert post_validated_step(result) == 3 * m
    assert post_validated_step(reference_simulate(ppsweep.build_schedule("zb_h2", p, m, lag=1), **one)) > 3 * m
    assert ppsweep.build_schedule("zb_h2", p, m, lag=1).peak_activations() == 2 * p - 1
    assert ppsweep.build_schedule("zb_h2", p, m).peak_activations() == 2 * p - 1


@pytest.mark.parametrize("p,m", [(2, 3), (4, 8), (5, 7)])
def test_zb_h1_is_interleaved_zb_with_one_chunk(p, m):
    assert zb_h1.build_order(p, m).orders == interleaved_zb.build_order(p, m, v=1).orders


@pytest.mark.parametrize("p,m", [(3, 6), (4, 8)])
def test_v1_of_the_looped_schedules(p, m):
    # PyTorch's Interleaved1F1B keeps two warm-up forwards per hop even with one chunk: not 1F1B.
    one = ppsweep.build_schedule("1f1b", p, m)
    assert ppsweep.build_schedule("interleaved_1f1b", p, m, v=1).orders() != one.orders()
    assert ppsweep.build_schedule("interleaved_1f1b", p, m, v=1).length == one.length
    assert ppsweep.build_schedule("looped_bfs", p, m, v=1).length == ppsweep.build_schedule("gpipe", p, m).length


def test_zb_memory_is_freed_by_w():
    # ZB-H1 keeps p microbatches in flight on every worker (W trails), 1F1B only on worker 0.
    zb = ppsweep.build_schedule("zb_h1", 4, 8).peak_activations_per_worker()
    one = ppsweep.build_schedule("1f1b", 4, 8).peak_activations_per_worker()
    assert list(zb) == [4, 4, 4, 4] and list(one) == [4, 3, 2, 1]


@pytest.mark.parametrize("name", ["interleaved_1f1b", "looped_bfs", "interleaved_zb"])
@pytest.mark.parametrize("bad", [0, 1.5, "2", True])
def test_bad_v_is_refused_with_the_field_name(name, bad):
    with pytest.raises(ValueError, match="v: must be an integer >= 1"):
        ppsweep.build_schedule(name, 4, 8, v=bad)


def test_dualpipe_formulas_written_out():
    # DeepSeek: DualPipe idles (p/2-1)(F&B + B - 3W) = p-2 slots here; p+1 activations; 2x parameters.
    table = ppsweep.build_schedule("dualpipe", 8, 16)
    assert table.length == 3 * 16 + 6 and table.peak_activations() == 9
    assert sorted(set(table.placement[0])) == sorted(set(table.placement[1])) == list(range(8))
    v = ppsweep.build_schedule("dualpipev", 4, 8)
    assert v.length == 6 * 8 + 6 and v.peak_activations() == 9  # 2(p-1) idle chunk-slots, 2p+1 chunks


def test_pair_is_one_cell_of_f_plus_b_slots():
    table = ppsweep.build_schedule("dualpipev", 2, 4)
    pairs = [item for item in table.placed_ops() if item.op.kind == Kind.FB]
    assert pairs and all(item.slots == 3 for item in pairs)
    first = pairs[0]
    assert (first.op.micro, first.op.stage, first.op.micro2, first.op.stage2) == (3, 0, 1, 3)  # PyTorch's (0F3;3B1)
