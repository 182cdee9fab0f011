"""The cost model (docs/contract.md §3): seconds and bytes from a model, a system and a table.

Durations never come from the table; the table only says which stage runs where and how large
each stage is (``stage_fractions``, the share of the model's layers it holds, unless the model
names its own ``stage_layers``).

Choices where the contract is silent (also in the README, "Cost model"):

- By default compute counts the transformer layers only (embedding and LM head add memory, not
  time); ``head_compute=True`` adds the embedding and the LM head with its loss as compute (and
  their activations) on the first and the last stage.
- Bytes moved by one layer's forward = its weights (``params_per_layer · bytes_per_value``) plus
  the activations it produces (Korthikanti et al.; without the ``5as²b`` attention scores under
  flash attention); a backward moves twice that, plus what recomputation re-creates.
- Activations stored per layer (Korthikanti et al. 2022, Table 2, no tensor parallelism):
  ``none`` ``sbh(34 + 5as/h)``, ``selective`` or flash attention ``34sbh``, ``full`` ``2sbh``.
  Recomputation adds to every backward (to I where the backward is split): ``full`` one more
  forward, ``selective`` the attention core ``4bs²h``; flash attention adds ``2bs²h`` (its
  backward recomputes ``QKᵀ``) and makes ``selective`` a no-op.
- A split backward (I, W) holds, from I until W, the output gradients of the layer's linear
  layers (``9sbh`` values: QKV 3h, projection h, fc1 4h, fc2 h), and under full recomputation
  also the linear layers' inputs the recomputation re-created (``7sbh`` values).
- A layer holds ``12h² + 13h`` parameters (attention, MLP, biases, two layer norms).
- The embedding (``vocab · h`` parameters) sits with stage 0 and an untied LM head of the same
  size with stage ``S-1``, in every replica (two replicas on a worker count twice).
- Persistent bytes per parameter: weights and gradients at ``bytes_per_value`` each plus
  ``optimizer_bytes_per_param`` (fp32 master copy and two Adam moments: 12).
- The microbatch size ``b = G/m`` may be fractional; every cost is linear in ``b``.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ppsweep.tables.ops import Kind, pair_time  # noqa: F401 (pair_time: its home is tables.ops; ppsweep.costs.pair_time kept)
from ppsweep.tables.table import ScheduleTable

if TYPE_CHECKING:
    from ppsweep.engine.costs import Costs


def _from_mapping(cls, kind: str, values: Mapping[str, Any]):
    """Build a config dataclass from a mapping, with one clear error per bad field."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"{kind}.{unknown[0]}: unknown field; accepted: {', '.join(sorted(names))}")
    missing = sorted(f.name for f in fields(cls) if f.name not in values and f.default is MISSING)
    if missing:
        raise ValueError(f"{kind}.{missing[0]}: missing")
    config = cls(**values)
    config.check()
    return config


#: Field metadata of config fields added after stores existed: such a field enters a store's
#: identity only when it differs from its default (:func:`ppsweep.store.results.identity`).
IDENTITY_WHEN_SET = {"identity": "when_set"}

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
        return _from_mapping(cls, "model", values)

    def check(self) -> None:
        """Raise ValueError naming the first field out of range."""
        for name in ("layers", "hidden", "heads", "sequence", "vocab", "global_batch"):
            _require(f"model.{name}", getattr(self, name), positive=True)
        for name in ("bytes_per_value", "optimizer_bytes_per_param"):
            _require(f"model.{name}", getattr(self, name), positive=False)
        if self.recompute not in RECOMPUTE_MODES:
            raise ValueError(f"model.recompute: must be one of {', '.join(RECOMPUTE_MODES)}, got {self.recompute!r}")
        for name in ("ffn_hidden", "kv_heads"):
            if getattr(self, name) is not None:
                _require(f"model.{name}", getattr(self, name), positive=True)
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
                _require(f"model.stage_layers[{k}]", value, positive=False)
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


