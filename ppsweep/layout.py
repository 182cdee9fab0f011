"""The whole layout around the pipeline: tensor (tp), data (dp) and context (cp) parallelism.

A **layout** splits ``gpus = tp · p · dp · cp`` GPUs (docs/contract.md §3b). The pipeline's ``p``
workers are what the schedule tables describe; every pipeline worker is a group of ``tp · cp``
GPUs running its stages together, and ``dp`` such pipelines (replicas) each take ``G/dp`` of the
global batch. This module holds the layout's rules; :mod:`ppsweep.sweep.evaluate` applies them.

- **Validity** (:func:`why_invalid`): ``tp`` divides the heads (and the key/value heads), ``p``
  the layers, ``2·cp`` the sequence (Megatron's load-balanced causal split; ``cp = 1``: no
  condition), ``dp · m`` the global batch.
- **Placement** (:func:`rank_of`, :func:`worker_node`, :func:`group_tier`): ranks are numbered in
  an order of the four dimensions, fastest first (Megatron's ``tp, cp, dp, pp`` by default) and
  node ``n`` holds ranks ``[n·g, (n+1)·g)`` (``g = gpus_per_node``). A pipeline worker's node is
  the node of its rank with ``tp = cp = dp = 0``; a hop crosses nodes where consecutive workers'
  nodes differ. A group (the ``tp`` GPUs of one worker, the ``dp`` replicas, the ``cp`` ranks)
  talks on the intra-node tier when every group of that dimension lies within one node, else on
  the inter-node tier's latency and ``min(β_intra, k·β_inter)``, ``k`` its ranks on one node (each
  with its own port, all used by the collective's channels: :func:`group_link`).
- **Collectives** (ring algorithms, Hockney α-β per step; Thakur, Rabenseifner, Gropp 2005; Patarasuk
  and Yuan 2009): all-reduce of ``B`` bytes over ``n`` ranks ``2(n−1)(α + B/(nβ))``,
  reduce-scatter and all-gather ``(n−1)(α + B/(nβ))``; ``n = 1`` costs 0.
- **TP per layer** (Shoeybi et al. 2019, Megatron-LM; Korthikanti et al. 2022, §3-4): without
  sequence parallelism 2 all-reduces of the layer's activations ``b·(s/cp)·h`` values in the
  forward and 2 in the backward; with it 2 all-gathers + 2 reduce-scatters in each; a full
  recomputation repeats the forward's. FLOPs divided by ``tp·cp``; bytes moved: the weights
  ``/tp``, the activations ``/(tp·cp)``; stored activations Korthikanti's Table 2 rows ``/cp``.
- **CP per layer** (ring attention as Megatron's context parallelism): the forward passes every
  rank's K and V (``2·b·(s/cp)·h_kv/tp`` values) around the ring, ``cp − 1`` steps; the backward
  passes K, V and their gradients (twice that). Overlapped with the layer's compute by default.
- **Exposed or overlapped**: a layer's exposed collectives add to its compute; overlapped ones
  hide under it (the layer lasts ``max(compute + exposed, overlapped)``).
- **DP at the step end** (:func:`dp_sync_time`): each worker's gradients (its parameters ``/tp``
  at ``grad_bytes_per_value``) are all-reduced across the ``dp · cp`` ranks that hold the same
  weights (Megatron's data-and-context-parallel group), or with ZeRO-1
  (distributed optimizer) reduce-scattered and the parameters all-gathered after the update;
  with ``grad_overlap`` (Megatron's ``overlap_grad_reduce``) the reduction hides under the
  worker's last backward of one microbatch. The step lasts ``t_sim + max_w exposed_w`` (exact
  when every worker's exposed time is equal, as it is for uniform stages; see contract §3b).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from ppsweep.cost_model import ModelConfig, SystemConfig, roofline_time
from ppsweep.engine.comm import RingAllReduce, message_time, wire_time

#: The four layout dimensions; ``pp`` is the pipeline's ``p``.
LAYOUT_DIMS = ("tp", "cp", "dp", "pp")
#: Megatron's rank order, fastest first.
MEGATRON_ORDER = ("tp", "cp", "dp", "pp")
#: Tiers a group or hop may use.
TIERS = ("intra", "inter")


@dataclass(frozen=True)
class Layout:
    """One split of the GPUs: tensor ``tp``, pipeline ``p``, data ``dp``, context ``cp``."""

    tp: int = 1
    p: int = 1
    dp: int = 1
    cp: int = 1

    @property
    def gpus(self) -> int:
        """``tp · p · dp · cp``."""
        return self.tp * self.p * self.dp * self.cp

    def size(self, dim: str) -> int:
        """The degree of ``dim`` (``tp``, ``cp``, ``dp`` or ``pp``)."""
        return {"tp": self.tp, "cp": self.cp, "dp": self.dp, "pp": self.p}[dim]

    @property
    def label(self) -> str:
        """``tp8·p4·dp2·cp1``."""
        return f"tp{self.tp}·p{self.p}·dp{self.dp}·cp{self.cp}"


@dataclass(frozen=True)
class LayoutOptions:
    """How the layout's collectives run (the sweep's ``layout:`` block; docs/contract.md §3b).

    Attributes:
      sequence_parallel: Korthikanti's sequence parallelism: TP's all-reduces become
        reduce-scatter + all-gather pairs, norms and dropouts are split ``tp`` ways, and the
        stage-boundary messages carry ``1/tp`` of the activations.
      tp_overlap: True: TP collectives hide under the layer's compute; False (Megatron without
        TP comm overlap): they add to it.
      cp_overlap: True (Megatron's ring attention): CP's K/V exchange hides under the layer's compute.
      grad_overlap: Megatron's ``overlap_grad_reduce``: the DP gradient reduction hides under the
        worker's last backward.
      zero1: ZeRO-1 / Megatron's distributed optimizer: optimizer state sharded ``dp`` ways in
        memory; gradients reduce-scattered, parameters all-gathered after the update.
      scatter_gather: Narayanan et al.'s scatter/gather of stage-boundary messages: each of a
        worker's ``tp`` GPUs sends ``1/tp`` of the tensor (implied by ``sequence_parallel``).
      grad_bytes_per_value: bytes per gradient value in the DP reduction (None: the model's).
      order: rank order, fastest first, a permutation of ``tp, cp, dp, pp``.
    """

    sequence_parallel: bool = False
    tp_overlap: bool = False
    cp_overlap: bool = True
    grad_overlap: bool = False
    zero1: bool = False
    scatter_gather: bool = False
    grad_bytes_per_value: float | None = None
    order: tuple[str, ...] = MEGATRON_ORDER

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", tuple(self.order))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> "LayoutOptions":
        """Validated options from the config's ``layout`` block (None: defaults)."""
        values = dict(values or {})
        names = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"layout.{unknown[0]}: unknown option; accepted: {', '.join(sorted(names))}")
        options = cls(**values)
        options.check()
        return options

    def check(self) -> None:
        """Raise ValueError naming the first bad option."""
        for name in ("sequence_parallel", "tp_overlap", "cp_overlap", "grad_overlap", "zero1", "scatter_gather"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"layout.{name}: must be true or false, got {getattr(self, name)!r}")
        if sorted(self.order) != sorted(LAYOUT_DIMS):
            raise ValueError(f"layout.order: must be a permutation of {', '.join(LAYOUT_DIMS)}, got {list(self.order)}")
        g = self.grad_bytes_per_value
        if g is not None and (isinstance(g, bool) or not isinstance(g, (int, float)) or not g > 0):
            raise ValueError(f"layout.grad_bytes_per_value: must be a number > 0 or null, got {g!r}")


# ---- validity -----------------------------------------------------------------------------------
#: Codes of :func:`invalid_code` (the store's variable ``layout_invalid``), 0: the layout can run.
INVALID_REASONS = (
    "runs",
    "tp·p·dp·cp is not gpus",
    "tp does not divide heads",
    "tp does not divide kv_heads",
    "the stages do not divide layers",
    "2·cp does not divide sequence",
    "dp·m does not divide global_batch",
)


def invalid_code(layout: Layout, model: ModelConfig, m: int, gpus: int | None = None, stages: int | None = None) -> int:
    """Why ``layout`` cannot run ``model`` with ``m`` microbatches per replica: an index of :data:`INVALID_REASONS` (0: it can).

    Args:
      layout: the split.
      model: the model (heads, layers, sequence, global batch).
      m: microbatches per pipeline replica.
      gpus: the GPU total the layout must use (None: any).
      stages: the table's model chunks (interleaved schedules: ``v·p``); None: ``p``.
    """
    stages = layout.p if stages is None else stages
    checks = (
        gpus is not None and layout.gpus != gpus,
        model.heads % layout.tp != 0,
        model.kv_heads is not None and model.kv_heads % layout.tp != 0,
        model.layers % stages != 0,
        layout.cp > 1 and model.sequence % (2 * layout.cp) != 0,
        model.global_batch % (layout.dp * m) != 0,
    )
    return next((k + 1 for k, bad in enumerate(checks) if bad), 0)


def why_invalid(layout: Layout, model: ModelConfig, m: int, gpus: int | None = None, stages: int | None = None) -> str | None:
    """:func:`invalid_code` as a sentence naming the numbers (None: the layout can run)."""
    code = invalid_code(layout, model, m, gpus, stages)
    if code == 0:
        return None
    detail = {
        1: f"tp·p·dp·cp = {layout.gpus}, gpus = {gpus}",
        2: f"tp = {layout.tp}, heads = {model.heads}",
        3: f"tp = {layout.tp}, kv_heads = {model.kv_heads}",
        4: f"stages = {layout.p if stages is None else stages}, layers = {model.layers}",
        5: f"2·cp = {2 * layout.cp}, sequence = {model.sequence}",
        6: f"dp·m = {layout.dp * m}, global_batch = {model.global_batch}",
    }[code]
    return f"{INVALID_REASONS[code]} ({detail})"


def layouts_for(gpus: int, p: int, tp_values: Sequence[int], cp_values: Sequence[int]) -> list[tuple[int, int, int | None]]:
    """Every ``(tp, cp, dp)`` with the given ``p`` that uses ``gpus`` GPUs (``dp`` None where none does)."""
    out = []
    for tp in tp_values:
        for cp in cp_values:
            rest = gpus // (tp * p * cp) if gpus % (tp * p * cp) == 0 else None
            out.append((tp, cp, rest))
    return out


def replica_model(model: ModelConfig, layout: Layout) -> ModelConfig:
    """The model one pipeline replica runs: global batch ``G/dp`` (so ``b = G/(dp·m)``)."""
    if layout.dp == 1:
        return model
    return replace(model, global_batch=model.global_batch / layout.dp)


# ---- placement ----------------------------------------------------------------------------------
def rank_of(layout: Layout, coords: Mapping[str, int], order: Sequence[str] = MEGATRON_ORDER) -> int:
    """The global rank of the GPU at ``coords`` (``tp``, ``cp``, ``dp``, ``pp`` indices), ``order`` fastest first."""
    rank, stride = 0, 1
    for dim in order:
        rank += coords.get(dim, 0) * stride
        stride *= layout.size(dim)
    return rank


def node_of(rank: int, gpus_per_node: int) -> int:
    """Node of a rank: node ``n`` holds ranks ``[n·g, (n+1)·g)``."""
    return rank // gpus_per_node


def worker_node(layout: Layout, gpus_per_node: int, order: Sequence[str] = MEGATRON_ORDER) -> np.ndarray:
    """Node of each pipeline worker, ``(p,)`` ints: the node of its rank with ``tp = cp = dp = 0``.

    A pipeline hop between workers ``k`` and ``k+1`` crosses nodes exactly where their entries
    differ. Every other counterpart pair (same ``tp, cp, dp`` indices) crosses alike when ``g``
    and the strides are powers of two, as in every shipped system; :func:`hop_crossings` checks.
    """
    return np.array([node_of(rank_of(layout, {"pp": k}, order), gpus_per_node) for k in range(layout.p)], dtype=np.int64)


def hop_crossings(layout: Layout, gpus_per_node: int, order: Sequence[str] = MEGATRON_ORDER) -> np.ndarray:
    """For each hop ``k → k+1``, the share of counterpart GPU pairs on different nodes, ``(p−1,)``."""
    others = [(t, c, d) for t in range(layout.tp) for c in range(layout.cp) for d in range(layout.dp)]
    out = np.zeros(max(layout.p - 1, 0))
    for k in range(layout.p - 1):
        crossing = 0
        for t, c, d in others:
            a = rank_of(layout, {"tp": t, "cp": c, "dp": d, "pp": k}, order)
            b = rank_of(layout, {"tp": t, "cp": c, "dp": d, "pp": k + 1}, order)
            crossing += node_of(a, gpus_per_node) != node_of(b, gpus_per_node)
        out[k] = crossing / len(others)
    return out


def group_tier(layout: Layout, dim: str | tuple[str, ...], gpus_per_node: int, order: Sequence[str] = MEGATRON_ORDER) -> str:
    """``intra`` when every group along ``dim`` (ranks differing in that index only; a tuple: in those
    indices, e.g. ``("dp", "cp")``, the gradient group) lies in one node, else ``inter``."""
    dims = (dim,) if isinstance(dim, str) else tuple(dim)
    sizes = [layout.size(d) for d in dims]
    if int(np.prod(sizes)) == 1:
        return "intra"
    rest = [d for d in LAYOUT_DIMS if d not in dims]
    for values in np.ndindex(*[layout.size(d) for d in rest]):  # every group (they differ by an offset)
        coords = dict(zip(rest, values))
        nodes = {node_of(rank_of(layout, {**coords, **dict(zip(dims, inner))}, order), gpus_per_node)
                 for inner in np.ndindex(*sizes)}
        if len(nodes) > 1:
            return "inter"
    return "intra"


def ranks_per_node(layout: Layout, dim: str | tuple[str, ...], gpus_per_node: int, order: Sequence[str] = MEGATRON_ORDER) -> int:
    """The most ranks one group along ``dim`` (as :func:`group_tier`) has on one node."""
    dims = (dim,) if isinstance(dim, str) else tuple(dim)
    nodes: dict[int, int] = {}
    for inner in np.ndindex(*[layout.size(d) for d in dims]):  # the first group; the others are offsets of it
        node = node_of(rank_of(layout, dict(zip(dims, inner)), order), gpus_per_node)
        nodes[node] = nodes.get(node, 0) + 1
    return max(nodes.values())


def group_link(layout: Layout, dim: str | tuple[str, ...], gpus_per_node: int, tiers: Mapping[str, "Tier"],
               order: Sequence[str] = MEGATRON_ORDER) -> "Tier":
    """The α and β a ring collective of the group along ``dim`` runs at (docs/contract.md §3b).

    Within one node: the intra tier. Across nodes: the inter tier's latency, and a bandwidth of
    ``min(β_intra, k · β_inter)`` where ``k`` is the group's ranks on one node: each of them has
    its own network port (``β_inter`` is per GPU) and the collective's channels use them all, as
    NCCL's rings do, so the ring's node crossings carry ``k`` ports' worth.
    """
    if group_tier(layout, dim, gpus_per_node, order) == "intra":
        return tiers["intra"]
    k = ranks_per_node(layout, dim, gpus_per_node, order)
    inter, intra = tiers["inter"], tiers["intra"]
    return Tier(inter.alpha, np.minimum(intra.beta, k * np.asarray(inter.beta, dtype=float)))


# ---- collectives (ring, α-β) -----------------------------------------------------------------------
def all_reduce_time(n: int, n_bytes: Any, alpha: Any, beta: Any) -> Any:
    """Ring all-reduce of ``n_bytes`` over ``n`` ranks: ``2(n−1)(α + (bytes/n)/β)`` (0 for ``n = 1``)."""
    return RingAllReduce(n).time(alpha, n_bytes, beta)


def reduce_scatter_time(n: int, n_bytes: Any, alpha: Any, beta: Any) -> Any:
    """Ring reduce-scatter (or all-gather) of ``n_bytes`` in all over ``n`` ranks: ``(n−1)(α + (bytes/n)/β)``."""
    return (n - 1) * message_time(alpha, wire_time(np.asarray(n_bytes, dtype=float) / n, beta))


all_gather_time = reduce_scatter_time


# ---- per-layer times -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Tier:
    """One network tier: latency ``alpha`` (s) and bandwidth ``beta`` (bytes/s), numbers or arrays."""

    alpha: Any
    beta: Any


def tiers_of(system: SystemConfig, alpha: Any = None, beta: Any = None) -> dict[str, Tier]:
    """The system's ``intra`` and ``inter`` tiers; ``alpha``/``beta`` (the sweep's axes) override the inter tier."""
    inter = Tier(system.latency if alpha is None else alpha, system.bandwidth if beta is None else beta)
    intra_alpha = system.intra_latency if system.intra_latency is not None else inter.alpha
    intra_beta = system.intra_bandwidth if system.intra_bandwidth is not None else inter.beta
    return {"inter": inter, "intra": Tier(intra_alpha, intra_beta)}


@dataclass(frozen=True)
class LayerTimes:
    """Seconds of one layer's operations on one GPU, and their collectives (arrays broadcast).

    ``f``, ``b``, ``i``, ``w``: the operations including what is exposed of their collectives;
    ``tp_f``, ``tp_b``, ``cp_f``, ``cp_b``: the collectives alone (forward, backward).
    """

    f: Any
    b: Any
    i: Any
    w: Any
    tp_f: Any
    tp_b: Any
    cp_f: Any
    cp_b: Any


def layer_times(model: ModelConfig, system: SystemConfig, b: Any, layout: Layout, options: LayoutOptions,
                tiers: Mapping[str, Tier], gpus_per_node: int, peak_flops: Any = None) -> LayerTimes:
    """One layer's forward, backward, I and W seconds on one GPU of ``layout`` (docs/contract.md §3b).

    Args:
      model: the replica's model (:func:`replica_model`).
      system: the system.
      b: microbatch size, sequences (broadcasts).
      layout, options: the split and how its collectives run.
      tiers: ``intra`` and ``inter`` :class:`Tier` (:func:`tiers_of`).
      gpus_per_node: GPUs per node (for the tiers of the TP and CP groups).
      peak_flops: override of the system's peak (a ``compute`` axis).
    """
    tp, cp = layout.tp, layout.cp
    split = float(tp * cp)
    flops = model.layer_forward_flops(b) / split
    moved = model.params_per_layer * model.bytes_per_value / tp + model.layer_produced_bytes(b) / split
    extra_flops = model.layer_recompute_flops(b) / split
    extra_bytes = model.layer_recompute_bytes(b) / split
    compute = {
        "f": roofline_time(system, flops, moved, peak_flops),
        "b": roofline_time(system, 2.0 * flops + extra_flops, 2.0 * moved + extra_bytes, peak_flops),
        "i": roofline_time(system, flops + extra_flops, moved + extra_bytes, peak_flops),
        "w": roofline_time(system, flops, moved, peak_flops),
    }
    tokens = b * model.sequence / cp
    tp_tier = group_link(layout, "tp", gpus_per_node, tiers, options.order)
    activations = tokens * model.hidden * model.bytes_per_value
    if options.sequence_parallel:
        one = all_gather_time(tp, activations, tp_tier.alpha, tp_tier.beta) + reduce_scatter_time(tp, activations, tp_tier.alpha, tp_tier.beta)
    else:
        one = all_reduce_time(tp, activations, tp_tier.alpha, tp_tier.beta)
    tp_f = 2.0 * one
    tp_b = 2.0 * one + (tp_f if model.recompute == "full" else 0.0)
    cp_tier = group_link(layout, "cp", gpus_per_node, tiers, options.order)
    kv = 2.0 * tokens * model.kv_hidden / tp * model.bytes_per_value
    cp_f = (cp - 1) * message_time(cp_tier.alpha, wire_time(kv, cp_tier.beta))
    cp_b = 2.0 * cp_f + (cp_f if model.recompute == "full" else 0.0)

    def combine(work: Any, tp_comm: Any, cp_comm: Any) -> Any:
        exposed = work + (0.0 if options.tp_overlap else tp_comm) + (0.0 if options.cp_overlap else cp_comm)
        hidden = (tp_comm if options.tp_overlap else 0.0) + (cp_comm if options.cp_overlap else 0.0)
        return np.maximum(exposed, hidden)

    return LayerTimes(
        f=combine(compute["f"], tp_f, cp_f),
        b=combine(compute["b"], tp_b, cp_b),
        i=combine(compute["i"], tp_b, cp_b),  # the input gradient carries the backward's collectives
        w=compute["w"],
        tp_f=tp_f, tp_b=tp_b, cp_f=cp_f, cp_b=cp_b,
    )


def message_bytes(model: ModelConfig, b: Any, layout: Layout, options: LayoutOptions) -> Any:
    """Bytes one GPU sends at a stage boundary: ``b·(s/cp)·h`` values, ``/tp`` with scatter/gather or SP."""
    split = layout.cp * (layout.tp if (options.sequence_parallel or options.scatter_gather) else 1)
    return model.message_bytes(b) / split


def dp_sync_time(grad_bytes: Any, layout: Layout, options: LayoutOptions, tier: Tier, window: Any = 0.0) -> Any:
    """Exposed seconds of a worker's DP gradient synchronisation at the step end.

    Args:
      grad_bytes: the worker's gradient bytes on one GPU (its parameters ``/tp`` times bytes per value).
      layout, options: the split (the gradient group: ``dp · cp`` ranks, as Megatron reduces over
        data and context parallelism together) and ZeRO-1 / ``grad_overlap``.
      tier: the gradient group's tier.
      window: seconds the reduction may hide under with ``grad_overlap`` (the worker's last backward).

    Returns:
      Without ZeRO-1 ``max(0, all-reduce − window)``; with it ``max(0, reduce-scatter − window)``
      plus the parameters' all-gather (same bytes, never hidden).
    """
    n = layout.dp * layout.cp  # context-parallel ranks hold the same weights: one gradient group
    hide = window if options.grad_overlap else 0.0
    if options.zero1:
        reduce = reduce_scatter_time(n, grad_bytes, tier.alpha, tier.beta)
        gather = all_gather_time(n, grad_bytes, tier.alpha, tier.beta)
        return np.maximum(reduce - hide, 0.0) + gather
    return np.maximum(all_reduce_time(n, grad_bytes, tier.alpha, tier.beta) - hide, 0.0)


def model_flops_per_step(model: ModelConfig) -> float:
    """Model FLOPs of one step without recomputation: ``3 ×`` the forward of ``G`` sequences (layers and LM head)."""
    return 3.0 * (model.layers * model.layer_forward_flops(model.global_batch) + model.head_forward_flops(model.global_batch))


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending."""
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))



# ---- one table under a layout --------------------------------------------------------------------
@dataclass(frozen=True)
class LayoutCosts:
    """What one table costs under a layout, over a broadcast point grid.

    Attributes:
      costs: the engine's :class:`~ppsweep.engine.cost_grid.Costs` (both tiers: a hop between workers
        of one node takes the intra tier, :mod:`ppsweep.engine.tiers`).
      worker_node: ``(p,)`` node of each pipeline worker (:func:`worker_node`).
      dp_exposed: seconds the DP synchronisation adds to the step, broadcast point shape.
      tiers: the tier of each group: ``{"tp": ..., "cp": ..., "dp": ...}`` (``dp``: the gradient
        group of ``dp · cp`` ranks).
    """

    costs: Any
    worker_node: np.ndarray
    dp_exposed: Any
    tiers: dict[str, str]


def layout_costs(model: ModelConfig, system: SystemConfig, table, layout: Layout, options: LayoutOptions,
                 alpha: Any = None, beta: Any = None, peak_flops: Any = None) -> LayoutCosts:
    """Costs of ``table`` (``layout.p`` workers, the replica's ``m``) under ``layout`` (docs/contract.md §3b).

    Args:
      model: the whole model (``global_batch`` is the global batch; each replica runs ``G/dp``).
      system: the system (its tiers and ``gpus_per_node``).
      table: the schedule table (``table.p == layout.p``).
      layout, options: the split and its collectives' options.
      alpha, beta: the inter-node tier's latency and bandwidth (the sweep's ``latency`` and
        ``bandwidth`` axes; None: the system's), broadcast into the point shape.
      peak_flops: override of the system's peak (broadcasts like ``alpha``).

    Returns:
      :class:`LayoutCosts`.
    """
    from ppsweep.cost_model import stage_layers
    from ppsweep.engine.cost_grid import Costs

    if table.p != layout.p:
        raise ValueError(f"p: the table has p={table.p}, the layout p={layout.p}")
    replica = replica_model(model, layout)
    b = replica.microbatch_size(table.m)
    g = system.gpus_per_node
    tiers = tiers_of(system, alpha, beta)
    names = {dim: group_tier(layout, dim, g, options.order) for dim in ("tp", "cp")}
    names["dp"] = group_tier(layout, ("dp", "cp"), g, options.order)  # the gradient group: dp·cp ranks
    lt = layer_times(replica, system, b, layout, options, tiers, g, peak_flops)
    layers = stage_layers(replica, table)
    times = {k: np.asarray(getattr(lt, k), dtype=float)[..., None] * layers for k in ("f", "b", "i", "w")}
    params = layers * replica.params_per_layer
    if replica.head_compute:
        split = float(layout.tp * layout.cp)
        ends = ((0, roofline_time(system, 0.0, replica.embedding_forward_bytes(b) / split, peak_flops)),
                (-1, roofline_time(system, replica.head_forward_flops(b) / split, replica.head_forward_bytes(b) / split, peak_flops)))
        for stage, forward in ends:
            forward = np.asarray(forward, dtype=float)
            for kind, factor in (("f", 1.0), ("b", 2.0), ("i", 1.0), ("w", 1.0)):
                shape = np.broadcast_shapes(times[kind].shape, forward.shape + (1,))
                times[kind] = np.broadcast_to(times[kind], shape).copy()
                times[kind][..., stage] += factor * forward
    params = params.copy()
    params[0] += replica.embedding_params
    params[-1] += replica.embedding_params
    grad_values = params / layout.tp
    grad_bpv = replica.bytes_per_value if options.grad_bytes_per_value is None else options.grad_bytes_per_value
    # DP: each worker's gradients (every stage it holds), hidden under its shortest backward.
    dp_tier = group_link(layout, ("dp", "cp"), g, tiers, options.order)
    exposed = 0.0
    for w in range(table.p):
        held = [table.placement[r, s] == w for r in range(table.n_replicas) for s in range(table.n_stages)]
        stages = [s for r in range(table.n_replicas) for s in range(table.n_stages) if table.placement[r, s] == w]
        if not any(held):
            continue
        window = np.min(np.stack([np.asarray(times["b"][..., s]) for s in stages]), axis=0)
        worker_bytes = float(sum(grad_values[s] for s in stages)) * grad_bpv
        exposed = np.maximum(exposed, dp_sync_time(worker_bytes, layout, options, dp_tier, window))
    inter = tiers["inter"]
    msg = message_bytes(replica, b, layout, options)
    costs = Costs.of(table.n_stages, times["f"], times["b"], inter.alpha, inter.beta, msg, t_i=times["i"],
                     t_w=times["w"], grad_bytes=grad_values * replica.bytes_per_value, t_opt=system.optimizer_time,
                     fb_overlap=system.fb_overlap, alpha_intra=tiers["intra"].alpha, beta_intra=tiers["intra"].beta)
    return LayoutCosts(costs=costs, worker_node=worker_node(layout, g, options.order), dp_exposed=exposed, tiers=names)


def simulate_layout(table, lc: LayoutCosts, mode: str = "overlap", **kwargs: Any):
    """``simulate`` of ``table`` at ``lc``'s costs, every pipeline hop on the tier placement gives it.

    Returns:
      ``(result, t_step)``: the engine's :class:`~ppsweep.engine.core.SimResult` and the step
      time ``t_sim + dp_exposed`` (s).
    """
    from ppsweep.engine.core import simulate

    result = simulate(table, lc.costs, mode, worker_node=lc.worker_node, **kwargs)
    return result, result.t_sim + lc.dp_exposed


def unpipelined_step(model: ModelConfig, system: SystemConfig, layout: Layout, options: LayoutOptions, m: int,
                     alpha: Any = None, beta: Any = None) -> Any:
    """Step time of a layout with ``p = 1`` (no pipeline, no table): ``m · (t_f + t_b)`` plus the DP synchronisation.

    The one worker holds every layer, the embedding and the LM head; its ``m`` microbatches run
    one after the other (forward, then backward), which is what every schedule does at ``p = 1``.
    """
    from types import SimpleNamespace

    if layout.p != 1:
        raise ValueError(f"p: unpipelined_step is for p = 1, got p = {layout.p}")
    one = SimpleNamespace(p=1, m=m, n_stages=1, n_replicas=1, stage_fractions=(1.0,), placement=np.zeros((1, 1), dtype=int))
    lc = layout_costs(model, system, one, layout, options, alpha, beta)
    return m * (lc.costs.t_f[..., 0] + lc.costs.t_b[..., 0]) + lc.dp_exposed
