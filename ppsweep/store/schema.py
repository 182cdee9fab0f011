"""The results dataset's variables (docs/contract.md §5): names, dimension kinds, units, long names.

Kept apart from :mod:`ppsweep.store.layout` (which creates the arrays) so that the evaluators
(:mod:`ppsweep.sweep.evaluate`, also in spawned worker processes) import neither zarr nor xarray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ppsweep.sweep.config import SweepSpec

#: Variables of the results dataset (docs/contract.md §5): dims kind, units, long name.
#: Dimensions by kind: ``SweepSpec.dims_of(kind)`` ("point", "table", "memory": per recomputation mode).
VARIABLES: dict[str, tuple[str, str, str]] = {
    "t_sim": ("point", "s", "simulated step time"),
    "throughput": ("point", "sequences/s", "global batch / step time"),
    "idle_sim": ("point", "1", "idle fraction of the simulated step"),
    "comm_time": ("point", "s", "time the critical path spends in messages"),
    "rank_sim": ("point", "1", "rank by simulated step time among valid schedules (1 = best)"),
    "bubble_formula": ("table", "1", "closed-form bubble ratio"),
    "bubble_table": ("table", "1", "idle cells / cells of the idealized table"),
    "length_table": ("table", "slots", "slots of the idealized table"),
    "peak_activation_bytes": ("memory", "bytes", "bottleneck worker's peak activation memory"),
    "persistent_bytes": ("memory", "bytes", "bottleneck worker's parameters, gradients, optimizer state"),
    "peak_memory_bytes": ("memory", "bytes", "bottleneck worker's peak memory"),
    "rank_formula": ("table", "1", "rank by closed-form bubble among valid schedules (1 = best)"),
    "rank_table": ("table", "1", "rank by table bubble among valid schedules (1 = best)"),
}
#: Variables of a sweep with noise besides those (README, "Uncertainty"): "nominal" variables have
#: ``SweepSpec.nominal_dims`` (the point dimensions without ``sample``).
NOISE_VARIABLES: dict[str, tuple[str, str, str]] = {
    "t_sim_nominal": ("nominal", "s", "simulated step time without noise"),
}
#: Variables of a layout sweep besides those (docs/contract.md §3b, README "The whole layout").
LAYOUT_VARIABLES: dict[str, tuple[str, str, str]] = {
    "dp_time": ("point", "s", "exposed seconds of the data-parallel gradient synchronisation (included in t_sim)"),
    "tokens_per_s": ("point", "tokens/s", "global batch tokens / step time"),
    "model_flops_per_gpu": ("point", "FLOP/s", "model FLOPs of a step (no recomputation) / (step time · GPUs)"),
    "layout_invalid": ("layout", "1", "why the layout cannot run: 0 it can, 1 tp·p·dp·cp is not gpus, 2 tp does not "
                       "divide heads, 3 tp does not divide kv_heads, 4 the stages do not divide layers, 5 2·cp does "
                       "not divide sequence, 6 dp·m does not divide global_batch (ppsweep.layout.INVALID_REASONS)"),
}
#: The derived data-parallel degree of a sweep over ``gpus`` (``gpus / (tp·p·cp)``; NaN where not whole).
DP_VARIABLE = ("layout", "replicas", "data-parallel degree gpus / (tp·p·cp)")
#: The ``valid`` variable (boolean, table dimensions).
VALID = ("table", "1", "schedule can run at this point; other variables are NaN where False")
#: The ``fits`` variable (boolean; only in sweeps with a ``memory_capacity`` dimension).
FITS = ("fits", "1", "valid and the bottleneck worker's peak memory within memory_capacity")


def booleans(spec: SweepSpec) -> dict[str, tuple[str, str, str]]:
    """The boolean variables of ``spec``'s store: ``valid``, and ``fits`` with a capacity dimension."""
    return {"valid": VALID, **({"fits": FITS} if spec.memory_capacity is not None else {})}


def variables(spec: SweepSpec) -> dict[str, tuple[str, str, str]]:
    """The variables a sweep stores besides ``valid``: :data:`VARIABLES`, and :data:`NOISE_VARIABLES` with noise."""
    out = {**VARIABLES, **(NOISE_VARIABLES if spec.noise.enabled else {})}
    if spec.has_layout:
        out.update(LAYOUT_VARIABLES)
        if spec.gpus is not None:
            out["dp"] = DP_VARIABLE
    return out


def empty_unit(spec: "SweepSpec") -> dict[str, np.ndarray]:
    """One unit's arrays before evaluation: every variable NaN, every boolean False, with the
    store's dimensions and length 1 along ``p`` and ``m``."""

    def empty(kind: str, fill: float | bool = np.nan) -> np.ndarray:
        dims = spec.dims_of(kind)
        return np.full(tuple(1 if d in ("p", "m") else n for d, n in zip(dims, spec.shape(dims))), fill)

    out = {name: empty(kind) for name, (kind, _, _) in variables(spec).items()}
    for name, (kind, _, _) in booleans(spec).items():
        out[name] = empty(kind, False)
    return out