@dataclass(frozen=True)
class SystemConfig:
    """A system: compute roofline and network (docs/contract.md §3).

    Attributes:
      name: label.
      peak_flops: peak compute, FLOP/s.
      compute_efficiency: share of the peak reached (0, 1].
      memory_bandwidth: bytes/s.
      memory_efficiency: share of the memory bandwidth reached (0, 1].
      bandwidth: network bandwidth ``β``, bytes/s: between nodes (the inter tier).
      latency: network latency ``α``, s: between nodes.
      gpus_per_node: GPUs of one node: pipeline worker ``w`` runs on node ``w // gpus_per_node``
        (1, the default: every pipeline hop crosses nodes; :mod:`ppsweep.engine.tiers`).
      intra_bandwidth, intra_latency: ``β`` and ``α`` between two GPUs of one node (NVLink);
        None (the default): the same as between nodes.
      memory_capacity: bytes per worker; a point whose bottleneck worker needs more is invalid
        (None: no cap).
      optimizer_time: seconds of one optimizer update per worker (0: none).
      fb_overlap: share in [0, 1] of an overlapped pair's forward half hidden under its backward
        half (DualPipe's F&B, :func:`pair_time`); 0 (default): a pair lasts ``t_f + t_b``. In a
        config also a measured credit's name (:mod:`ppsweep.overlap_credits`).
      (In a layout sweep ``gpus_per_node`` places every GPU rank, docs/contract.md §3b, and the
      intra tier is per GPU and direction.)

    ``gpus_per_node``, ``intra_bandwidth`` and ``intra_latency`` enter a store's identity only when
    set (:data:`IDENTITY_WHEN_SET`): stores written before they existed keep their identity.
    """

    peak_flops: float
    memory_bandwidth: float
    bandwidth: float
    latency: float
    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    memory_capacity: float | None = None
    optimizer_time: float = 0.0
    fb_overlap: float = 0.0
    name: str = "system"
    gpus_per_node: int = field(default=1, metadata=IDENTITY_WHEN_SET)
    intra_bandwidth: float | None = field(default=None, metadata=IDENTITY_WHEN_SET)
    intra_latency: float | None = field(default=None, metadata=IDENTITY_WHEN_SET)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "SystemConfig":
        """Validated config from a mapping (e.g. Hydra's ``cfg.system``); ``fb_overlap`` may name a
        measured credit (:mod:`ppsweep.overlap_credits`, e.g. ``deepseek_a2a``)."""
        from ppsweep.overlap_credits import resolve_fb_overlap

        if "fb_overlap" in values:
            values = {**values, "fb_overlap": resolve_fb_overlap(values["fb_overlap"])}
        return _from_mapping(cls, "system", values)

    def check(self) -> None:
        """Raise ValueError naming the first field out of range."""
        for name in ("peak_flops", "memory_bandwidth", "bandwidth"):
            _require(f"system.{name}", getattr(self, name), positive=True)
        for name in ("compute_efficiency", "memory_efficiency"):
            value = getattr(self, name)
            _require(f"system.{name}", value, positive=True)
            if value > 1:
                raise ValueError(f"system.{name}: must be in (0, 1], got {value!r}")
        _require("system.latency", self.latency, positive=False)
        _require("system.optimizer_time", self.optimizer_time, positive=False)
        _require("system.fb_overlap", self.fb_overlap, positive=False)
        if self.fb_overlap > 1:
            raise ValueError(f"system.fb_overlap: must be in [0, 1], got {self.fb_overlap!r}")
        if self.memory_capacity is not None:
            _require("system.memory_capacity", self.memory_capacity, positive=True)
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ValueError(f"system.gpus_per_node: must be an integer >= 1, got {self.gpus_per_node!r}")
        if self.intra_bandwidth is not None:
            _require("system.intra_bandwidth", self.intra_bandwidth, positive=True)
        if self.intra_latency is not None:
            _require("system.intra_latency", self.intra_latency, positive=False)


def _require(field: str, value: Any, positive: bool) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
    ok = ok and (value > 0 if positive else value >= 0)
    if not ok:
        raise ValueError(f"{field}: must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}")


def roofline_time(system: SystemConfig, flops: Any, bytes_moved: Any, peak_flops: Any = None) -> Any:
    """Roofline seconds ``max(FLOPs/(peak·eff_c), bytes/(bw_mem·eff_m))`` (broadcasts).

    Args:
      system: the system.
      flops, bytes_moved: the work of one operation.
      peak_flops: override of ``system.peak_flops`` (broadcasts; for a ``compute`` axis). The
        memory bandwidth scales with it, keeping the system's bytes per FLOP, as the paper's
        systems scale a whole accelerator.
    """
    peak = system.peak_flops if peak_flops is None else np.asarray(peak_flops, dtype=float)
    memory_bandwidth = system.memory_bandwidth * peak / system.peak_flops
    flops_time = flops / (peak * system.compute_efficiency)
    bytes_time = bytes_moved / (memory_bandwidth * system.memory_efficiency)
    return np.maximum(flops_time, bytes_time)


