"""Where a searched schedule must be good: one point or a region of costs, with noise, and the figures a table gets there.

A :class:`Region` holds the compute costs of the model's stages (``t_f``, ``t_i``, ``t_w`` per
*profiled* stage, seconds per microbatch: one value for every worker's stage, or one value per
profiled stage), the message (``msg_bytes`` over grids of ``latency`` and ``bandwidth``) and
optional noise. Every table is costed the way :mod:`ppsweep.cost_profile` costs a profile
(PROFILE_SCHEMA's stage-count rule, :func:`ppsweep.cost_profile.stage_values`): a table with
``S = k·S_prof`` stages splits each profiled stage into ``k`` consecutive chunks of ``1/k`` of its
times; ``S_prof = k·S`` merges ``k`` consecutive profiled stages (times summed). One value counts
as ``p`` profiled stages: the search compares tables of different stage counts for one model, so
a table with ``v`` chunks per worker gives each chunk ``1/v`` of it.

:func:`figures` runs the engine once per table over the whole grid (``ppsweep.engine.simulate`` on
broadcast arrays: ``(latency, bandwidth)`` points, with noise a trailing ``sample`` axis), in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ppsweep.engine.noise import NoiseConfig
from ppsweep.tables.ops import Kind
from ppsweep.tables.table import ScheduleTable

#: The objectives a search minimizes (``pwin`` is maximized: its score is ``-P(win)``).
OBJECTIVES = ("mean", "worst", "p95", "pwin", "bubble")


def _stage_values(name: str, value: Any) -> np.ndarray:
    array = np.atleast_1d(np.asarray(value, dtype=float))
    if array.ndim != 1 or not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError(f"{name}: must be a number or one number per profiled stage, each finite and >= 0, got {value!r}")
    return array


@dataclass(frozen=True)
class Region:
    """Costs of one point or a grid of points (module docstring).

    Attributes:
      t_f, t_i, t_w: forward, input-gradient and weight-gradient seconds per microbatch of each
        profiled stage (tuples; length 1 = the same for every stage). A full backward lasts ``t_i + t_w``.
      latency: message latencies, s (the grid's first axis). bandwidth: bytes/s (second axis; ``inf`` allowed).
      msg_bytes: bytes of one point-to-point message.
      t_opt: optimizer seconds per worker. mode: communication mode of the engine.
      noise: per-operation and per-message noise (``samples > 0``), or None.
      activation_bytes: bytes of one stored activation of each profiled stage (memory caps in
        bytes), or None.
      w_share: share of a stage's activation a split backward keeps from its I to its W (the
        zero-bubble paper's ``M_W/M_B``; 1, the default, is the table's rule: all of it until W).
      overhead: seconds every pass (F, B, I, W) costs besides its share of the stage's compute
        (a runtime's dispatch), added after the stage split: a chunk pays it whole.
    """

    t_f: tuple[float, ...]
    t_i: tuple[float, ...]
    t_w: tuple[float, ...]
    latency: tuple[float, ...] = (0.0,)
    bandwidth: tuple[float, ...] = (float("inf"),)
    msg_bytes: float = 0.0
    t_opt: float = 0.0
    mode: str = "overlap"
    noise: NoiseConfig | None = None
    activation_bytes: tuple[float, ...] | None = None
    w_share: float = 1.0
    overhead: float = 0.0

    @classmethod
    def of(cls, t_f: Any, t_i: Any, t_w: Any, *, latency: Any = 0.0, bandwidth: Any = np.inf, msg_bytes: float = 0.0,
           t_opt: float = 0.0, mode: str = "overlap", noise: NoiseConfig | None = None,
           activation_bytes: Any = None, w_share: float = 1.0, overhead: float = 0.0) -> Region:
        """A checked region (every bad field named in a one-line ValueError)."""
        from ppsweep.engine.comm import check_mode

        stages = {k: _stage_values(k, v) for k, v in (("t_f", t_f), ("t_i", t_i), ("t_w", t_w))}
        lengths = {len(v) for v in stages.values()} - {1}
        if len(lengths) > 1:
            raise ValueError(f"t_f, t_i, t_w: must have one value or the same number of stages, got {sorted(lengths)}")
        if min(float(stages["t_f"].min()), float((stages["t_i"] + stages["t_w"]).min())) <= 0:
            raise ValueError("t_f, t_i + t_w: must be > 0 on every stage")
        lat = np.atleast_1d(np.asarray(latency, dtype=float))
        bw = np.atleast_1d(np.asarray(bandwidth, dtype=float))
        if lat.ndim != 1 or np.any(~np.isfinite(lat)) or np.any(lat < 0):
            raise ValueError(f"latency: must be finite seconds >= 0 (a number or a list), got {latency!r}")
        if bw.ndim != 1 or np.any(np.isnan(bw)) or np.any(bw <= 0):
            raise ValueError(f"bandwidth: must be bytes/s > 0 (inf allowed; a number or a list), got {bandwidth!r}")
        if not (np.isfinite(msg_bytes) and msg_bytes >= 0):
            raise ValueError(f"msg_bytes: must be finite and >= 0, got {msg_bytes!r}")
        check_mode(mode)
        if not (np.isfinite(overhead) and overhead >= 0):
            raise ValueError(f"overhead: must be finite seconds >= 0, got {overhead!r}")
        if not 0 <= w_share <= 1:
            raise ValueError(f"w_share: must be in [0, 1] (share of an activation kept from I to W), got {w_share!r}")
        act = None if activation_bytes is None else tuple(_stage_values("activation_bytes", activation_bytes).tolist())
        return cls(*(tuple(stages[k].tolist()) for k in ("t_f", "t_i", "t_w")), tuple(lat.tolist()), tuple(bw.tolist()),
                   float(msg_bytes), float(t_opt), mode, noise, act, float(w_share), float(overhead))

    @classmethod
    def from_profile(cls, profile: Any, *, latency: Any = None, bandwidth: Any = None, noise: NoiseConfig | None = None,
                     mode: str = "overlap", w_share: float = 1.0) -> Region:
        """The region of a :class:`ppsweep.cost_profile.CostProfile` (PROFILE_SCHEMA.md).

        Its message (:meth:`~ppsweep.cost_profile.CostProfile.network`: ``msg_time`` is the latency
        with bandwidth ``inf``); ``latency``/``bandwidth`` given here replace the profile's (a grid).
        A profile of scalars is read as one value per worker's stage (the search compares tables of
        different stage counts for one model: ``v`` chunks take ``1/v`` each).
        """
        alpha, beta, msg_bytes = profile.network()
        return cls.of(profile.t_f, profile.t_i, profile.t_w, latency=alpha if latency is None else latency,
                      bandwidth=beta if bandwidth is None else bandwidth, msg_bytes=msg_bytes,
                      t_opt=profile.t_opt or 0.0, mode=mode, noise=noise, activation_bytes=profile.activation_bytes,
                      w_share=w_share)

    @property
    def shape(self) -> tuple[int, int]:
        """Points of the grid: ``(len(latency), len(bandwidth))``."""
        return (len(self.latency), len(self.bandwidth))

    def per_stage(self, values: tuple[float, ...], table: ScheduleTable) -> np.ndarray | str:
        """``values`` on the table's stages, or why they do not map: one value is a whole worker's stage
        (``p`` profiled stages); several follow the profiled-costs rule (:func:`ppsweep.cost_profile.stage_values`)."""
        from ppsweep.cost_profile import stage_values

        try:
            return stage_values(values * table.p if len(values) == 1 else values, len(values) * table.p if len(values) == 1
                                else len(values), table.n_stages)
        except ValueError as error:
            return str(error)

    def table_costs(self, table: ScheduleTable):
        """The engine's :class:`~ppsweep.engine.cost_grid.Costs` of ``table`` over the grid, or a one-line reason why not."""
        from ppsweep.engine.cost_grid import Costs

        stage = {}
        for name in ("t_f", "t_i", "t_w"):
            costed = self.per_stage(getattr(self, name), table)
            if isinstance(costed, str):
                return costed
            stage[name] = costed
        lat = np.asarray(self.latency)[:, None]
        bw = np.asarray(self.bandwidth)[None, :]
        o = self.overhead
        return Costs.of(table.n_stages, stage["t_f"] + o, stage["t_i"] + stage["t_w"] + o, lat, bw, self.msg_bytes,
                        t_i=stage["t_i"] + o, t_w=stage["t_w"] + o, t_opt=self.t_opt)

    def busy(self) -> float:
        """``m``-independent busy time of one microbatch on one whole worker stage: ``max`` over workers of ``F + I + W``."""
        return float(np.max(np.asarray(self.t_f) + np.asarray(self.t_i) + np.asarray(self.t_w)))


