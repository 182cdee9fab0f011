"""The model: :class:`ModelConfig`, a Megatron-style decoder, and the FLOPs and bytes of its parts
(docs/contract.md §3; the choices where the contract is silent: :mod:`ppsweep.cost_model`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ppsweep.cost_model.fields import config_from_mapping, require_number


#: Accepted values of ``model.recompute``.
RECOMPUTE_MODES = ("none", "selective", "full")
#: Accepted values of ``model.mlp`` and ``model.norm``.
MLP_KINDS = ("gelu", "swiglu")
NORM_KINDS = ("layernorm", "rmsnorm")
#: Accepted names of ``model.stage_layers`` (besides an explicit list of layers per stage).
STAGE_LAYER_RULES = ("uniform", "balanced")


@dataclass(frozen=True)
class ModelConfig:
    """A Megatron-style decoder (docs/contract.md §3).

    Attributes:
      name: label.
      layers: ``L`` transformer layers.
      hidden: ``h`` hidden size.
      heads: ``a`` attention heads.
      sequence: ``s`` tokens per sequence.
      vocab: vocabulary size.
      global_batch: ``G`` sequences per step (fixed; microbatch ``b = G/m``).
      bytes_per_value: bytes of one activation/weight/gradient value (bf16 = 2).
      optimizer_bytes_per_param: optimizer state bytes per parameter.
      recompute: activation recomputation, ``none`` | ``selective`` | ``full`` (Korthikanti et al.).
      flash_attention: True: the attention scores are never stored (nor moved through memory).
      head_compute: True: the embedding (stage 0) and the LM head with its loss (stage ``S-1``)
        cost time and hold activations; False (the seed paper's model): memory only.
      stage_layers: layers per stage: ``uniform`` (the schedule's own split), ``balanced``
        (stage 0 and ``S-1`` give up layers for the embedding's and LM head's FLOPs), or an
        explicit list of ``S`` layer counts summing to ``layers``.
      ffn_hidden: ``f``, the MLP's inner size (None: ``4h``).
      kv_heads: key/value heads (None: ``heads``; fewer: grouped-query attention).
      mlp: ``gelu`` (two matrices) or ``swiglu`` (gated: three matrices, Llama-style).
      biases: True: every linear layer has a bias (GPT); False: none (Llama).
      norm: ``layernorm`` (weight and bias) or ``rmsnorm`` (weight only).
    """

    layers: int
    hidden: int
    heads: int
    sequence: int
    vocab: int
    global_batch: int
    bytes_per_value: float = 2.0
    optimizer_bytes_per_param: float = 12.0
    recompute: str = "none"
    flash_attention: bool = False
    head_compute: bool = False
    stage_layers: Any = "uniform"
    ffn_hidden: int | None = None
    kv_heads: int | None = None
    mlp: str = "gelu"
    biases: bool = True
    norm: str = "layernorm"
    name: str = "model"

    def __post_init__(self) -> None:
        if isinstance(self.stage_layers, (list, tuple)):  # hashable, whatever the caller passed
            object.__setattr__(self, "stage_layers", tuple(self.stage_layers))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "ModelConfig":
        """Validated config from a mapping (e.g. Hydra's ``cfg.model``)."""
        return config_from_mapping(cls, "model", values)

    def check(self) -> None:
        """Raise ValueError naming the first field out of range."""
        for name in ("layers", "hidden", "heads", "sequence", "vocab", "global_batch"):
            require_number(f"model.{name}", getattr(self, name), positive=True)
        for name in ("bytes_per_value", "optimizer_bytes_per_param"):
            require_number(f"model.{name}", getattr(self, name), positive=False)
        if self.recompute not in RECOMPUTE_MODES:
            raise ValueError(f"model.recompute: must be one of {', '.join(RECOMPUTE_MODES)}, got {self.recompute!r}")
        for name in ("ffn_hidden", "kv_heads"):
            if getattr(self, name) is not None:
                require_number(f"model.{name}", getattr(self, name), positive=True)
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(f"model.kv_heads: must divide model.heads = {self.heads}, got {self.kv_heads!r}")
        for name, accepted in (("mlp", MLP_KINDS), ("norm", NORM_KINDS)):
            if getattr(self, name) not in accepted:
                raise ValueError(f"model.{name}: must be one of {', '.join(accepted)}, got {getattr(self, name)!r}")
        for name in ("flash_attention", "head_compute", "biases"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"model.{name}: must be true or false, got {getattr(self, name)!r}")
        rule = self.stage_layers
        if isinstance(rule, tuple):
            for k, value in enumerate(rule):
                require_number(f"model.stage_layers[{k}]", value, positive=False)
            if not rule or not np.isclose(sum(rule), self.layers, rtol=1e-9, atol=0.0):
                raise ValueError(f"model.stage_layers: an explicit list must sum to model.layers = {self.layers}, got {list(rule)}")
        elif rule not in STAGE_LAYER_RULES:
            raise ValueError(
                f"model.stage_layers: must be one of {', '.join(STAGE_LAYER_RULES)} or a list of layers per stage, got {rule!r}"
            )

    # ---- parameters ------------------------------------------------------------------------
    @property
    def ffn(self) -> float:
        """``f``, the MLP's inner size (``4h`` unless ``ffn_hidden`` is given)."""
        return float(4 * self.hidden if self.ffn_hidden is None else self.ffn_hidden)

    @property
    def kv_hidden(self) -> float:
        """Width of the keys (and of the values): ``h · kv_heads / heads``."""
        return float(self.hidden if self.kv_heads is None else self.hidden // self.heads * self.kv_heads)

    @property
    def matmul_params_per_layer(self) -> float:
        """Weights of a layer's matrices: ``2h² + 2h·h_kv`` (attention) + ``2hf`` (GeLU) or ``3hf`` (SwiGLU)."""
        h, f = float(self.hidden), self.ffn
        return 2.0 * h * h + 2.0 * h * self.kv_hidden + (3.0 if self.mlp == "swiglu" else 2.0) * h * f

    @property
    def params_per_layer(self) -> float:
        """Parameters per transformer layer; ``12h² + 13h`` for the default GPT layer.

        Matrices (:attr:`matmul_params_per_layer`), biases (``h + 2h_kv``, ``h``, ``f`` or
        ``2f``, ``h``) unless ``biases=False``, and two norms of ``2h`` (layernorm) or ``h``.
        """
        h, f = float(self.hidden), self.ffn
        biases = (h + 2.0 * self.kv_hidden) + h + (2.0 if self.mlp == "swiglu" else 1.0) * f + h
        norms = 2.0 * (2.0 * h if self.norm == "layernorm" else h)
        return self.matmul_params_per_layer + (biases if self.biases else 0.0) + norms

    @property
    def activation_values_per_layer(self) -> float:
        """Korthikanti's ``34`` generalised: bytes per token and ``h`` a layer stores besides the scores.

        Attention ``7h + 4h_kv`` (QKV input, Q, K and V, projection input at 2 bytes, dropout
        mask at 1), MLP ``3h + 4f`` (GeLU: fc1 input, GeLU input, fc2 input, mask) or ``3h + 6f``
        (SwiGLU: gate and up outputs too), norms ``4h``; divided by ``h``. 34 for the GPT layer.
        """
        h, f = float(self.hidden), self.ffn
        mlp = 3.0 * h + (6.0 if self.mlp == "swiglu" else 4.0) * f
        return (7.0 * h + 4.0 * self.kv_hidden + mlp + 4.0 * h) / h

    @property
    def embedding_params(self) -> float:
        """``vocab · h`` parameters of the embedding (the untied LM head has as many)."""
        return float(self.vocab * self.hidden)

    @property
    def total_params(self) -> float:
        """Parameters of the whole model: ``L`` layers, the embedding and the untied LM head."""
        return self.layers * self.params_per_layer + 2.0 * self.embedding_params

    def microbatch_size(self, m: Any) -> Any:
        """``b = G / m`` sequences per microbatch."""
        return self.global_batch / np.asarray(m, dtype=float)

    # ---- one transformer layer -------------------------------------------------------------
    def layer_forward_flops(self, b: Any) -> Any:
        """``24·b·s·h² + 4·b·s²·h`` FLOPs of one layer's forward for ``b`` sequences (``2·b·s`` per matrix weight)."""
        s, h = self.sequence, self.hidden
        return b * (2.0 * s * self.matmul_params_per_layer + 4.0 * s * s * h)

    def layer_recompute_flops(self, b: Any) -> Any:
        """FLOPs one layer's backward (its I where split) adds for recomputation.

        ``full``: one more forward; ``selective``: the attention core (``QKᵀ`` and scores·V,
        ``4bs²h``); flash attention: its backward's recomputation of ``QKᵀ`` (``2bs²h``), which
        also covers ``selective``.
        """
        s, h = self.sequence, self.hidden
        flash = 2.0 * b * s * s * h if self.flash_attention else 0.0 * b
        if self.recompute == "full":
            return self.layer_forward_flops(b) + flash
        if self.recompute == "selective" and not self.flash_attention:
            return 4.0 * b * s * s * h
        return flash

    def layer_produced_bytes(self, b: Any) -> Any:
        """Bytes of the tensors one layer's forward produces: ``sbh(34 + 5as/h)``, flash ``34sbh``."""
        s, h, a, c = self.sequence, self.hidden, self.heads, self.activation_values_per_layer
        if self.flash_attention:
            return c * s * b * h
        return s * b * h * (c + 5.0 * a * s / h)

    def layer_activation_bytes(self, b: Any, tensor_parallel: int = 1, sequence_parallel: bool = False) -> Any:
        """Bytes of activations one layer stores for its backward (Korthikanti et al. 2022, Table 2).

        Args:
          b: microbatch size (broadcasts).
          tensor_parallel: ``t``, the tensor-parallel degree (1 in ppsweep's pipelines; the
            argument reproduces the paper's per-GPU figures).
          sequence_parallel: True: the layer norms and dropouts are split ``t`` ways too.

        Returns:
          ``none`` ``sbh(10 + 24/t + 5as/(ht))`` (``sbh(34 + 5as/h)/t`` with sequence
          parallelism); ``selective`` or flash attention the same without the ``5as/(ht)``
          term; ``full`` ``2sbh`` (the layer's input; ``/t`` with sequence parallelism).
        """
        s, h, a, c = self.sequence, self.hidden, self.heads, self.activation_values_per_layer
        t = tensor_parallel
        if self.recompute == "full":
            return 2.0 * s * b * h / (t if sequence_parallel else 1)
        scores = not self.flash_attention and self.recompute == "none"
        if t == 1:  # Table 2, first row (written as the seed paper does)
            return s * b * h * (c + 5.0 * a * s / h) if scores else c * s * b * h
        # Norms, dropout masks and the QKV and fc1 inputs (10sbh) are not split without sequence parallelism.
        replicated = 10.0 / t if sequence_parallel else 10.0
        return s * b * h * (replicated + (c - 10.0) / t + (5.0 * a * s / (h * t) if scores else 0.0))

    def layer_forward_bytes(self, b: Any) -> Any:
        """Bytes one layer's forward moves through memory: its weights plus the tensors it produces."""
        return self.params_per_layer * self.bytes_per_value + self.layer_produced_bytes(b)

    def layer_recompute_bytes(self, b: Any) -> Any:
        """Bytes the recomputation of one layer moves: ``full`` a forward's, ``selective`` the scores ``5as²b``."""
        s, a = self.sequence, self.heads
        if self.recompute == "full":
            return self.layer_forward_bytes(b)
        if self.recompute == "selective" and not self.flash_attention:
            return 5.0 * a * s * s * b
        return 0.0 * b

    def layer_pending_bytes(self, b: Any) -> Any:
        """Bytes one layer holds from its I until its W (split backward; module docstring)."""
        h, f = float(self.hidden), self.ffn
        gradients = (h + 2.0 * self.kv_hidden) + h + (2.0 if self.mlp == "swiglu" else 1.0) * f + h  # 9h
        inputs = 3.0 * h + f if self.recompute == "full" else 0.0  # 7h
        return (gradients + inputs) * self.sequence * b * self.bytes_per_value

    # ---- embedding and LM head (with head_compute) ----------------------------------------
    def embedding_forward_bytes(self, b: Any) -> Any:
        """Bytes the embedding's forward moves: ``b·s`` rows of ``h`` values read and written (no FLOPs)."""
        return 2.0 * b * self.sequence * self.hidden * self.bytes_per_value

    def head_forward_flops(self, b: Any) -> Any:
        """``2·b·s·h·vocab`` FLOPs of the LM head's forward (the logits; the loss is counted in bytes)."""
        return 2.0 * b * self.sequence * self.hidden * self.vocab

    def head_forward_bytes(self, b: Any) -> Any:
        """Bytes the LM head and loss move: the head's weights and fp32 logits (``4·b·s·vocab``)."""
        return self.embedding_params * self.bytes_per_value + 4.0 * b * self.sequence * self.vocab

    def embedding_activation_bytes(self, b: Any) -> Any:
        """``sbh`` bytes the embedding stores (its dropout mask; Korthikanti et al., section 4.3)."""
        return 1.0 * self.sequence * b * self.hidden

    def head_activation_bytes(self, b: Any) -> Any:
        """``4sbh(1 + vocab/h)`` bytes the LM head and loss store (Korthikanti et al., section 4.3)."""
        return 4.0 * self.sequence * b * self.hidden * (1.0 + self.vocab / self.hidden)

    def head_layer_equivalents(self) -> tuple[float, float]:
        """The embedding's and the LM head's forward FLOPs in transformer layers: ``(0, 2·vocab/(24h + 4s))``."""
        return 0.0, float(self.head_forward_flops(1.0) / self.layer_forward_flops(1.0))

    def message_bytes(self, b: Any) -> Any:
        """``b·s·h`` values of one point-to-point message between stages, in bytes."""
        return b * self.sequence * self.hidden * self.bytes_per_value