def layer_time(model: ModelConfig, system: SystemConfig, b: Any, peak_flops: Any = None) -> Any:
    """Roofline seconds of one layer's forward (:func:`roofline_time` of its FLOPs and bytes).

    Args:
      model, system: the configs.
      b: microbatch size (broadcasts).
      peak_flops: override of ``system.peak_flops`` (broadcasts; for a ``compute`` axis).
    """
    return roofline_time(system, model.layer_forward_flops(b), model.layer_forward_bytes(b), peak_flops)


def stage_layers(model: ModelConfig, table: ScheduleTable) -> np.ndarray:
    """Layers in each stage, ``(S,)`` (fractional where layers do not divide evenly).

    ``uniform``: ``L`` times the schedule's stage fractions. ``balanced``: stage ``s`` gets
    ``fraction_s·(L + E + H)`` minus ``E`` at stage 0 and ``H`` at stage ``S-1``, where ``E`` and
    ``H`` are the embedding's and the LM head's forward FLOPs in layers (0 without
    ``head_compute``). An explicit list is used as given; its length must be ``S``.

    Raises:
      ValueError: an explicit list of the wrong length, or a balanced stage left with fewer than
        0 layers.
    """
    rule = model.stage_layers
    if isinstance(rule, tuple):
        if len(rule) != table.n_stages:
            raise ValueError(
                f"model.stage_layers: {len(rule)} entries, but {table.name} at p={table.p} has "
                f"{table.n_stages} stages; give one layer count per stage"
            )
        return np.asarray(rule, dtype=float)
    fractions = np.asarray(table.stage_fractions, dtype=float)
    if rule == "uniform" or not model.head_compute:
        return model.layers * fractions
    embedding, head = model.head_layer_equivalents()
    layers = fractions * (model.layers + embedding + head)
    layers[0] -= embedding
    layers[-1] -= head
    if np.any(layers < 0):
        raise ValueError(
            f"model.stage_layers: balanced leaves {table.name} at p={table.p} a stage with "
            f"{layers.min():.3g} layers (the LM head outweighs its stage); use fewer stages or a list"
        )
    return layers


@dataclass(frozen=True)
class MemoryFigures:
    """Memory of the bottleneck worker (the one with the largest peak), bytes."""

    peak_activation_bytes: float
    persistent_bytes: float

    @property
    def peak_memory_bytes(self) -> float:
        """Persistent plus peak activations."""
        return self.peak_activation_bytes + self.persistent_bytes


def persistent_bytes_per_worker(model: ModelConfig, table: ScheduleTable, tensor_parallel: int = 1,
                                optimizer_shards: int = 1) -> np.ndarray:
    """Parameters, gradients and optimizer state each worker keeps, ``(p,)`` bytes (one GPU of it).

    Every replica's stages count on the worker the placement gives them (two replicas of a
    stage on one worker count twice); the embedding goes with stage 0 and the LM head with stage
    ``S-1`` of every replica.

    Args:
      model, table: the model and the schedule.
      tensor_parallel: ``tp``: every parameter is split ``tp`` ways (docs/contract.md §3b).
      optimizer_shards: ZeRO-1's ``dp``: the optimizer state is split that many ways.
    """
    per_param = 2 * model.bytes_per_value + model.optimizer_bytes_per_param
    if optimizer_shards != 1:
        per_param = 2 * model.bytes_per_value + model.optimizer_bytes_per_param / optimizer_shards
    layers = stage_layers(model, table)
    params = np.zeros(table.p)
    embedding = model.vocab * model.hidden
    for r in range(table.n_replicas):
        for s in range(table.n_stages):
            params[table.placement[r, s]] += layers[s] * model.params_per_layer
        params[table.placement[r, 0]] += embedding
        params[table.placement[r, table.n_stages - 1]] += embedding
    if tensor_parallel != 1:
        params = params / tensor_parallel
    return params * per_param


def stage_activation_bytes(model: ModelConfig, table: ScheduleTable, split: "ActivationSplit | None" = None) -> np.ndarray:
    """Bytes one microbatch stores at each stage from its F until its B (or W), ``(S,)``.

    The stage's layers times :meth:`ModelConfig.layer_activation_bytes`; with ``head_compute``
    also the embedding's (stage 0) and the LM head's (stage ``S-1``) activations. ``split``: a
    layout's tensor, sequence and context parallelism (docs/contract.md §3b): Korthikanti's
    rows at ``tp`` (with or without sequence parallelism), everything ``/cp``; the embedding's
    and the LM head's ``/(tp·cp)``.
    """
    b = model.microbatch_size(table.m)
    if split is None:
        per_stage = stage_layers(model, table) * model.layer_activation_bytes(b)
    else:
        per_stage = stage_layers(model, table) * (model.layer_activation_bytes(b, split.tp, split.sequence_parallel) / split.cp)
    if model.head_compute:
        ends = 1.0 if split is None else float(split.tp * split.cp)
        per_stage[0] += model.embedding_activation_bytes(b) / ends
        per_stage[-1] += model.head_activation_bytes(b) / ends
    return per_stage


