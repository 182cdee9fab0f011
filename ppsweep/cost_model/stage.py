"""Per-stage costs: each stage's layers (:func:`stage_layers`), its compute seconds and bytes
(:func:`stage_costs`), and the engine's :class:`~ppsweep.engine.cost_grid.Costs` of them at a network
(:func:`engine_costs`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ppsweep.cost_model.model import ModelConfig
from ppsweep.cost_model.roofline import roofline_time
from ppsweep.cost_model.system import SystemConfig
from ppsweep.tables.table import ScheduleTable

if TYPE_CHECKING:
    from ppsweep.engine.cost_grid import Costs


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
    """The engine's :class:`~ppsweep.engine.cost_grid.Costs` of ``costs`` at network ``alpha``, ``beta``.

    Args:
      costs: per-stage costs, ``(n, S)`` over a leading compute axis.
      alpha, beta: latency (s) and bandwidth (bytes/s), broadcastable to ``(n,) + point axes``.
      t_opt: optimizer update seconds per worker (0: none).
      point_axes: axes that follow the compute axis in the point shape (the per-stage arrays get
        length-1 axes there).
      fb_overlap: share of an overlapped pair's forward hidden under its backward (:func:`~ppsweep.tables.ops.pair_time`).
      alpha_intra, beta_intra: latency and bandwidth within a node (None: ``alpha``, ``beta``).

    Returns:
      The validated :class:`~ppsweep.engine.cost_grid.Costs` (``simulate(table, costs, mode)``).
    """
    from ppsweep.engine.cost_grid import Costs

    def stage(a: np.ndarray) -> np.ndarray:
        return a.reshape(a.shape[:1] + (1,) * point_axes + a.shape[1:])

    return Costs.of(costs.t_f.shape[-1], stage(costs.t_f), stage(costs.t_b), alpha, beta, costs.msg_bytes,
                    t_i=stage(costs.t_i), t_w=stage(costs.t_w), grad_bytes=costs.grad_bytes, t_opt=t_opt,
                    fb_overlap=fb_overlap, alpha_intra=alpha_intra, beta_intra=beta_intra)
