"""The cost model (docs/contract.md §3) on numbers worked out by hand."""

from __future__ import annotations

import pytest

from ppsweep import build_schedule
from ppsweep.cost_model import ModelConfig, SystemConfig, layer_time, memory_figures, persistent_bytes_per_worker, stage_costs

MODEL = ModelConfig(layers=8, hidden=1024, heads=16, sequence=2048, vocab=1000, global_batch=32)
SYSTEM = SystemConfig(peak_flops=1e15, memory_bandwidth=1e14, bandwidth=1e10, latency=1e-6, compute_efficiency=0.5)


def test_roofline_layer_time_and_stage_costs():
    b = 4.0
    flops = 24 * b * 2048 * 1024**2 + 4 * b * 2048**2 * 1024
    assert MODEL.layer_forward_flops(b) == flops
    assert layer_time(MODEL, SYSTEM, b) == pytest.approx(flops / 0.5e15)  # compute-bound
    table = build_schedule("1f1b", 4, 8)  # b = 32 / 8 = 4, two layers per stage
    costs = stage_costs(MODEL, SYSTEM, table)
    assert costs.t_f.shape == (1, 4)
    assert costs.t_f[0, 0] == pytest.approx(2 * flops / 0.5e15)
    assert costs.t_b[0, 0] == pytest.approx(2 * costs.t_f[0, 0])
    assert costs.msg_bytes == 4 * 2048 * 1024 * 2


def test_memory_bound_layer():
    slow_memory = SystemConfig(peak_flops=1e18, memory_bandwidth=1e9, bandwidth=1e10, latency=0.0)
    b = 1.0
    assert layer_time(MODEL, slow_memory, b) == pytest.approx((2 * (12 * 1024**2 + 13 * 1024) + 2048 * 1024 * (34 + 5 * 16 * 2048 / 1024)) / 1e9)


def test_memory_figures_of_1f1b():
    table = build_schedule("1f1b", 4, 8)
    figures = memory_figures(MODEL, table, 8)
    per_stage_activation = 2 * 2048 * 4.0 * 1024 * (34 + 5 * 16 * 2048 / 1024)  # 2 layers × s·b·h·(34 + 5·a·s/h)
    # Worker 0 holds 4 activations and the embedding: it is the bottleneck.
    assert figures.peak_activation_bytes == pytest.approx(4 * per_stage_activation)
    per_param = 2 + 2 + 12
    params = 2 * (12 * 1024**2 + 13 * 1024) + 1000 * 1024
    assert figures.persistent_bytes == pytest.approx(params * per_param)
    assert persistent_bytes_per_worker(MODEL, table)[1] == pytest.approx(2 * (12 * 1024**2 + 13 * 1024) * per_param)


@pytest.mark.parametrize(
    "values, field",
    [
        ({"layers": 0}, "model.layers"),
        ({"hidden": -1}, "model.hidden"),
        ({"colour": 1}, "model.colour"),
    ],
)
def test_bad_model_fields(values, field):
    base = dict(layers=8, hidden=1024, heads=16, sequence=2048, vocab=1000, global_batch=32)
    with pytest.raises(ValueError, match=field):
        ModelConfig.from_mapping({**base, **values})


def test_bad_system_fields():
    base = dict(peak_flops=1e15, memory_bandwidth=1e12, bandwidth=1e10, latency=1e-6)
    with pytest.raises(ValueError, match="system.bandwidth"):
        SystemConfig.from_mapping({**base, "bandwidth": 0})
    with pytest.raises(ValueError, match="system.latency"):
        SystemConfig.from_mapping({**base, "latency": -1e-6})
    with pytest.raises(ValueError, match="system.compute_efficiency"):
        SystemConfig.from_mapping({**base, "compute_efficiency": 1.5})
    with pytest.raises(ValueError, match="system.peak_flops: missing"):
        SystemConfig.from_mapping({k: v for k, v in base.items() if k != "peak_flops"})


def test_compute_axis_scales_memory_bandwidth_with_peak():
    slow_memory = SystemConfig(peak_flops=1e15, memory_bandwidth=1e9, bandwidth=1e10, latency=0.0)
    b = 1.0
    base = layer_time(MODEL, slow_memory, b)  # memory-bound
    assert layer_time(MODEL, slow_memory, b, peak_flops=1e16) == pytest.approx(base / 10)
