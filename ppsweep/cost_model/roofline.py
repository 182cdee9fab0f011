"""Roofline seconds: of one operation (:func:`roofline_time`) and of one layer's forward (:func:`layer_time`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ppsweep.cost_model.model import ModelConfig
from ppsweep.cost_model.system import SystemConfig


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
