"""The layout's costs by hand (docs/contract.md §3b): TP, SP, CP and DP collectives, placement, ZeRO-1.

A small model (2 layers, h = 64, 4 heads, s = 16, vocabulary 128, G = 8) on a compute-bound
system (1 TFLOP/s, memory never the bound): every figure below is worked out from the formulas
of the contract, not read from the code.
"""

from __future__ import annotations

import pytest

from ppsweep.cost_model import ModelConfig, SystemConfig, persistent_bytes_per_worker
from ppsweep.engine.core import simulate
from ppsweep.layout import (
    Layout,
    LayoutOptions,
    all_gather_time,
    all_reduce_time,
    dp_sync_time,
    group_tier,
    hop_crossings,
    layer_times,
    layout_costs,
    message_bytes,
    reduce_scatter_time,
    simulate_layout,
    tiers_of,
    worker_node,
)
from ppsweep.tables.build import build_schedule

MODEL = ModelConfig(layers=2, hidden=64, heads=4, sequence=16, vocab=128, global_batch=8)
SYSTEM = SystemConfig(peak_flops=1e12, memory_bandwidth=1e18, bandwidth=1e8, latency=1e-5,
                      gpus_per_node=8, intra_bandwidth=1e9, intra_latency=1e-6)
TIERS = tiers_of(SYSTEM)
# One layer's forward at b = 2: 24·b·s·h² + 4·b·s²·h = 3,145,728 + 131,072 FLOPs.
FORWARD_FLOPS = 3_276_800
# Activations of one layer's output at b = 2: b·s·h values of 2 bytes.
ACTIVATION_BYTES = 4096


def test_ring_collectives_by_hand():
    # 4 ranks, 4 MB, 1 µs, 1 GB/s: all-reduce 2·3·(1 µs + 1 ms), reduce-scatter and all-gather 3·(…)
    assert all_reduce_time(4, 4e6, 1e-6, 1e9) == pytest.approx(6 * 1.001e-3, rel=1e-12)
    assert reduce_scatter_time(4, 4e6, 1e-6, 1e9) == pytest.approx(3 * 1.001e-3, rel=1e-12)
    assert all_gather_time(4, 4e6, 1e-6, 1e9) == pytest.approx(3 * 1.001e-3, rel=1e-12)
    assert all_reduce_time(1, 4e6, 1e-6, 1e9) == 0.0


def test_tp_layer_without_sequence_parallelism_by_hand():
    lt = layer_times(MODEL, SYSTEM, 2.0, Layout(tp=2, p=2), LayoutOptions(), TIERS, 8)
    compute = FORWARD_FLOPS / 2 / 1e12  # 1.6384 µs per GPU
    all_reduce = 2 * 1 * (1e-6 + ACTIVATION_BYTES / 2 / 1e9)  # NVLink tier: 6.096 µs
    assert lt.tp_f == pytest.approx(2 * all_reduce, rel=1e-12)  # 2 all-reduces in the forward
    assert lt.tp_b == pytest.approx(2 * all_reduce, rel=1e-12)  # 2 in the backward
    assert lt.f == pytest.approx(compute + 2 * all_reduce, rel=1e-12)
    assert lt.b == pytest.approx(2 * compute + 2 * all_reduce, rel=1e-12)
    assert lt.i == pytest.approx(compute + 2 * all_reduce, rel=1e-12)
    assert lt.w == pytest.approx(compute, rel=1e-12)  # the weight gradient has no collective


def test_tp_options_sequence_parallel_overlap_and_full_recompute_by_hand():
    ring = 2 * 1 * (1e-6 + ACTIVATION_BYTES / 2 / 1e9)
    compute = FORWARD_FLOPS / 2 / 1e12
    sp = layer_times(MODEL, SYSTEM, 2.0, Layout(tp=2, p=2), LayoutOptions(sequence_parallel=True), TIERS, 8)
    # all-gather + reduce-scatter: (n-1)(α + B/(nβ)) each, two pairs per pass: the all-reduce's volume
    pair = 2 * (1 * (1e-6 + ACTIVATION_BYTES / 2 / 1e9))
    assert sp.tp_f == pytest.approx(2 * pair, rel=1e-12) and pair == pytest.approx(ring, rel=1e-12)
    hidden = layer_times(MODEL, SYSTEM, 2.0, Layout(tp=2, p=2), LayoutOptions(tp_overlap=True), TIERS, 8)
    assert hidden.f == pytest.approx(max(compute, 2 * ring), rel=1e-12)
    full = layer_times(ModelConfig(**{**MODEL.__dict__, "recompute": "full"}), SYSTEM, 2.0, Layout(tp=2, p=2),
                       LayoutOptions(), TIERS, 8)
    assert full.tp_b == pytest.approx(4 * ring, rel=1e-12)  # the recomputed forward's all-reduces too
    assert full.b == pytest.approx(3 * compute + 4 * ring, rel=1e-12)
    # the stage-boundary message: b·s·h values, /tp with sequence parallelism
    assert message_bytes(MODEL, 2.0, Layout(tp=2, p=2), LayoutOptions()) == ACTIVATION_BYTES
    assert message_bytes(MODEL, 2.0, Layout(tp=2, p=2), LayoutOptions(sequence_parallel=True)) == ACTIVATION_BYTES / 2


