"""The cost model (SPEC section 3): seconds and bytes from a model, a system and a table.

Durations never come from the table; the table only says which stage runs where and how large
each stage is (``stage_fractions``, the share of the model's layers it holds).

Choices where the SPEC is silent (also in the README):

- Compute counts the transformer layers only (embedding and LM head add memory, not time).
- Bytes moved by one layer's forward = its weights (``params_per_layer · bytes_per_value``)
  plus the activations it stores (Korthikanti et al.); a backward moves twice that.
- A layer holds ``12h² + 13h`` parameters (attention, MLP, biases, two layer norms).
- The embedding (``vocab · h`` parameters) sits with stage 0 and an untied LM head of the same
  size with stage ``S-1``, in every replica.
- Persistent bytes per parameter: weights and gradients at ``bytes_per_value`` each plus
  ``optimizer_bytes_per_param`` (fp32 master copy and two Adam moments: 12).
- The microbatch size ``b = G/m`` may be fractional; every cost is linear in ``b``.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, Mapping

import numpy as np

from ppsweep.table import ScheduleTable


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


@dataclass(frozen=True)
class ModelConfig:
    """A Megatron-style decoder (SPEC section 3).

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
    """

    layers: int
    hidden: int
    heads: int
    sequence: int
    vocab: int
    global_batch: int
    bytes_per_value: float = 2.0
    optimizer_bytes_per_param: float = 12.0
    name: str = "model"

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

    @property
    def params_per_layer(self) -> float:
        """``12h² + 13h`` parameters per transformer layer."""
        return 12.0 * self.hidden**2 + 13.0 * self.hidden

    def microbatch_size(self, m: Any) -> Any:
        """``b = G / m`` sequences per microbatch."""
        return self.global_batch / np.asarray(m, dtype=float)

    def layer_forward_flops(self, b: Any) -> Any:
        """``24·b·s·h² + 4·b·s²·h`` FLOPs of one layer's forward for ``b`` sequences."""
        s, h = self.sequence, self.hidden
        return b * (24.0 * s * h * h + 4.0 * s * s * h)

    def layer_activation_bytes(self, b: Any) -> Any:
        """``s·b·h·(34 + 5·a·s/h)`` bytes of activations one layer stores (no recomputation)."""
        s, h, a = self.sequence, self.hidden, self.heads
        return s * b * h * (34.0 + 5.0 * a * s / h)

    def layer_forward_bytes(self, b: Any) -> Any:
        """Bytes one layer's forward moves through memory: its weights plus its stored activations."""
        return self.params_per_layer * self.bytes_per_value + self.layer_activation_bytes(b)

    def message_bytes(self, b: Any) -> Any:
        """``b·s·h`` values of one point-to-point message between stages, in bytes."""
        return b * self.sequence * self.hidden * self.bytes_per_value


@dataclass(frozen=True)
class SystemConfig:
    """A system: compute roofline and network (SPEC section 3).

    Attributes:
      name: label.
      peak_flops: peak compute, FLOP/s.
      compute_efficiency: share of the peak reached (0, 1].
      memory_bandwidth: bytes/s.
      memory_efficiency: share of the memory bandwidth reached (0, 1].
      bandwidth: network bandwidth ``β``, bytes/s.
      latency: network latency ``α``, s.
      memory_capacity: bytes per worker; a point whose bottleneck worker needs more is invalid
        (None: no cap).
      optimizer_time: seconds of one optimizer update per worker (0: none).
    """

    peak_flops: float
    memory_bandwidth: float
    bandwidth: float
    latency: float
    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    memory_capacity: float | None = None
    optimizer_time: float = 0.0
    name: str = "system"

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "SystemConfig":
        """Validated config from a mapping (e.g. Hydra's ``cfg.system``)."""
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
        if self.memory_capacity is not None:
            _require("system.memory_capacity", self.memory_capacity, positive=True)


def _require(field: str, value: Any, positive: bool) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
    ok = ok and (value > 0 if positive else value >= 0)
    if not ok:
        raise ValueError(f"{field}: must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}")


