"""The system: :class:`SystemConfig`, a compute roofline and a two-tier network (docs/contract.md §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ppsweep.cost_model.fields import IDENTITY_WHEN_SET, config_from_mapping, require_number


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
        half (DualPipe's F&B, :func:`~ppsweep.tables.ops.pair_time`); 0 (default): a pair lasts ``t_f + t_b``. In a
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
        return config_from_mapping(cls, "system", values)

    def check(self) -> None:
        """Raise ValueError naming the first field out of range."""
        for name in ("peak_flops", "memory_bandwidth", "bandwidth"):
            require_number(f"system.{name}", getattr(self, name), positive=True)
        for name in ("compute_efficiency", "memory_efficiency"):
            value = getattr(self, name)
            require_number(f"system.{name}", value, positive=True)
            if value > 1:
                raise ValueError(f"system.{name}: must be in (0, 1], got {value!r}")
        require_number("system.latency", self.latency, positive=False)
        require_number("system.optimizer_time", self.optimizer_time, positive=False)
        require_number("system.fb_overlap", self.fb_overlap, positive=False)
        if self.fb_overlap > 1:
            raise ValueError(f"system.fb_overlap: must be in [0, 1], got {self.fb_overlap!r}")
        if self.memory_capacity is not None:
            require_number("system.memory_capacity", self.memory_capacity, positive=True)
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ValueError(f"system.gpus_per_node: must be an integer >= 1, got {self.gpus_per_node!r}")
        if self.intra_bandwidth is not None:
            require_number("system.intra_bandwidth", self.intra_bandwidth, positive=True)
        if self.intra_latency is not None:
            require_number("system.intra_latency", self.intra_latency, positive=False)