@dataclass(frozen=True)
class ActivationSplit:
    """How a layout splits one worker's activations: tensor ``tp`` (and sequence parallelism), context ``cp``."""

    tp: int = 1
    sequence_parallel: bool = False
    cp: int = 1


def activation_bytes_per_worker(model: ModelConfig, table: ScheduleTable, split: ActivationSplit | None = None) -> np.ndarray:
    """Peak activation bytes of each worker over the table, ``(p,)``.

    The peaks follow the table, worker by worker: an F stores its stage's activations
    (:func:`stage_activation_bytes`) until the B, or where the backward is split until the W,
    of the same microbatch and stage frees them; a split backward also holds
    :meth:`ModelConfig.layer_pending_bytes` per layer from the start of its I to the end of its W
    (``/(tp·cp)`` under a ``split``).
    """
    profile = table.activation_profile(stage_activation_bytes(model, table, split))
    if table.split_backward:
        b = model.microbatch_size(table.m)
        pending = stage_layers(model, table) * model.layer_pending_bytes(b)
        if split is not None:
            pending = pending / (split.tp * split.cp)
        profile = profile + _pending_profile(table, pending)
    return profile.max(axis=1, initial=0.0)


def _pending_profile(table: ScheduleTable, pending: np.ndarray) -> np.ndarray:
    """Bytes each worker holds between the start of an I and the end of its W, per slot, ``(p, T)``.

    Args:
      table: a table with a split backward.
      pending: ``(S,)`` bytes one split backward of each stage holds from its I to its W.
    """
    from ppsweep.tables.fast_realize import table_ops

    delta = np.zeros((table.p, table.length + 1))
    ops = table_ops(table)
    if ops is not None:  # array code: at most one I starts and one W ends at a cell, so the sums are the loop's
        i_ops, w_ops = ops.kind == Kind.I, ops.kind == Kind.W
        np.add.at(delta, (ops.worker[i_ops], ops.start[i_ops]), pending[ops.stage[i_ops]])
        np.subtract.at(delta, (ops.worker[w_ops], ops.end[w_ops]), pending[ops.stage[w_ops]])
    else:  # operation by operation (the reference)
        for placed in table.placed_ops():
            if placed.op.kind == Kind.I:
                delta[placed.worker, placed.start] += pending[placed.op.stage]
            elif placed.op.kind == Kind.W:
                delta[placed.worker, placed.end] -= pending[placed.op.stage]
    return np.cumsum(delta, axis=1)[:, : table.length]


def memory_figures(model: ModelConfig, table: ScheduleTable, m: int, split: ActivationSplit | None = None,
                   tensor_parallel: int = 1, optimizer_shards: int = 1) -> MemoryFigures:
    """Bottleneck worker's peak activation bytes and persistent bytes at ``m`` microbatches.

    Args:
      model: the model (its recomputation, flash attention, head and stage-layer options apply).
      table: the schedule.
      m: microbatches (the table's).
      split: a layout's activation split (:class:`ActivationSplit`; None: one GPU per worker).
      tensor_parallel, optimizer_shards: a layout's parameter split (:func:`persistent_bytes_per_worker`).
    """
    if m != table.m:
        raise ValueError(f"m: memory_figures got m={m} for a table of m={table.m}")
    activations = activation_bytes_per_worker(model, table, split)
    persistent = persistent_bytes_per_worker(model, table, tensor_parallel, optimizer_shards)
    w = int(np.argmax(activations + persistent))
    return MemoryFigures(float(activations[w]), float(persistent[w]))


@dataclass(frozen=True)
class StageCosts:
    """Per-stage compute seconds and bytes for the engine, broadcast over a leading point axis.

    Attributes:
      t_f, t_b, t_i, t_w: ``(n, S)`` seconds per microbatch of each stage.
      grad_bytes: ``(S,)`` gradient bytes of each stage (for synchronising replicated stages).
      msg_bytes: bytes of one point-to-point message.
    """

    t_f: np.ndarray
    t_b: np.ndarray
    t_i: np.ndarray
    t_w: np.ndarray
    grad_bytes: np.ndarray
    msg_bytes: float


