"""One unit of a layout sweep: every schedule's table under every layout, system and recomputation.

A layout sweep (docs/contract.md §3b) has dimensions ``schedule × p × m × [gpus] × [tp] × [dp]
× [cp] × [recompute] × [system] × [comm] × bandwidth × latency`` (``memory_capacity`` for
``fits``). ``m`` is the number of microbatches of each pipeline replica (``b = G/(dp·m)``); the
``bandwidth`` and ``latency`` axes are the inter-node tier, every system keeps its intra-node
tier. A unit is still one ``(p, m)`` pair: each schedule's table is built once and evaluated
under every layout of the unit.
"""

from __future__ import annotations

import itertools

import numpy as np

from ppsweep.cost_model import ActivationSplit, memory_figures
from ppsweep.engine.compiled import program_for
from ppsweep.engine.methods import method_backend
from ppsweep.layout import Layout, invalid_code, layout_costs, model_flops_per_step, replica_model, simulate_layout
from ppsweep.store.schema import empty_unit
from ppsweep.sweep.config import SweepSpec
from ppsweep.sweep.dimensions import POINT_DIMENSIONS, grid_arguments
from ppsweep.sweep.ranking import rank_lower_better
from ppsweep.sweep.timing import phase
from ppsweep.sweep.unit_tables import record_table, unit_tables


def unit_layouts(spec: SweepSpec, p: int) -> list[tuple[tuple[int, ...], Layout, int | None]]:
    """Every layout of a unit at ``p``: ``(index along the layout dimensions, layout, gpus or None)``.

    With ``gpus`` the data-parallel degree is ``gpus / (tp·p·cp)``; where that is not whole the
    layout gets ``dp = 1``, so that ``tp·p·dp·cp`` is not ``gpus`` (invalid, code 1).
    """
    dims = spec.layout_dims
    out = []
    for index in itertools.product(*[range(len(getattr(spec, d))) for d in dims]):
        value = {d: getattr(spec, d)[i] for d, i in zip(dims, index)}
        tp, cp, gpus = value.get("tp", 1), value.get("cp", 1), value.get("gpus")
        if gpus is None:
            dp = value.get("dp", 1)
        else:
            dp = gpus // (tp * p * cp) if gpus % (tp * p * cp) == 0 else 1
        out.append((index, Layout(tp=tp, p=p, dp=dp, cp=cp), gpus))
    return out


def evaluate_layout_unit(spec: SweepSpec, p_index: int, m_index: int) -> dict[str, np.ndarray]:
    """Evaluate one ``(p, m)`` unit of a layout sweep (same contract as :func:`ppsweep.sweep.evaluate.evaluate_unit`)."""
    p, m = spec.p[p_index], spec.m[m_index]
    out = empty_unit(spec)
    models = spec.models()
    systems = spec.system_list()
    layouts = unit_layouts(spec, p)
    model_flops = model_flops_per_step(spec.model)
    tokens = spec.model.global_batch * spec.model.sequence
    for index, layout, gpus in layouts:
        at = (0, 0, *index)
        code = invalid_code(layout, spec.model, m, gpus)
        out["layout_invalid"][at] = code
        if "dp" in out and code != 1:
            out["dp"][at] = layout.dp
    for k, name, table in unit_tables(spec, p, m):
        with phase("compile"):
            program_for(table)
        for index, layout, gpus in layouts:
            if invalid_code(layout, spec.model, m, gpus, stages=table.n_stages):
                continue  # the layout's code (layout_invalid) is with p stages; a schedule's chunks may fail alone
            here = (k, 0, 0, *index)
            record_table(out, here, spec, name, table, p, m)
            options = spec.layout
            for r, (mode, model) in enumerate(models.items()):
                where = (*here, r) if spec.recompute is not None else here
                replica = replica_model(model, layout)
                with phase("build"):
                    memory = memory_figures(replica, table, table.m,
                                            split=ActivationSplit(layout.tp, options.sequence_parallel, layout.cp),
                                            tensor_parallel=layout.tp, optimizer_shards=layout.dp * layout.cp if options.zero1 else 1)
                out["peak_activation_bytes"][where] = memory.peak_activation_bytes
                out["persistent_bytes"][where] = memory.persistent_bytes
                out["peak_memory_bytes"][where] = memory.peak_memory_bytes
                if "fits" in out:
                    out["fits"][where] = memory.peak_memory_bytes <= spec.memory_capacity
                for s, system in enumerate(systems):
                    point = (*where, s) if spec.systems is not None else where
                    with phase("evaluate"):
                        values = _simulate(spec, table, model, system, layout)
                    values["tokens_per_s"] = tokens / values["t_sim"]
                    values["model_flops_per_gpu"] = model_flops / (values["t_sim"] * layout.gpus)
                    for var, value in values.items():
                        out[var][point] = value
    for rank, by in (("rank_formula", "bubble_formula"), ("rank_table", "bubble_table"), ("rank_sim", "t_sim")):
        out[rank] = rank_lower_better(out[by], axis=0)
    return out


def _simulate(spec: SweepSpec, table, model, system, layout: Layout) -> dict[str, np.ndarray]:
    """``t_sim`` (with the DP synchronisation), ``throughput``, ``idle_sim``, ``comm_time``, ``dp_time``
    over ``[comm ×]`` the point dimensions a layout sweep takes (``bandwidth × latency``)."""
    dims = [d for d in POINT_DIMENSIONS if d.layouts]
    grid = grid_arguments(dims, {d.name: getattr(spec, d.name) for d in dims}, system)
    lc = layout_costs(model, system, table, layout, spec.layout, **grid)
    shape = tuple(len(getattr(spec, d.name)) for d in dims)
    per_mode = []
    for mode in spec.comm:
        result, t_step = simulate_layout(table, lc, mode, dtype=spec.dtype, chunk=spec.chunk, backend=method_backend(spec.method), finish=False)
        dp_time = np.broadcast_to(lc.dp_exposed, shape)
        per_mode.append({
            "t_sim": np.broadcast_to(t_step, shape),
            "throughput": model.global_batch / np.broadcast_to(t_step, shape),
            "idle_sim": 1.0 - np.broadcast_to(result.compute_time, shape) / (table.p * np.broadcast_to(t_step, shape)),
            "comm_time": np.broadcast_to(result.comm_time, shape) + dp_time,
            "dp_time": dp_time,
        })
    return {name: np.stack([r[name] for r in per_mode]).reshape(((len(spec.comm),) if spec.comm_axis else ()) + shape)
            for name in per_mode[0]}