def test_tp_group_across_nodes_takes_the_inter_tier():
    system = SystemConfig(**{**SYSTEM.__dict__, "gpus_per_node": 2})
    lt = layer_times(MODEL, system, 2.0, Layout(tp=4, p=2), LayoutOptions(), tiers_of(system), 2)
    # 4 ranks over 2 nodes: the network's latency, and 2 ranks a node, each with its own port:
    # min(NVLink 1 GB/s, 2 · 0.1 GB/s) = 0.2 GB/s
    all_reduce = 2 * 3 * (1e-5 + ACTIVATION_BYTES / 4 / 2e8)
    assert lt.tp_f == pytest.approx(2 * all_reduce, rel=1e-12)
    # 16 GPUs a node and 2 ranks a node of the DP ring: min(1 GB/s, 2 · 0.1 GB/s); one a node: 0.1 GB/s
    system = SystemConfig(**{**SYSTEM.__dict__, "gpus_per_node": 4})
    from ppsweep.layout import group_link, ranks_per_node

    two = Layout(tp=2, p=1, dp=4)  # dp stride 2: ranks 0, 2 | 4, 6 on nodes of 4
    assert ranks_per_node(two, "dp", 4) == 2 and group_link(two, "dp", 4, tiers_of(system)).beta == pytest.approx(2e8)
    one = Layout(tp=4, p=1, dp=2)
    assert ranks_per_node(one, "dp", 4) == 1 and group_link(one, "dp", 4, tiers_of(system)).beta == pytest.approx(1e8)


def test_cp_ring_exchange_by_hand():
    options = LayoutOptions(cp_overlap=False)
    lt = layer_times(MODEL, SYSTEM, 2.0, Layout(cp=2, p=2), options, TIERS, 8)
    kv = 2 * (2 * 16 / 2) * 64 * 2  # K and V of s/cp tokens, 2 bytes: 4096
    step = 1e-6 + kv / 1e9  # one ring step on NVLink
    assert lt.cp_f == pytest.approx(1 * step, rel=1e-12)
    assert lt.cp_b == pytest.approx(2 * step, rel=1e-12)  # K, V and their gradients
    assert lt.f == pytest.approx(FORWARD_FLOPS / 2 / 1e12 + step, rel=1e-12)
    overlapped = layer_times(MODEL, SYSTEM, 2.0, Layout(cp=2, p=2), LayoutOptions(), TIERS, 8)
    assert overlapped.f == pytest.approx(max(FORWARD_FLOPS / 2 / 1e12, step), rel=1e-12)


def test_dp_gradient_sync_by_hand_and_in_the_step():
    system = SystemConfig(**{**SYSTEM.__dict__, "gpus_per_node": 1})
    layout = Layout(p=2, dp=4)
    table = build_schedule("1f1b", 2, 2)  # b = G/(dp·m) = 1
    # a worker: one layer (12h² + 13h = 49,984 parameters) and the embedding or LM head (8,192), bf16
    grad_bytes = (49_984 + 8_192) * 2
    all_reduce = 2 * 3 * (1e-5 + grad_bytes / 4 / 1e8)
    lc = layout_costs(MODEL, system, table, layout, LayoutOptions())
    assert lc.tiers["dp"] == "inter"
    assert float(lc.dp_exposed) == pytest.approx(all_reduce, rel=1e-12)
    result, t_step = simulate_layout(table, lc)
    assert float(t_step) == float(result.t_sim) + float(lc.dp_exposed)
    zero1 = LayoutOptions(zero1=True)
    half = 3 * (1e-5 + grad_bytes / 4 / 1e8)
    assert float(dp_sync_time(grad_bytes, layout, zero1, TIERS["inter"])) == pytest.approx(2 * half, rel=1e-12)
    overlapped = LayoutOptions(zero1=True, grad_overlap=True)
    window = half / 2  # the reduce-scatter hides behind the last backward, the all-gather does not
    assert float(dp_sync_time(grad_bytes, layout, overlapped, TIERS["inter"], window)) == pytest.approx(half / 2 + half, rel=1e-12)
    assert float(dp_sync_time(grad_bytes, layout, LayoutOptions(grad_overlap=True), TIERS["inter"], 1.0)) == 0.0


