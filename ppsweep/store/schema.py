"""The results dataset's variables (docs/contract.md §5): names, dimension kinds, units, long names.

Kept apart from :mod:`ppsweep.store.results` (which re-exports every name here) so that the evaluators
(:mod:`ppsweep.sweep.evaluate`, also in spawned worker processes) import neither zarr nor xarray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
#: The ``valid`` variable (boolean, table dimensions).
VALID = ("table", "1", "schedule can run at this point; other variables are NaN where False")
#: The ``fits`` variable (boolean; only in sweeps with a ``memory_capacity`` dimension).
FITS = ("fits", "1", "valid and the bottleneck worker's peak memory within memory_capacity")


def booleans(spec: SweepSpec) -> dict[str, tuple[str, str, str]]:
    """The boolean variables of ``spec``'s store: ``valid``, and ``fits`` with a capacity dimension."""
    return {"valid": VALID, **({"fits": FITS} if spec.memory_capacity is not None else {})}


def variables(spec: SweepSpec) -> dict[str, tuple[str, str, str]]:
    """The variables a sweep stores besides ``valid``: :data:`VARIABLES`, and :data:`NOISE_VARIABLES` with noise."""
    return {**VARIABLES, **(NOISE_VARIABLES if spec.noise.enabled else {})}
