"""The cost model (SPEC §3) against numbers derived by hand from the SPEC's formulas.

Model: L = 8 layers, h = 1024, a = 16 heads, s = 2048, V = 1000, G = 32, bf16 (2 bytes), optimizer
12 bytes per parameter. With m = 8 microbatches, b = G/m = 4 sequences. Every expected value below
is written out from the formulas; none comes from ``ppsweep.cost_model``.
"""

from __future__ import annotations

import pytest

from ppsweep import build_schedule
from ppsweep.cost_model import ModelConfig, SystemConfig, layer_time, memory_figures, persistent_bytes_per_worker, stage_costs

MODEL = ModelConfig(layers=8, hidden=1024, heads=16, sequence=2048, vocab=1000, global_batch=32)
SYSTEM = SystemConfig(peak_flops=1e15, memory_bandwidth=1e14, bandwidth=1e10, latency=1e-6, compute_efficiency=0.5)

# One layer, by hand.
PARAMS_PER_LAYER = 12 * 1024**2 + 13 * 1024  # = 12,596,224
assert PARAMS_PER_LAYER == 12_596_224
FLOPS_B4 = 4 * (24 * 2048 * 1024**2 + 4 * 2048**2 * 1024)  # 24·b·s·h² + 4·b·s²·h at b = 4
assert FLOPS_B4 == 274_877_906_944
ACTIVATION_B4 = 2048 * 4 * 1024 * (34 + 5 * 16 * 2048 / 1024)  # s·b·h·(34 + 5·a·s/h) = s·b·h·194
assert ACTIVATION_B4 == 1_627_389_952
FORWARD_BYTES_B4 = PARAMS_PER_LAYER * 2 + ACTIVATION_B4  # weights read + activations stored
assert FORWARD_BYTES_B4 == 1_652_582_400
MESSAGE_B4 = 4 * 2048 * 1024 * 2  # b·s·h values, 2 bytes each
assert MESSAGE_B4 == 16_777_216


def test_one_layer():
    assert MODEL.params_per_layer == PARAMS_PER_LAYER
    assert MODEL.layer_forward_flops(4.0) == FLOPS_B4
    assert MODEL.layer_activation_bytes(4.0) == ACTIVATION_B4
    assert MODEL.layer_forward_bytes(4.0) == FORWARD_BYTES_B4
    assert MODEL.message_bytes(4.0) == MESSAGE_B4


def test_one_layer_roofline_both_sides():
    # Compute side: 274,877,906,944 FLOPs at 0.5 × 1e15 FLOP/s = 0.549755813888 ms (memory side:
    # 1,652,582,400 B at 1e14 B/s = 0.0165 ms, smaller).
    assert layer_time(MODEL, SYSTEM, 4.0) == pytest.approx(274_877_906_944 / 0.5e15, rel=1e-15)
    # Memory side: at b = 1, 2·12,596,224 + 2048·1024·194 = 432,039,936 bytes at 1e9 B/s.
    slow_memory = SystemConfig(peak_flops=1e18, memory_bandwidth=1e9, bandwidth=1e10, latency=0.0)
    assert layer_time(MODEL, slow_memory, 1.0) == pytest.approx(0.432039936, rel=1e-15)


def test_one_stage():
    # 1F1B at p = 4: 2 layers per stage, b = 4.
    costs = stage_costs(MODEL, SYSTEM, build_schedule("1f1b", 4, 8))
    t_f = 2 * 274_877_906_944 / 0.5e15
    assert costs.t_f.shape == (1, 4)
    assert costs.t_f[0].tolist() == pytest.approx([t_f] * 4, rel=1e-15)
    assert costs.t_b[0].tolist() == pytest.approx([2 * t_f] * 4, rel=1e-15)
    assert costs.t_i[0].tolist() == pytest.approx([t_f] * 4, rel=1e-15)
    assert costs.t_w[0].tolist() == pytest.approx([t_f] * 4, rel=1e-15)
    assert costs.msg_bytes == 16_777_216
    # Gradient bytes of one stage: 2 layers × 12,596,224 parameters × 2 bytes.
    assert costs.grad_bytes.tolist() == [50_384_896] * 4


def test_one_stage_of_chimera_and_a_compute_axis():
    # Chimera at p = 4 has 4 stages per replica, 2 layers each: the same gradient bytes per stage.
    costs = stage_costs(MODEL, SYSTEM, build_schedule("chimera", 4, 8))
    assert costs.grad_bytes.tolist() == [50_384_896] * 4
    # A compute axis of two peaks: the stage's forward scales as 1/peak.
    costs = stage_costs(MODEL, SYSTEM, build_schedule("1f1b", 4, 8), peak_flops=[1e15, 4e15])
    assert costs.t_f[:, 0].tolist() == pytest.approx([2 * 274_877_906_944 / 0.5e15, 2 * 274_877_906_944 / 2e15], rel=1e-15)


def test_persistent_and_peak_memory_of_1f1b():
    table = build_schedule("1f1b", 4, 8)
    per_param = 2 + 2 + 12  # weights, gradients, optimizer state
    # Worker 0: two layers and the embedding (V·h); worker 3: two layers and the LM head.
    edge = (2 * 12_596_224 + 1000 * 1024) * per_param
    middle = 2 * 12_596_224 * per_param
    assert edge == 419_463_168 and middle == 403_079_168
    assert persistent_bytes_per_worker(MODEL, table).tolist() == [edge, middle, middle, edge]
    # Worker 0 holds p = 4 microbatches' activations of its 2 layers at its peak.
    figures = memory_figures(MODEL, table, 8)
    assert figures.peak_activation_bytes == 4 * 2 * 1_627_389_952 == 13_019_119_616
    assert figures.persistent_bytes == edge
    assert figures.peak_memory_bytes == 13_438_582_784
