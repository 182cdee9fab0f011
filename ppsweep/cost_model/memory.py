"""Memory figures: persistent bytes (parameters, gradients, optimizer state) and peak activation bytes
per worker, followed through the table (docs/contract.md §3, §3b)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppsweep.cost_model.model import ModelConfig
from ppsweep.cost_model.stage import stage_layers
from ppsweep.tables.ops import Kind
from ppsweep.tables.table import ScheduleTable


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
        profile = profile + pending_profile(table, pending)
    return profile.max(axis=1, initial=0.0)


def pending_profile(table: ScheduleTable, pending: np.ndarray) -> np.ndarray:
    """Bytes each worker holds between the start of an I and the end of its W, per slot, ``(p, T)``.

    Args:
      table: a table with a split backward.
      pending: ``(S,)`` bytes one split backward of each stage holds from its I to its W.
    """
    from ppsweep.tables.fast_realize import table_ops

    width = table.length + 1
    delta = np.zeros((table.p, width))
    ops = table_ops(table)
    if ops is not None:  # array code: at most one I starts and one W ends at a cell, so each cell's
        # sum is 0 + held - released, the loop's floats (bincount adds a cell's terms in order, and x + (-y) is x - y)
        i_ops, w_ops = ops.kind == Kind.I, ops.kind == Kind.W
        cells = np.concatenate([ops.worker[i_ops] * width + ops.start[i_ops], ops.worker[w_ops] * width + ops.end[w_ops]])
        change = np.concatenate([pending[ops.stage[i_ops]], -pending[ops.stage[w_ops]]])
        delta = np.bincount(cells, weights=change, minlength=table.p * width).reshape(table.p, width)
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
