"""Ranks of schedules at each point (docs/contract.md §5), shared by the sweep and the analysis."""

from __future__ import annotations

import numpy as np

#: Values within this relative distance of each other tie.
RANK_TOLERANCE = 1e-9


def rank_lower_better(values: np.ndarray, axis: int = 0, rtol: float = RANK_TOLERANCE) -> np.ndarray:
    """Competition ranks along ``axis`` (1 = smallest value), NaN where the value is NaN.

    A schedule's rank is one plus the number of schedules at the same point whose value is
    lower by more than ``rtol`` (relative): ties share the best rank (1, 1, 3), and NaN
    (invalid) schedules neither get nor take a rank.

    Args:
      values: array with the schedules along ``axis``.
      axis: the schedule axis.
      rtol: relative tie tolerance.

    Returns:
      Float array of the same shape.
    """
    v = np.moveaxis(np.asarray(values, dtype=float), axis, 0)
    better = v[None, :] < v[:, None] - rtol * np.abs(v[:, None])  # better[i, j]: j beats i
    ranks = 1.0 + np.sum(better, axis=1)
    ranks[np.isnan(v)] = np.nan
    return np.moveaxis(ranks, 0, axis)
