"""Analysis of results stores: ranks, ranking stability, crossovers and sensitivity.

Works on any store a sweep writes (dimensions ``schedule, p, m, [comm], [compute], bandwidth,
latency``), opened with dask (one chunk per ``(p, m)`` unit by default) and computed with
:func:`xarray.apply_ufunc` chunk by chunk, out of core and in parallel (dask's threads, or the
workers of a ``dask.distributed`` client when one is active), masking unfinished units (``done``)
and schedules that cannot run (``valid``). One module per concern:

- :mod:`~ppsweep.analysis.load` — open and check a store (``chunks=``), masked variables;
- :mod:`~ppsweep.analysis.ranks` — ranks under formula / table / sim, ties, winner sets;
- :mod:`~ppsweep.analysis.stability` — flips, differing winners, Kendall's tau, per slice and overall;
- :mod:`~ppsweep.analysis.crossover` — where two schedules swap places along the bandwidth;
- :mod:`~ppsweep.analysis.sensitivity` — how far a parameter moves before the winner changes.

Typical use::

    from ppsweep import analysis
    ds = analysis.load("results/bandwidth.zarr")          # dask-backed, lazy
    st = analysis.stability(ds).compute()                # computed chunk by chunk
    analysis.summarize(st)             # per (p, m)
    analysis.summarize(st, by=())      # overall
    analysis.flip_points(st, "formula")
    cx = analysis.crossovers(ds)       # cx.crossover.sel(schedule="chimera", other="gpipe")
    analysis.sensitivity(st)
"""

from ppsweep.analysis.crossover import crossovers, series_crossings
from ppsweep.analysis.load import AnalysisError, check_dataset, grid_dims, inner_dims, iter_units, load, masked, point_dims, schedules, whole_along
from ppsweep.analysis.ranks import ABSTRACTIONS, RANKED_BY, rank_schedules, ranks, winner_label, winner_labels, winner_mask, winner_members, winners
from ppsweep.analysis.sensitivity import sensitivity, steps_to_change
from ppsweep.analysis.stability import flip_points, kendall_tau, stability, summarize

__all__ = [
    "ABSTRACTIONS",
    "RANKED_BY",
    "AnalysisError",
    "check_dataset",
    "crossovers",
    "flip_points",
    "grid_dims",
    "inner_dims",
    "iter_units",
    "kendall_tau",
    "load",
    "masked",
    "point_dims",
    "rank_schedules",
    "ranks",
    "schedules",
    "sensitivity",
    "series_crossings",
    "stability",
    "steps_to_change",
    "summarize",
    "winner_label",
    "winner_labels",
    "winner_mask",
    "winner_members",
    "winners",
    "whole_along",
]
