"""Recomputation, flash attention, embedding and LM head, stage layers and split-backward memory.

Every expected value is worked out by hand from the formulas in the README ("Cost model") on a
small model; the defaults are held to the numbers the cost model gave before these options
existed (literals computed once from that code, with their derivation).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from ppsweep import build_schedule
from ppsweep.cost_model import (
    ModelConfig,
    SystemConfig,
    activation_bytes_per_worker,
    memory_figures,
    persistent_bytes_per_worker,
    stage_costs,
    stage_layers,
)
from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import ScheduleOrder, one_replica_layout
from ppsweep.tables.table import realize
from ppsweep.tables.validate import validate_table as validate

CONF = Path(__file__).resolve().parents[1] / "conf"

# Small model: L=8, h=1024, a=16, s=2048, vocab 1000, G=32.
MODEL = ModelConfig(layers=8, hidden=1024, heads=16, sequence=2048, vocab=1000, global_batch=32)
S, H, A = 2048, 1024, 16
# Compute-bound (memory bandwidth effectively infinite) and memory-bound systems.
COMPUTE = SystemConfig(peak_flops=1e15, memory_bandwidth=1e30, bandwidth=1e10, latency=0.0)
MEMORY = SystemConfig(peak_flops=1e30, memory_bandwidth=1e12, bandwidth=1e10, latency=0.0)


def model(**changes) -> ModelConfig:
    return dataclasses.replace(MODEL, **changes)


def conf_model(name: str) -> ModelConfig:
    return ModelConfig.from_mapping(yaml.safe_load((CONF / "model" / f"{name}.yaml").read_text()))


# ---- defaults: today's numbers, bit for bit --------------------------------------------------


def test_defaults_reproduce_the_seed_paper_cost_model_bit_for_bit():
    """megatron_128l on the baseline system, values from the cost model before the new options.

    1F1B p=4 m=8: b = 256/8 = 32, 32 layers per stage.
      FLOPs of a layer's forward 32·(24·4096³ + 4·4096³) = 6.1572651e13 -> 0.061573 s at 1 PFLOP/s
      (compute-bound: its bytes, 2·(12h²+13h) + sbh(34 + 5as/h) = 1.0455e11 B, take 0.0312 s at
      3.35 TB/s); a stage's forward 32 × that = 1.97033 s; at 1e14 FLOP/s ten times that.
      Activations per layer sbh(34 + 5·32) = 536870912·194 = 104152956928 B; worker 0 holds 4
      microbatches × 32 layers: 13331578486784 B. Persistent on worker 0: (32·(12h²+13h) +
      51200·4096)·16 = 106461921280 B. Gradient bytes of a stage 32·(12h²+13h)·2 = 12888309760.
    GPipe p=4 m=16: b=16, 16 microbatches × 32 layers × 16·4096²·194... = 26663156973568 B,
      plus 106461921280: 26769618894848 B (the "26,770 GB" of issue 18).
    """
    m128 = conf_model("megatron_128l")
    base = SystemConfig.from_mapping(yaml.safe_load((CONF / "system" / "baseline.yaml").read_text()))
    table = build_schedule("1f1b", 4, 8)
    costs = stage_costs(m128, base, table, peak_flops=[1e14, 1e15])
    assert costs.t_f[0, 0] == float.fromhex("0x1.3b40815cd0628p+4")
    assert costs.t_f[1, 3] == float.fromhex("0x1.f86735614d6a6p+0")
    assert costs.t_b[1, 2] == float.fromhex("0x1.f86735614d6a6p+1")
    assert costs.t_i[1, 1] == costs.t_w[1, 1] == float.fromhex("0x1.f86735614d6a6p+0")
    assert costs.grad_bytes.tolist() == [12888309760.0] * 4
    assert costs.msg_bytes == 1073741824.0
    figures = memory_figures(m128, table, 8)
    assert (figures.peak_activation_bytes, figures.persistent_bytes) == (13331578486784.0, 106461921280.0)
    assert persistent_bytes_per_worker(m128, table).tolist() == [106461921280.0, 103106478080.0, 103106478080.0, 106461921280.0]
    assert memory_figures(m128, build_schedule("gpipe", 4, 16), 16).peak_memory_bytes == 26769618894848.0
    # Chimera 1:2 (stages of 2/3 and 4/3 of 32 layers) and Hanayo (8 stages of 16 layers).
    chimera = build_schedule("chimera", 4, 8, split="1:2")
    c = stage_costs(m128, base, chimera)
    assert c.t_f[0, 0] == float.fromhex("0x1.5044ce40de46ep+0")
    assert c.grad_bytes[0] == 8592206506.666666
    assert persistent_bytes_per_worker(m128, chimera).tolist() == [212923842560.0, 206212956160.0, 206212956160.0, 212923842560.0]
    f = memory_figures(m128, chimera, 8)
    assert (f.peak_activation_bytes, f.persistent_bytes) == (13331578486783.998, 206212956160.0)
    f = memory_figures(m128, build_schedule("hanayo", 4, 4, waves=2), 4)
    assert (f.peak_activation_bytes, f.persistent_bytes) == (26663156973568.0, 103106478080.0)
    # Fractional microbatch: 1F1B p=8 m=12, b = 21.33.
    odd = build_schedule("1f1b", 8, 12)
    assert stage_costs(m128, base, odd).t_f[0, 0] == float.fromhex("0x1.5044ce40de46ep-1")
    assert memory_figures(m128, odd, 12).peak_memory_bytes == 8942627673429.33


# ---- activations per layer ------------------------------------------------------------------


def test_activation_bytes_per_layer_for_every_recompute_and_flash_setting():
    b = 4.0
    sbh = S * b * H
    assert MODEL.layer_activation_bytes(b) == sbh * (34 + 5 * A * S / H)  # = sbh·194
    assert MODEL.layer_activation_bytes(b) == sbh * 194
    assert model(recompute="selective").layer_activation_bytes(b) == 34 * sbh
    assert model(flash_attention=True).layer_activation_bytes(b) == 34 * sbh
    assert model(recompute="full").layer_activation_bytes(b) == 2 * sbh
    assert model(recompute="full", flash_attention=True).layer_activation_bytes(b) == 2 * sbh


def test_recompute_adds_compute_to_the_backward():
    b = 4.0
    forward = b * (24 * S * H**2 + 4 * S**2 * H)
    table = build_schedule("1f1b", 4, 8)  # b = 4, two layers per stage
    t_f = 2 * forward / 1e15
    none = stage_costs(MODEL, COMPUTE, table)
    assert none.t_f[0, 0] == pytest.approx(t_f) and none.t_b[0, 0] == pytest.approx(2 * t_f)
    full = stage_costs(model(recompute="full"), COMPUTE, table)
    assert full.t_f[0, 0] == pytest.approx(t_f)
    assert full.t_b[0, 0] == pytest.approx(3 * t_f)  # one more forward in every backward
    assert full.t_i[0, 0] == pytest.approx(2 * t_f) and full.t_w[0, 0] == pytest.approx(t_f)
    selective = stage_costs(model(recompute="selective"), COMPUTE, table)
    attention_core = 2 * 4 * b * S**2 * H / 1e15  # QKᵀ and scores·V, two layers
    assert selective.t_b[0, 0] == pytest.approx(2 * t_f + attention_core)
    assert selective.t_i[0, 0] == pytest.approx(t_f + attention_core)
    flash = stage_costs(model(flash_attention=True), COMPUTE, table)
    assert flash.t_b[0, 0] == pytest.approx(2 * t_f + 2 * 2 * b * S**2 * H / 1e15)  # recomputed QKᵀ
    both = stage_costs(model(flash_attention=True, recompute="selective"), COMPUTE, table)
    assert both.t_b[0, 0] == pytest.approx(flash.t_b[0, 0])  # flash already recomputes the scores


def test_memory_traffic_seen_by_the_roofline():
    b = 4.0
    sbh = S * b * H
    weights = (12 * H**2 + 13 * H) * 2
    table = build_schedule("1f1b", 4, 8)
    none = stage_costs(MODEL, MEMORY, table)
    assert none.t_f[0, 0] == pytest.approx(2 * (weights + 194 * sbh) / 1e12)
    flash = stage_costs(model(flash_attention=True), MEMORY, table)
    assert flash.t_f[0, 0] == pytest.approx(2 * (weights + 34 * sbh) / 1e12)  # no attention scores
    # Selective stores 34sbh but its forward still writes the scores; its backward re-creates them.
    selective = stage_costs(model(recompute="selective"), MEMORY, table)
    assert selective.t_f[0, 0] == pytest.approx(none.t_f[0, 0])
    assert selective.t_b[0, 0] == pytest.approx(2 * (2 * (weights + 194 * sbh) + 5 * A * S * S * b) / 1e12)
    full = stage_costs(model(recompute="full"), MEMORY, table)
    assert full.t_b[0, 0] == pytest.approx(3 * none.t_f[0, 0])


# ---- embedding and LM head --------------------------------------------------------------------


def test_head_compute_on_first_and_last_stage():
    b = 4.0
    table = build_schedule("1f1b", 4, 8)
    plain = stage_costs(MODEL, COMPUTE, table)
    heads = stage_costs(model(head_compute=True), COMPUTE, table)
    head_flops = 2 * b * S * H * 1000  # logits
    assert heads.t_f[0, 1] == plain.t_f[0, 1] and heads.t_f[0, 2] == plain.t_f[0, 2]
    assert heads.t_f[0, 3] == pytest.approx(plain.t_f[0, 3] + head_flops / 1e15)
    assert heads.t_b[0, 3] == pytest.approx(plain.t_b[0, 3] + 2 * head_flops / 1e15)
    assert heads.t_w[0, 3] == pytest.approx(plain.t_w[0, 3] + head_flops / 1e15)
    assert heads.t_f[0, 0] == pytest.approx(plain.t_f[0, 0])  # a lookup: no FLOPs, bytes only
    memory = stage_costs(model(head_compute=True), MEMORY, table)
    base = stage_costs(MODEL, MEMORY, table)
    assert memory.t_f[0, 0] == pytest.approx(base.t_f[0, 0] + 2 * b * S * H * 2 / 1e12)  # read and write b·s rows
    assert memory.t_f[0, 3] == pytest.approx(base.t_f[0, 3] + (1000 * H * 2 + 4 * b * S * 1000) / 1e12)
    # Gradients of the embedding and head are synchronised with their stages.
    assert heads.grad_bytes[0] == pytest.approx(plain.grad_bytes[0] + 1000 * H * 2)
    # Activations: dropout mask sbh on stage 0, 4sbh(1 + vocab/h) on stage S-1 (Korthikanti 4.3).
    layer = MODEL.layer_activation_bytes(b)
    with_heads = activation_bytes_per_worker(model(head_compute=True), table)
    assert with_heads[0] == pytest.approx(4 * (2 * layer + S * b * H))  # 4 microbatches held
    assert with_heads[3] == pytest.approx(1 * (2 * layer + 4 * S * b * H * (1 + 1000 / H)))


def test_balanced_stage_layers_equalise_stage_compute():
    m = model(head_compute=True, stage_layers="balanced")
    table = build_schedule("1f1b", 4, 8)
    head = 2 * 1000 / (24 * H + 4 * S)  # LM head forward in layers: 2000/32768 = 0.06103515625
    share = (8 + head) / 4
    assert stage_layers(m, table) == pytest.approx([share, share, share, share - head])
    costs = stage_costs(m, COMPUTE, table)
    assert costs.t_f[0] == pytest.approx(np.full(4, costs.t_f[0, 0]))  # every stage equal
    # Without head compute there is nothing to balance.
    assert stage_layers(model(stage_layers="balanced"), table).tolist() == [2.0, 2.0, 2.0, 2.0]


def test_explicit_stage_layers():
    m = model(stage_layers=[3, 2, 2, 1])
    table = build_schedule("1f1b", 4, 8)
    assert stage_layers(m, table).tolist() == [3.0, 2.0, 2.0, 1.0]
    per_param = 16
    assert persistent_bytes_per_worker(m, table)[3] == pytest.approx((1 * MODEL.params_per_layer + 1000 * H) * per_param)
    assert stage_costs(m, COMPUTE, table).t_f[0, 0] == pytest.approx(1.5 * stage_costs(MODEL, COMPUTE, table).t_f[0, 0])
    with pytest.raises(ValueError, match="model.stage_layers: 4 entries, but 1f1b at p=8 has 8 stages"):
        stage_layers(m, build_schedule("1f1b", 8, 8))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"recompute": "some"}, "model.recompute: must be one of none, selective, full"),
        ({"flash_attention": "yes"}, "model.flash_attention: must be true or false"),
        ({"head_compute": 1}, "model.head_compute: must be true or false"),
        ({"stage_layers": "even"}, "model.stage_layers: must be one of uniform, balanced"),
        ({"stage_layers": [4, 3]}, "model.stage_layers: an explicit list must sum to model.layers = 8"),
        ({"stage_layers": [9, -1]}, r"model.stage_layers\[1\]"),
        ({"kv_heads": 3}, "model.kv_heads: must divide model.heads = 16"),
        ({"ffn_hidden": 0}, "model.ffn_hidden"),
        ({"mlp": "relu"}, "model.mlp: must be one of gelu, swiglu"),
        ({"norm": "batchnorm"}, "model.norm: must be one of layernorm, rmsnorm"),
        ({"biases": "no"}, "model.biases: must be true or false"),
    ],
)
def test_bad_memory_options(changes, message):
    base = dict(layers=8, hidden=1024, heads=16, sequence=2048, vocab=1000, global_batch=32)
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_mapping({**base, **changes})


# ---- peaks follow the table: split backward, V shape, two replicas -----------------------------


def split_order(placement: list[int]) -> ScheduleOrder:
    """p=2, m=2, two stages, split backward; W deferred to the end.

    ASAP slots (F, I, W one slot each):
      w0: F(0,0)@0 F(1,0)@1 I(0,0)@3 I(1,0)@5 W(0,0)@6 W(1,0)@7
      w1: F(0,1)@1 I(0,1)@2 F(1,1)@3 I(1,1)@4 W(0,1)@5 W(1,1)@6
    """
    F, I, W = Kind.F, Kind.I, Kind.W
    orders = (
        (Op(F, 0, 0), Op(F, 1, 0), Op(I, 0, 0), Op(I, 1, 0), Op(W, 0, 0), Op(W, 1, 0)),
        (Op(F, 0, 1), Op(I, 0, 1), Op(F, 1, 1), Op(I, 1, 1), Op(W, 0, 1), Op(W, 1, 1)),
    )
    return ScheduleOrder("hand_zb", 2, 2, 2, orders, split_backward=True, **one_replica_layout(2, 2, 2, placement))


@pytest.mark.parametrize("recompute, pending_values", [("none", 9), ("full", 16)])
def test_split_backward_holds_activations_until_w_and_gradients_from_i(recompute, pending_values):
    table = realize(split_order([0, 1]))
    validate(table)
    m = model(recompute=recompute)
    b = 16.0  # G/m = 32/2; four layers per stage
    act = 4 * m.layer_activation_bytes(b)
    pending = 4 * pending_values * S * b * H * 2
    # w0 holds both activations from slot 1 and both pending gradients from slot 5 (I(1,0))
    # until W(0,0) ends at slot 7: 2a + 2g. w1: 2a from slot 3, 2g from slot 4 (I(1,1)) to 6.
    assert activation_bytes_per_worker(m, table) == pytest.approx([2 * act + 2 * pending] * 2)
    # The activation held per stage: four layers of 194sbh (none) or 2sbh (full).
    assert act == pytest.approx(4 * (2 if recompute == "full" else 194) * S * b * H)


def test_v_shaped_placement_puts_embedding_and_head_on_one_worker():
    table = realize(ScheduleOrder(
        "hand_v", 2, 1, 4,
        ((Op(Kind.F, 0, 0), Op(Kind.F, 0, 3), Op(Kind.B, 0, 3), Op(Kind.B, 0, 0)),
         (Op(Kind.F, 0, 1), Op(Kind.F, 0, 2), Op(Kind.B, 0, 2), Op(Kind.B, 0, 1))),
        **one_replica_layout(2, 1, 4, [0, 1, 1, 0]),
    ))
    validate(table)
    per_param = 16
    persistent = persistent_bytes_per_worker(MODEL, table)
    assert persistent.tolist() == pytest.approx([(4 * MODEL.params_per_layer + 2 * 1000 * H) * per_param,
                                                 4 * MODEL.params_per_layer * per_param])
    balanced = model(head_compute=True, stage_layers="balanced")
    head = 2 * 1000 / (24 * H + 4 * S)
    # Worker 0 holds stages 0 and 3: its layers drop by the head's share, its time equals worker 1's.
    layers = stage_layers(balanced, table)
    assert layers[0] + layers[3] == pytest.approx(4 - head / 2)
    t_f = stage_costs(balanced, COMPUTE, table).t_f[0]
    assert t_f[0] + t_f[3] == pytest.approx(t_f[1] + t_f[2])


def test_two_replicas_count_parameters_twice():
    """Chimera p=4: worker 0 holds stage 0 of one replica and stage 3 of the other (DualPipe alike)."""
    table = build_schedule("chimera", 4, 4)
    per_param = 16
    ends = (2 * 2 * MODEL.params_per_layer + 2 * 1000 * H) * per_param
    middle = 2 * 2 * MODEL.params_per_layer * per_param
    assert persistent_bytes_per_worker(MODEL, table).tolist() == pytest.approx([ends, middle, middle, ends])


def test_memory_figures_refuse_a_foreign_m():
    with pytest.raises(ValueError, match="m: memory_figures got m=4 for a table of m=8"):
        memory_figures(MODEL, build_schedule("1f1b", 4, 8), 4)