def layer_time(model: ModelConfig, system: SystemConfig, b: Any, peak_flops: Any = None) -> Any:
    """Roofline seconds of one layer's forward: ``max(FLOPs/(peak·eff_c), bytes/(bw_mem·eff_m))``.

    Args:
      model, system: the configs.
      b: microbatch size (broadcasts).
      peak_flops: override of ``system.peak_flops`` (broadcasts; for a ``compute`` axis). The
        memory bandwidth scales with it, keeping the system's bytes per FLOP, as the paper's
        systems scale a whole accelerator.
    """
    peak = system.peak_flops if peak_flops is None else np.asarray(peak_flops, dtype=float)
    memory_bandwidth = system.memory_bandwidth * peak / system.peak_flops
    flops_time = model.layer_forward_flops(b) / (peak * system.compute_efficiency)
    bytes_time = model.layer_forward_bytes(b) / (memory_bandwidth * system.memory_efficiency)
    return np.maximum(flops_time, bytes_time)


def stage_layers(model: ModelConfig, table: ScheduleTable) -> np.ndarray:
    """Layers in each stage, ``(S,)`` (fractional where layers do not divide evenly)."""
    return model.layers * np.asarray(table.stage_fractions, dtype=float)


@dataclass(frozen=True)
class MemoryFigures:
    """Memory of the bottleneck worker (the one with the largest peak), bytes."""

    peak_activation_bytes: float
    persistent_bytes: float

    @property
    def peak_memory_bytes(self) -> float:
        """Persistent plus peak activations."""
        return self.peak_activation_bytes + self.persistent_bytes


def persistent_bytes_per_worker(model: ModelConfig, table: ScheduleTable) -> np.ndarray:
    """Parameters, gradients and optimizer state each worker keeps, ``(p,)`` bytes."""
    per_param = 2 * model.bytes_per_value + model.optimizer_bytes_per_param
    layers = stage_layers(model, table)
    params = np.zeros(table.p)
    embedding = model.vocab * model.hidden
    for r in range(table.n_replicas):
        for s in range(table.n_stages):
            params[table.placement[r, s]] += layers[s] * model.params_per_layer
        params[table.placement[r, 0]] += embedding
        params[table.placement[r, table.n_stages - 1]] += embedding
    return params * per_param


def memory_figures(model: ModelConfig, table: ScheduleTable, m: int) -> MemoryFigures:
    """Bottleneck worker's peak activation bytes and persistent bytes at ``m`` microbatches."""
    b = model.microbatch_size(m)
    per_stage = stage_layers(model, table) * model.layer_activation_bytes(b)
    activations = table.peak_activations_per_worker(per_stage)
    persistent = persistent_bytes_per_worker(model, table)
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
    """Compute seconds and bytes of every stage of ``table`` (SPEC section 3).

    Args:
      model, system: the configs.
      table: the schedule (its ``m`` sets the microbatch size, its stages their layers).
      peak_flops: optional ``(n,)`` peak FLOP/s per point (a ``compute`` axis); default the system's.

    Returns:
      :class:`StageCosts`; the backward is twice the forward, I and W once each.
    """
    b = model.microbatch_size(table.m)
    per_layer = np.atleast_1d(layer_time(model, system, b, peak_flops))[:, None]  # (n, 1)
    t_f = per_layer * stage_layers(model, table)[None, :]
    return StageCosts(
        t_f=t_f,
        t_b=2.0 * t_f,
        t_i=t_f,
        t_w=t_f,
        grad_bytes=stage_layers(model, table) * model.params_per_layer * model.bytes_per_value,
        msg_bytes=float(model.message_bytes(b)),
    )


def engine_costs(costs: StageCosts, alpha: Any, beta: Any, t_opt: Any = 0.0, point_axes: int = 0) -> "Costs":
    """The engine's :class:`~ppsweep.engine_costs.Costs` of ``costs`` at network ``alpha``, ``beta``.

    Args:
      costs: per-stage costs, ``(n, S)`` over a leading compute axis.
      alpha, beta: latency (s) and bandwidth (bytes/s), broadcastable to ``(n,) + point axes``.
      t_opt: optimizer update seconds per worker (0: none).
      point_axes: axes that follow the compute axis in the point shape (the per-stage arrays get
        length-1 axes there).

    Returns:
      The validated :class:`~ppsweep.engine_costs.Costs` (``simulate(table, costs, mode)``).
    """
    from ppsweep.engine_costs import Costs

    def stage(a: np.ndarray) -> np.ndarray:
        return a.reshape(a.shape[:1] + (1,) * point_axes + a.shape[1:])

    return Costs.of(costs.t_f.shape[-1], stage(costs.t_f), stage(costs.t_b), alpha, beta, costs.msg_bytes,
                    t_i=stage(costs.t_i), t_w=stage(costs.t_w), grad_bytes=costs.grad_bytes, t_opt=t_opt)