@dataclass(frozen=True)
class Figures:
    """A table's figures over a region.

    Attributes:
      t_sim: step times, s, ``region.shape`` (``+ (samples,)`` with noise).
      mean, worst, p95: their mean, maximum and 95th percentile, s.
      bubble: the zero-bubble paper's bubble rate at each point (noise-free), ``region.shape``;
        NaN where a worker does not start with microbatch 0's first forward (see :func:`zb_bubble`).
      peak: the busiest worker's peak activations, in microbatches' activations of a whole stage
        (``M_B``; a chunk of ``v`` counts ``1/v``), or bytes where the region has ``activation_bytes``.
    """

    t_sim: np.ndarray
    mean: float
    worst: float
    p95: float
    bubble: np.ndarray
    peak: float


def peak_activations(table: ScheduleTable, region: Region | None = None) -> float:
    """The busiest worker's peak stored activations: in ``M_B`` (module :class:`Figures`), or bytes with
    ``activation_bytes``; a split backward keeps ``region.w_share`` of its activation from its I to its W."""
    from ppsweep.cost_model.memory import pending_profile  # the I-to-W profile, shared with the model's memory figures

    weights = np.asarray(table.stage_fractions, dtype=float) * table.p
    if region is not None and region.activation_bytes is not None:
        weights = region.per_stage(region.activation_bytes, table)
        if isinstance(weights, str):
            raise ValueError(f"activation_bytes: {weights}")
    profile = table.activation_profile(weights)
    share = 1.0 if region is None else region.w_share
    if table.split_backward and share < 1:
        profile = profile - pending_profile(table, (1 - share) * np.asarray(weights, dtype=float))
    return float(profile.max(initial=0.0))


