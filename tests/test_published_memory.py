"""The memory model against published numbers, from the model configs in conf/model/ alone.

Sources:
- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
  (arXiv:2205.05198, MLSys 2023): Table 2 (activation bytes per layer), Table 3 (the 22B,
  175B, 530B and 1T models, tensor-parallel size 8), section 4.2 (selective recomputation: 70 %
  less activation memory for GPT-3, 65 % for MT-NLG, at 2.7 % and 1.6 % FLOPs overhead),
  the pipeline paragraph of section 4.2 (1F1B's first stage stores ``sbhL(34 + 5as/h)/t``
  whatever p), and the abstract ("reduces activation memory by 5x").
- Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM" (arXiv:2104.04473), Table 1: 145.6B, 310.1B, 529.6B and 1008.0B parameters with
  ``P = 12lh²(1 + 13/(12h) + (V + s)/(12lh))`` (tied embedding, learned positions).
- Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1: GPT-3 175.0B.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from ppsweep import build_schedule
from ppsweep.cost_model import ModelConfig, activation_bytes_per_worker

CONF = Path(__file__).resolve().parents[1] / "conf" / "model"
KORTHIKANTI = ("gpt_22b", "gpt3_175b", "mt_nlg_530b", "gpt_1t")
T = 8  # their tensor-parallel size (Table 3)


def load(name: str, **changes) -> ModelConfig:
    model = ModelConfig.from_mapping(yaml.safe_load((CONF / f"{name}.yaml").read_text()))
    return dataclasses.replace(model, **changes)


def per_sbh(model: ModelConfig, **kwargs) -> float:
    """Activation bytes of one layer at b = 1 in units of s·b·h (Table 2's form)."""
    return model.layer_activation_bytes(1.0, **kwargs) / (model.sequence * model.hidden)


# Table 2 at t = 8, worked out by hand from the Table 3 configs (5as/(ht): 22B 13.33, 175B 10,
# 530B 8, 1T 8):  tensor parallel 10 + 24/t + 5as/(ht); + sequence parallel 34/t + 5as/(ht);
# + selective 10 + 24/t; sequence parallel + selective 34/t; full recomputation 2.
TABLE2 = {
    "gpt_22b": (10 + 3 + 40 / 3, 4.25 + 40 / 3, 13.0, 4.25, 2.0),
    "gpt3_175b": (23.0, 14.25, 13.0, 4.25, 2.0),
    "mt_nlg_530b": (21.0, 12.25, 13.0, 4.25, 2.0),
    "gpt_1t": (21.0, 12.25, 13.0, 4.25, 2.0),
}


@pytest.mark.parametrize("name", KORTHIKANTI)
def test_korthikanti_table2_per_layer_activations(name):
    baseline, sp, selective, sp_selective, full = TABLE2[name]
    none = load(name)
    sel = load(name, recompute="selective")
    assert per_sbh(none, tensor_parallel=T) == pytest.approx(baseline)
    assert per_sbh(none, tensor_parallel=T, sequence_parallel=True) == pytest.approx(sp)
    assert per_sbh(sel, tensor_parallel=T) == pytest.approx(selective)
    assert per_sbh(sel, tensor_parallel=T, sequence_parallel=True) == pytest.approx(sp_selective)
    assert per_sbh(load(name, recompute="full"), tensor_parallel=T) == pytest.approx(full)
    # Without tensor parallelism (Table 2, first row): 34 + 5as/h, selective 34.
    assert per_sbh(none) == pytest.approx(34 + 5 * none.heads * none.sequence / none.hidden)
    assert per_sbh(sel) == 34.0


def test_korthikanti_five_times_less_activation_memory():
    """Abstract: sequence parallelism + selective recomputation need about 5x less than the baseline."""
    ratios = [
        per_sbh(load(n), tensor_parallel=T) / per_sbh(load(n, recompute="selective"), tensor_parallel=T, sequence_parallel=True)
        for n in KORTHIKANTI
    ]
    assert ratios == pytest.approx([6.196, 5.412, 4.941, 4.941], abs=1e-3)
    assert all(4.5 < r < 6.5 for r in ratios)


@pytest.mark.parametrize("name, saving, overhead", [("gpt3_175b", 0.70, 0.027), ("mt_nlg_530b", 0.65, 0.016)])
def test_korthikanti_selective_recompute_saving_and_flops(name, saving, overhead):
    """Section 4.2: 70 % (GPT-3) and 65 % (MT-NLG) less activation memory, 2.7 % and 1.6 % FLOPs."""
    none, sel = load(name), load(name, recompute="selective")
    assert 1 - sel.layer_activation_bytes(1.0) / none.layer_activation_bytes(1.0) == pytest.approx(saving, abs=0.005)
    assert sel.layer_recompute_flops(1.0) / sel.layer_forward_flops(1.0) == pytest.approx(overhead, abs=0.0005)


@pytest.mark.parametrize("p", [4, 8])
def test_korthikanti_1f1b_first_stage_holds_a_whole_model_of_activations(p):
    """1F1B's first stage stores p microbatches of L/p layers: sbhL(34 + 5as/h), whatever p (b = 1)."""
    model = load("gpt3_175b")  # global batch 64: m = 64 gives b = 1
    table = build_schedule("1f1b", p, 64)
    sbh = model.sequence * model.hidden
    expected = {"none": 114, "selective": 34, "full": 2}  # 34 + 5·96·2048/12288 = 114
    for mode, per_layer in expected.items():
        first = activation_bytes_per_worker(dataclasses.replace(model, recompute=mode), table)[0]
        assert first == pytest.approx(model.layers * per_layer * sbh)


@pytest.mark.parametrize(
    "layers, hidden, published",
    [(80, 12288, 145.6e9), (96, 16384, 310.1e9), (105, 20480, 529.6e9), (128, 25600, 1008.0e9)],
)
def test_megatron_parameter_counts(layers, hidden, published):
    """Narayanan et al. 2021, Table 1: L·(12h² + 13h) + (V + s)·h with V = 51200, s = 2048."""
    model = dataclasses.replace(load("gpt_1t"), layers=layers, hidden=hidden)
    total = model.layers * model.params_per_layer + (model.vocab + model.sequence) * model.hidden
    assert total == pytest.approx(published, abs=0.05e9)


def test_gpt3_175b_parameter_count():
    """Brown et al. 2020: 175.0B. Ours, with an untied LM head and no position table: 175.2B."""
    model = load("gpt3_175b")
    assert model.total_params == 96 * (12 * 12288**2 + 13 * 12288) + 2 * 51200 * 12288
    assert model.total_params == pytest.approx(175.0e9, rel=0.002)


def llama(layers: int, hidden: int, heads: int, kv_heads: int, ffn: int) -> ModelConfig:
    return ModelConfig(layers=layers, hidden=hidden, heads=heads, sequence=4096, vocab=32000, global_batch=1,
                       ffn_hidden=ffn, kv_heads=kv_heads, mlp="swiglu", biases=False, norm="rmsnorm")


def test_llama2_parameter_counts():
    """Touvron et al. 2023 (Llama 2), Table 1 / model cards: 7B (6.74B), 13B (13.02B), 70B (68.98B with GQA, 8 KV heads).

    Per layer 2h² + 2h·h_kv + 3hf + 2h (SwiGLU, no biases, RMSNorm); untied embedding and head
    (32000·h each); the final norm (h) is the only part the model leaves out.
    """
    for model, published in (
        (llama(32, 4096, 32, 32, 11008), 6_738_415_616),
        (llama(40, 5120, 40, 40, 13824), 13_015_864_320),
        (llama(80, 8192, 64, 8, 28672), 68_976_648_192),
    ):
        assert model.total_params + model.hidden == published


def test_llama_layer_activations_and_flops():
    """The 34 of Korthikanti et al. generalised: 7h + 4h_kv + (3h + 6f) + 4h per token (SwiGLU), by hand."""
    model = llama(80, 8192, 64, 8, 28672)
    h, kv, f = 8192, 1024, 28672
    assert model.activation_values_per_layer == (7 * h + 4 * kv + 3 * h + 6 * f + 4 * h) / h  # = 35.5
    assert model.layer_forward_flops(1.0) == 2 * 4096 * (2 * h * h + 2 * h * kv + 3 * h * f) + 4 * 4096**2 * h
    assert model.layer_pending_bytes(1.0) == (h + 2 * kv + h + 2 * f + h) * 4096 * 2
