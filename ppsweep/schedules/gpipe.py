"""GPipe (Huang et al., NeurIPS 2019): every forward, then every backward.

Stage ``s`` lives on worker ``s``. Each worker runs the forwards of all ``m`` microbatches in
order, then their backwards in the same order, so it holds all ``m`` activations at its peak.
"""

from __future__ import annotations

import numpy as np

from ppsweep.tables.ops import Kind
from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder, one_replica_layout


def why_unsupported(p: int, m: int) -> str | None:
    """GPipe runs for every ``p >= 2`` and ``m >= 1``; bad values are caught before this."""
    return None


def build_order(p: int, m: int) -> ScheduleOrder:
    """Per-worker order: ``F0 … F(m-1)`` then ``B0 … B(m-1)`` on every worker (as arrays)."""
    kind = np.repeat([int(Kind.F), int(Kind.B)], m)[None, :]  # the forwards, then the backwards
    micro = np.tile(np.arange(m), 2)[None, :]  # microbatches 0 … m-1 in each
    stage = np.arange(p)[:, None]  # worker w runs stage w
    orders = OrderArrays.from_grid(kind, micro, stage)
    return ScheduleOrder("gpipe", p, m, p, orders, **one_replica_layout(p, m, p, list(range(p))))


def bubble_formula(p: int, m: int) -> float:
    """``(p-1)/(m+p-1)``: the fill and drain of ``p-1`` steps of each of F and B."""
    return (p - 1) / (m + p - 1)


def peak_activations_formula(p: int, m: int) -> float:
    """``m``: worker 0 holds every microbatch's activation when its last forward runs."""
    return float(m)


SCHEDULE = Schedule(
    name="gpipe",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    description="GPipe: all forwards, then all backwards",
)