def worker_starts(table: ScheduleTable, costs: Any) -> np.ndarray | None:
    """When each worker's first operation starts, ``batch + (p,)``: where every worker ``w`` starts with
    ``F(0, w)`` and stages ``0 … p-1`` run down workers ``0 … p-1``, the sum of the forwards and
    messages before it (no noise); else None."""
    from ppsweep.engine.comm import message_time, wire_time

    orders = table.orders()
    placement = table.placement[0]
    for w in range(table.p):
        first = orders[w][0]
        if not (first.kind == Kind.F and first.micro == 0 and first.stage == w and placement[w] == w):
            return None
    hop = message_time(np.asarray(costs.alpha), wire_time(np.asarray(costs.msg_bytes), np.asarray(costs.beta)))
    t_f = np.broadcast_to(costs.t_f, np.broadcast_shapes(np.shape(costs.t_f), (1,) * np.ndim(hop) + (table.n_stages,)))
    steps = t_f[..., : table.p - 1] + np.asarray(hop)[..., None]
    return np.concatenate([np.zeros(steps.shape[:-1] + (1,)), np.cumsum(steps, axis=-1)], axis=-1)


def zb_bubble(table: ScheduleTable, costs: Any, worker_finish: np.ndarray, busy: float) -> np.ndarray:
    """The zero-bubble paper's bubble rate ``(cost - m·(T_F+T_B+T_W)) / cost``, ``cost`` the longest
    stage span (a worker's last finish minus its first start); NaN where :func:`worker_starts` cannot tell."""
    starts = worker_starts(table, costs)
    if starts is None:
        return np.full(np.shape(worker_finish)[:-1], np.nan)
    span = (np.asarray(worker_finish) - starts).max(axis=-1)
    return (span - table.m * busy) / span


def figures(table: ScheduleTable, region: Region) -> Figures | str:
    """The table's :class:`Figures` over ``region`` (one engine call, two with noise), or why it cannot be costed."""
    from ppsweep.engine import simulate

    costs = region.table_costs(table)
    if isinstance(costs, str):
        return costs
    clean = simulate(table, costs, region.mode, backend="scan")  # the envelope's compilation does not pay for one table
    bubble = zb_bubble(table, costs, np.asarray(clean.worker_finish), region.busy())
    t = np.asarray(clean.t_sim, dtype=float)
    if region.noise is not None and region.noise.enabled:
        t = np.asarray(simulate(table, costs, region.mode, noise=region.noise, finish=False, backend="scan").t_sim, dtype=float)
    return Figures(t, float(t.mean()), float(t.max()), float(np.percentile(t, 95)), bubble, peak_activations(table, region))


def score(fig: Figures, objective: str, incumbent_t: np.ndarray | None = None) -> float:
    """The value a search minimizes: ``mean``, ``worst``, ``p95`` step time, ``bubble`` (mean rate), or
    ``pwin``: minus the share of points (and samples) where ``fig`` is faster than ``incumbent_t``."""
    if objective == "mean":
        return fig.mean
    if objective == "worst":
        return fig.worst
    if objective == "p95":
        return fig.p95
    if objective == "bubble":
        return float(np.mean(fig.bubble))
    if objective == "pwin":
        if incumbent_t is None:
            raise ValueError("objective pwin: needs the incumbents' step times")
        return -float(np.mean(fig.t_sim < incumbent_t))
    raise ValueError(f"objective: unknown {objective!r}; accepted: {', '.join(OBJECTIVES)}")
