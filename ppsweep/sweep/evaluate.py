"""Sweeps: a grid of points, cut into units of work, each evaluated at all three levels.

A :class:`SweepSpec` (:mod:`ppsweep.sweep.config`) is the validated form of a sweep's config. Its grid
has the dimensions ``schedule × p × m [× recompute] [× comm] × point dimensions`` (``[compute ×]
bandwidth × latency``, :data:`ppsweep.sweep.dimensions.POINT_DIMENSIONS`; and ``memory_capacity``
for ``fits``). One **unit** of work is one ``(p, m)`` pair with every schedule, mode and value of
the point dimensions: it builds each
schedule's table once, runs the engine over all the unit's points that share it, and ranks the
schedules point by point. A unit is also one chunk of the store (:mod:`ppsweep.store.units`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ppsweep.tables.build import UnsupportedPointError
from ppsweep.sweep.unit_tables import record_table, unit_tables
from ppsweep.sweep.config import SweepSpec
from ppsweep.sweep.dimensions import POINT_DIMENSION_NAMES, POINT_DIMENSIONS, grid_arguments
from ppsweep.cost_model import MemoryFigures, ModelConfig, engine_costs, memory_figures, stage_costs
from ppsweep.cost_profile import StageCountError, engine_costs_from_profile, profile_memory, stage_values
from ppsweep.engine.core import simulate
from ppsweep.engine.cost_grid import Costs
from ppsweep.engine.compiled import program_for
from ppsweep.engine.methods import method_backend
from ppsweep.engine.tiers import nodes_of
from ppsweep.sweep.ranking import rank_lower_better
from ppsweep.store.schema import empty_unit
from ppsweep.sweep.timing import phase

__all__ = ["SweepSpec", "evaluate_unit", "simulate_table"]

#: Dimensions of the engine's results for one table, in the order :func:`simulate_table` builds them:
#: the point grid has one axis per registered point dimension (length 1 where the sweep has none).
ENGINE_DIMS = ("comm", *POINT_DIMENSION_NAMES, "sample")


def evaluate_unit(spec: SweepSpec, p_index: int, m_index: int) -> dict[str, np.ndarray]:
    """Evaluate one ``(p, m)`` unit at all three levels.

    Returns:
      ``name -> array``: point variables with dimensions ``spec.point_dims``, table variables and
      ``valid`` with ``spec.table_dims``; the ``p`` and ``m`` axes have length 1 (this unit).
    """
    if spec.has_layout:  # tp, dp, cp, gpus or systems (docs/contract.md §3b)
        from ppsweep.sweep.layout_eval import evaluate_layout_unit

        return evaluate_layout_unit(spec, p_index, m_index)
    p, m = spec.p[p_index], spec.m[m_index]
    # Every variable's dimensions start with schedule, p, m (then recompute, where the sweep has it):
    # a table's values go to [k, 0, 0] or [k, 0, 0, r], its points' arrays fill the dimensions after.
    out = empty_unit(spec)
    models = spec.models()
    for k, name, table in unit_tables(spec, p, m):
        with phase("build"):
            try:
                memory = _memory(spec, models, table, m)
            except UnsupportedPointError:
                continue
        cap = spec.system.memory_capacity  # a scalar cap (never with a recompute dimension)
        if cap is not None and memory[spec.model.recompute].peak_memory_bytes > cap:
            continue
        here = (k, 0, 0)
        record_table(out, here, spec, name, table, p, m)
        with phase("compile"):
            program_for(table)
        for r, (mode, model) in enumerate(models.items()):
            at = (*here, r) if spec.recompute is not None else here
            if memory[mode] is not None:  # None: a profile without memory (NaN)
                out["peak_activation_bytes"][at] = memory[mode].peak_activation_bytes
                out["persistent_bytes"][at] = memory[mode].persistent_bytes
                out["peak_memory_bytes"][at] = memory[mode].peak_memory_bytes
                if "fits" in out:
                    out["fits"][at] = memory[mode].peak_memory_bytes <= spec.memory_capacity
            with phase("evaluate"):
                engine_results = simulate_table(spec, table, model)
            for name_, value in engine_results.items():
                out[name_][at] = value
    for rank, by in (("rank_formula", "bubble_formula"), ("rank_table", "bubble_table"), ("rank_sim", "t_sim")):
        out[rank] = rank_lower_better(out[by], axis=0)  # axis 0: schedule
    return out


def _memory(spec: SweepSpec, models: dict[str, ModelConfig], table, m: int) -> dict[str, MemoryFigures | None]:
    """The bottleneck worker's memory per recomputation mode: the cost model's, or the profile's (None where it gives none).

    Raises:
      UnsupportedPointError: the profile does not fit the table (its stage count, or a table that
        cuts the point's microbatches in halves: the profile measured whole ones).
    """
    if spec.profile is None:
        # table.m: chimera@concat=backward_halving runs 2m half-microbatches at the point m
        return {mode: memory_figures(model, table, table.m) for mode, model in models.items()}
    if table.m != m:
        raise UnsupportedPointError(f"{table.name}: runs {table.m} part-microbatches at m={m}; the profile measured whole ones")
    try:
        figures = profile_memory(spec.profile, table)
        stage_values(spec.profile.t_f, spec.profile.n_stages, table.n_stages)
    except StageCountError as error:
        raise UnsupportedPointError(str(error)) from None
    return dict.fromkeys(models, figures)


def table_costs(spec: SweepSpec, table, model: ModelConfig) -> tuple[Costs, float]:
    """The engine's costs of ``table`` at the sweep's points (one axis per point dimension, in store
    order), and the global batch a step trains (its throughput's numerator).

    Args:
      spec: the sweep.
      table: the schedule table.
      model: the model (one recomputation mode of the sweep).
    """
    system = spec.system
    # One axis per point dimension, in store order (length 1 where the sweep has none: the
    # system's value). bandwidth and latency are the tier between nodes, the tier within one is
    # the system's (docs/contract.md §4b).
    grid = grid_arguments(POINT_DIMENSIONS, {d.name: getattr(spec, d.name) for d in POINT_DIMENSIONS}, system)
    stage = {d.reaches: grid.pop(d.reaches) for d in POINT_DIMENSIONS if d.stage}
    intra = {"alpha_intra": system.intra_latency, "beta_intra": system.intra_bandwidth}
    scalars = {"fb_overlap": system.fb_overlap, "t_opt": system.optimizer_time}  # the system's, unless a point dimension sets them
    if spec.profile is None:
        costs = stage_costs(model, system, table, **stage)
        point = engine_costs(costs, point_axes=len(POINT_DIMENSIONS) - 1, **{**scalars, **grid}, **intra)
        global_batch = model.global_batch
    else:  # measured times per microbatch: the global batch is m microbatches of the profile's size
        # a dimension the profile gives (its key refused) takes the profile's value
        given = {d.reaches for d in POINT_DIMENSIONS if d.refused_by(spec.profile) is not None}
        network = {} if spec.profile.message_is_time else intra
        point = engine_costs_from_profile(spec.profile, table, **{**scalars, **{k: v for k, v in grid.items() if k not in given}},
                                          **network)
        if spec.profile.message_is_time:  # the point shape of the sweep's one bandwidth and latency
            point = dataclasses.replace(point, alpha=np.broadcast_to(point.alpha, (1,) * len(POINT_DIMENSIONS)))
        global_batch = table.m * (spec.profile.microbatch_size or 1.0)
    return point, global_batch


def simulate_table(spec: SweepSpec, table, model: ModelConfig | None = None) -> dict[str, np.ndarray]:
    """Engine results of one table over the unit's ``[comm ×] point dimensions [× sample]`` points.

    Args:
      spec: the sweep.
      table: the schedule table.
      model: the model (one recomputation mode of the sweep); default ``spec.model``.

    Returns:
      ``t_sim``, ``throughput``, ``idle_sim`` and ``comm_time``, each with the dimensions of
      ``spec.point_dims`` after ``schedule``, ``p``, ``m`` (and ``recompute``), in that order; with noise also ``t_sim_nominal``
      (the noise-free step time, no ``sample`` dimension).
    """
    model = spec.model if model is None else model
    point, global_batch = table_costs(spec, table, model)
    worker_node = nodes_of(table.p, spec.system.gpus_per_node)
    noise = spec.noise if spec.noise.enabled else None
    dims = ENGINE_DIMS if noise else ENGINE_DIMS[:-1]
    per_mode = []
    for mode in spec.comm:
        run = lambda noise: simulate(  # noqa: E731
            table, point, mode, dtype=spec.dtype, chunk=spec.chunk, backend=method_backend(spec.method), finish=False, noise=noise,
            worker_node=worker_node,
        )
        result = run(noise)
        t_sim = result.t_sim
        per_mode.append(
            {
                "t_sim": t_sim,
                "throughput": global_batch / t_sim,
                "idle_sim": result.idle_fraction(table.p),
                "comm_time": result.comm_time,
            }
        )
        if noise:  # the noise-free step time (zero noise repeats it along the samples)
            per_mode[-1]["t_sim_nominal"] = t_sim[..., 0] if noise.is_zero else run(None).t_sim
    out = {}
    for name in per_mode[0]:
        here = dims if name != "t_sim_nominal" else ENGINE_DIMS[:-1]
        out[name] = _arrange(np.stack([r[name] for r in per_mode]), here, spec.point_dims)
    return out


def _arrange(value: np.ndarray, dims: Sequence[str], point_dims: Sequence[str]) -> np.ndarray:
    """``value`` (dimensions ``dims``, in store order) without the dimensions ``point_dims`` lacks.

    A dimension the sweep does not have has length 1 in ``value``; :data:`ENGINE_DIMS` is in store
    order (:data:`ppsweep.sweep.config.DIMENSIONS`), so dropping those is all the arranging needed.
    """
    return value.reshape(tuple(n for d, n in zip(dims, value.shape) if d in point_dims))
