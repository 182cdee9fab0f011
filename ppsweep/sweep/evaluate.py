"""Sweeps: a grid of points, cut into units of work, each evaluated at all three levels.

A :class:`SweepSpec` (:mod:`ppsweep.sweep.config`) is the validated form of a sweep's config. Its grid
has the dimensions ``schedule × p × m [× recompute] [× comm] [× compute] × bandwidth × latency`` (and ``memory_capacity`` for ``fits``). One **unit** of work is one
``(p, m)`` pair with every schedule, mode, compute value, bandwidth and latency: it builds each
schedule's table once, runs the engine over all the unit's points that share it, and ranks the
schedules point by point. A unit is also one chunk of the store (:mod:`ppsweep.store.results`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ppsweep.tables.build import UnsupportedPointError, bubble_formula, build_schedule
from ppsweep.sweep.config import SweepSpec
from ppsweep.costs import ModelConfig, engine_costs, memory_figures, stage_costs
from ppsweep.engine.core import method_backend, simulate
from ppsweep.engine.compiled import program_for
from ppsweep.sweep.ranking import rank_lower_better
from ppsweep.store.schema import booleans, variables
from ppsweep.sweep.timing import phase

__all__ = ["SweepSpec", "evaluate_unit", "simulate_table"]

#: Dimensions of the engine's results for one table, in the order :func:`simulate_table` builds them.
ENGINE_DIMS = ("comm", "compute", "bandwidth", "latency", "sample")


def evaluate_unit(spec: SweepSpec, p_index: int, m_index: int) -> dict[str, np.ndarray]:
    """Evaluate one ``(p, m)`` unit at all three levels.

    Returns:
      ``name -> array``: point variables with dimensions ``spec.point_dims``, table variables and
      ``valid`` with ``spec.table_dims``; the ``p`` and ``m`` axes have length 1 (this unit).
    """
    p, m = spec.p[p_index], spec.m[m_index]

    def empty(kind: str, fill: float | bool = np.nan) -> np.ndarray:
        dims = spec.dims_of(kind)
        return np.full(tuple(1 if d in ("p", "m") else n for d, n in zip(dims, spec.shape(dims))), fill)

    # Every variable's dimensions start with schedule, p, m (then recompute, where the sweep has it):
    # a table's values go to [k, 0, 0] or [k, 0, 0, r], its points' arrays fill the dimensions after.
    out = {name: empty(kind) for name, (kind, _, _) in variables(spec).items()}
    for name, (kind, _, _) in booleans(spec).items():
        out[name] = empty(kind, False)
    models = spec.models()
    for k, name in enumerate(spec.schedules):
        try:
            with phase("build"):
                table = build_schedule(name, p, m, spec.f_slots, spec.b_slots, **spec.options_for(name))
        except UnsupportedPointError:
            continue
        with phase("build"):
            # table.m: chimera@concat=backward_halving runs 2m half-microbatches at the point m
            memory = {mode: memory_figures(model, table, table.m) for mode, model in models.items()}
        cap = spec.system.memory_capacity  # a scalar cap (never with a recompute dimension)
        if cap is not None and memory[spec.model.recompute].peak_memory_bytes > cap:
            continue
        here = (k, 0, 0)
        out["valid"][here] = True
        out["bubble_formula"][here] = bubble_formula(name, p, m, **spec.options_for(name))
        out["bubble_table"][here] = table.bubble_ratio()
        out["length_table"][here] = table.length
        with phase("compile"):
            program_for(table)
        for r, (mode, model) in enumerate(models.items()):
            at = (*here, r) if spec.recompute is not None else here
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


def simulate_table(spec: SweepSpec, table, model: ModelConfig | None = None) -> dict[str, np.ndarray]:
    """Engine results of one table over the unit's ``[comm ×] [compute ×] bandwidth × latency [× sample]`` points.

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
    costs = stage_costs(model, spec.system, table, peak_flops=spec.compute)
    # Axes: compute (or 1) × bandwidth × latency.
    point = engine_costs(costs, alpha=spec.latency[None, None, :], beta=spec.bandwidth[None, :, None],
                         t_opt=spec.system.optimizer_time, fb_overlap=spec.system.fb_overlap, point_axes=2)
    noise = spec.noise if spec.noise.enabled else None
    dims = ENGINE_DIMS if noise else ENGINE_DIMS[:-1]
    per_mode = []
    for mode in spec.comm:
        run = lambda noise: simulate(  # noqa: E731
            table, point, mode, dtype=spec.dtype, chunk=spec.chunk, backend=method_backend(spec.method), finish=False, noise=noise
        )
        result = run(noise)
        t_sim = result.t_sim
        per_mode.append(
            {
                "t_sim": t_sim,
                "throughput": model.global_batch / t_sim,
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