def test_zero1_and_tp_divide_the_persistent_bytes():
    table = build_schedule("1f1b", 2, 2)
    params = 49_984 + 8_192  # per worker
    plain = persistent_bytes_per_worker(MODEL, table)
    split = persistent_bytes_per_worker(MODEL, table, tensor_parallel=2, optimizer_shards=4)
    assert plain.tolist() == [params * 16.0] * 2  # 2 + 2 + 12 bytes a parameter
    assert split.tolist() == pytest.approx([params / 2 * (2 + 2 + 12 / 4)] * 2, rel=1e-12)


def test_placement_megatron_order_and_a_custom_one():
    layout = Layout(tp=2, p=4, dp=2)
    # tp fastest, then cp, dp, pp: pipeline rank k's first GPU is rank 4k
    assert worker_node(layout, 8).tolist() == [0, 0, 1, 1]
    assert worker_node(layout, 4).tolist() == [0, 1, 2, 3]
    assert hop_crossings(layout, 8).tolist() == [0.0, 1.0, 0.0]
    assert hop_crossings(layout, 4).tolist() == [1.0, 1.0, 1.0]
    assert (group_tier(layout, "tp", 4), group_tier(layout, "dp", 4), group_tier(layout, "dp", 2)) == ("intra", "intra", "inter")
    order = ("pp", "tp", "cp", "dp")
    assert worker_node(layout, 8, order).tolist() == [0, 0, 0, 0]
    assert group_tier(layout, "tp", 4, order) == "inter"  # ranks 0 and 4


def test_hops_within_a_node_take_the_intra_tier():
    # p = 4 workers of tp = 2: with 8 GPUs a node the whole pipeline sits in one node and every
    # hop costs what it costs with the inter tier set to NVLink's values and one GPU a node.
    table = build_schedule("1f1b", 4, 8)
    layout, options = Layout(tp=2, p=4), LayoutOptions()
    one_node = layout_costs(MODEL, SYSTEM, table, layout, options)
    as_inter = SystemConfig(**{**SYSTEM.__dict__, "gpus_per_node": 1, "bandwidth": 1e9, "latency": 1e-6})
    flat = layout_costs(MODEL, as_inter, table, layout, options)
    assert one_node.worker_node.tolist() == [0, 0, 0, 0]
    a = simulate_layout(table, one_node)[1]
    b = simulate(table, flat.costs, "overlap", worker_node=[0, 1, 2, 3]).t_sim
    assert float(a) == pytest.approx(float(b), rel=1e-12)
    slow = float(simulate(table, one_node.costs, "overlap", worker_node=[0, 1, 2, 3]).t_sim)
    assert slow > float(a)  # the same costs with every hop across nodes


@pytest.mark.parametrize("name", ["1f1b", "zbv", "chimera"])
def test_a_layouts_step_equals_the_reference_simulator_in_every_mode(name):
    # tp = 2, p = 4, dp = 2 on nodes of 8 GPUs: workers on nodes [0, 0, 1, 1]; NVLink within, the
    # network across; the engine's step plus the DP time against the reference simulator's.
    from ppsweep.engine.comm import MODES
    from ppsweep.engine.reference import reference_simulate

    model = ModelConfig(**{**MODEL.__dict__, "layers": 8, "global_batch": 16})
    layout = Layout(tp=2, p=4, dp=2)
    table = build_schedule(name, 4, 8)
    lc = layout_costs(model, SYSTEM, table, layout, LayoutOptions(zero1=True, grad_overlap=True))
    assert lc.worker_node.tolist() == [0, 0, 1, 1]
    c = lc.costs
    for mode in MODES:
        _, t_step = simulate_layout(table, lc, mode)
        ref = reference_simulate(table, c.t_f[0], c.t_b[0], float(c.alpha), float(c.beta), float(c.msg_bytes), mode,
                                 t_i=c.t_i[0], t_w=c.t_w[0], grad_bytes=c.grad_bytes, alpha_intra=float(c.alpha_intra),
                                 beta_intra=float(c.beta_intra), worker_node=lc.worker_node.tolist())
        assert float(t_step) == pytest.approx(ref.t_sim + float(lc.dp_exposed), rel=1e-9), mode


def test_context_parallel_ranks_join_the_gradient_group():
    # cp = 2, dp = 2, one GPU a node: the gradients of a worker are reduced over dp·cp = 4 ranks
    system = SystemConfig(**{**SYSTEM.__dict__, "gpus_per_node": 1})
    layout = Layout(p=2, dp=2, cp=2)
    table = build_schedule("1f1b", 2, 2)  # b = G/(dp·m) = 2
    grad_bytes = (49_984 + 8_192) * 2
    lc = layout_costs(MODEL, system, table, layout, LayoutOptions())
    assert float(lc.dp_exposed) == pytest.approx(2 * 3 * (1e-5 + grad_bytes / 4 / 1e8), rel=1e-12)
    # with 8 GPUs a node the four ranks (cp stride 1, dp stride 2) share a node: NVLink
    assert group_tier(layout, ("dp", "cp"), 8) == "intra" and group_tier(layout, ("dp", "cp"), 2) == "inter"