def stage_costs(model: ModelConfig, system: SystemConfig, table: ScheduleTable, peak_flops: Any = None) -> StageCosts:
    """Compute seconds and bytes of every stage of ``table`` (docs/contract.md §3).

    Each operation is one roofline per kernel: the stage's layers (forward; backward twice the
    forward plus the recomputation; I once the forward plus the recomputation; W once the
    forward) and, with ``head_compute``, the embedding on stage 0 and the LM head on stage
    ``S-1`` (backward twice their forward, I and W once each).

    Args:
      model, system: the configs.
      table: the schedule (its ``m`` sets the microbatch size, its stages their layers).
      peak_flops: optional ``(n,)`` peak FLOP/s per point (a ``compute`` axis); default the system's.

    Returns:
      :class:`StageCosts`.
    """
    b = model.microbatch_size(table.m)
    peak = None if peak_flops is None else np.atleast_1d(np.asarray(peak_flops, dtype=float))[:, None]
    flops, moved = model.layer_forward_flops(b), model.layer_forward_bytes(b)
    extra_flops, extra_bytes = model.layer_recompute_flops(b), model.layer_recompute_bytes(b)
    per_layer = {  # (n, 1) seconds of one layer's operation
        "f": roofline_time(system, flops, moved, peak),
        "b": roofline_time(system, 2.0 * flops + extra_flops, 2.0 * moved + extra_bytes, peak),
        "i": roofline_time(system, flops + extra_flops, moved + extra_bytes, peak),
    }
    layers = stage_layers(model, table)[None, :]
    times = {k: np.atleast_2d(v) * layers for k, v in per_layer.items()}
    times["w"] = times["f"] if not model.head_compute else times["f"].copy()
    grad_params = stage_layers(model, table) * model.params_per_layer
    if model.head_compute:
        ends = (  # (stage, forward seconds of the embedding or the LM head)
            (0, roofline_time(system, 0.0, model.embedding_forward_bytes(b), peak)),
            (-1, roofline_time(system, model.head_forward_flops(b), model.head_forward_bytes(b), peak)),
        )
        for stage, forward in ends:
            forward = np.atleast_2d(forward)[:, 0]
            for kind, factor in (("f", 1.0), ("b", 2.0), ("i", 1.0), ("w", 1.0)):
                times[kind][:, stage] += factor * forward
            grad_params[stage] += model.embedding_params
    return StageCosts(
        t_f=times["f"],
        t_b=times["b"],
        t_i=times["i"],
        t_w=times["w"],
        grad_bytes=grad_params * model.bytes_per_value,
        msg_bytes=float(model.message_bytes(b)),
    )


def engine_costs(costs: StageCosts, alpha: Any, beta: Any, t_opt: Any = 0.0, point_axes: int = 0,
                 fb_overlap: Any = 0.0, alpha_intra: Any = None, beta_intra: Any = None) -> "Costs":
    """The engine's :class:`~ppsweep.engine.costs.Costs` of ``costs`` at network ``alpha``, ``beta``.

    Args:
      costs: per-stage costs, ``(n, S)`` over a leading compute axis.
      alpha, beta: latency (s) and bandwidth (bytes/s), broadcastable to ``(n,) + point axes``.
      t_opt: optimizer update seconds per worker (0: none).
      point_axes: axes that follow the compute axis in the point shape (the per-stage arrays get
        length-1 axes there).
      fb_overlap: share of an overlapped pair's forward hidden under its backward (:func:`pair_time`).
      alpha_intra, beta_intra: latency and bandwidth within a node (None: ``alpha``, ``beta``).

    Returns:
      The validated :class:`~ppsweep.engine.costs.Costs` (``simulate(table, costs, mode)``).
    """
    from ppsweep.engine.costs import Costs

    def stage(a: np.ndarray) -> np.ndarray:
        return a.reshape(a.shape[:1] + (1,) * point_axes + a.shape[1:])

    return Costs.of(costs.t_f.shape[-1], stage(costs.t_f), stage(costs.t_b), alpha, beta, costs.msg_bytes,
                    t_i=stage(costs.t_i), t_w=stage(costs.t_w), grad_bytes=costs.grad_bytes, t_opt=t_opt,
                    fb_overlap=fb_overlap, alpha_intra=alpha_intra, beta_intra=beta_intra)
