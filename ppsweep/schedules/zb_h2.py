"""ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2.2): more warm-up, no bubble in the steady state.

The backward is split into I (input gradient) and W (weight gradient). Stage ``s`` lives on
worker ``s``. Phases on worker ``w``:

- **warm-up**: ``min(2(p-1-w), m)`` forwards — twice 1F1B's: they fill the time until the first I
  comes back (one F and one I per hop, each one slot), so no worker waits before its first I;
- **steady state**: one forward, one I, and, from the ``w``-th I on, the W of the I ``w`` places back;
- **cool-down**: the remaining I passes with their trailing W, then the last ``w`` W passes.

Rules chosen: the paper draws ZB-H2 by hand; the warm-up above is its "additional F passes during
the warm-up phase", and the W passes trail by ``w`` as in ZB-H1 (the tail's W passes fill the
drain — with the W of worker 0 not delayed, its first I follows its forwards directly). Worker 0
holds ``2p-1`` microbatches in flight, the paper's ``(2p-1)·M_B``.

**Operating range**: every ``p >= 2``, ``m >= 1``.

**Formulas.** The paper's idle per worker is ``(p-1)(F+I-2W)``: zero for equal F, I, W — it counts
the start-up slant as overlapped with the previous step (optimizer post-validation). Level 1 gives
that: 0 (:func:`bubble_formula`). The table, which starts every step from an empty pipeline, has
``(p-1)/(3m + p-1)`` like ZB-H1 for ``m >= p`` (:func:`table_bubble`); the difference shows in
the simulation, where the extra warm-up absorbs message latency. Peak activations
``min(2p-1, m)``.
"""

from __future__ import annotations

from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import Schedule, ScheduleOrder, one_replica_layout
from ppsweep.schedules.phases import one_f_one_b


def why_unsupported(p: int, m: int) -> str | None:
    """ZB-H2 runs for every ``p >= 2`` and ``m >= 1``."""
    return None


def worker_order(p: int, m: int, w: int) -> list[Op]:
    """Worker ``w``'s order: the doubled warm-up, F-I with W trailing by ``w``, cool-down."""
    forwards = [Op(Kind.F, j, w) for j in range(m)]
    grads = [Op(Kind.I, j, w) for j in range(m)]
    return one_f_one_b(forwards, grads, min(2 * (p - 1 - w), m), weight_lag=w)


def build_order(p: int, m: int) -> ScheduleOrder:
    """Per-worker orders of ZB-H2."""
    orders = tuple(tuple(worker_order(p, m, w)) for w in range(p))
    return ScheduleOrder("zb_h2", p, m, p, orders, split_backward=True, **one_replica_layout(p, m, p, list(range(p))))


def bubble_formula(p: int, m: int) -> float:
    """0: the paper's ``(p-1)(F+I-2W)`` with equal F, I, W."""
    return 0.0


def table_bubble(p: int, m: int) -> float:
    """``(p-1)/(3m + p-1)``: the table's bubble for ``m >= p`` (unit F, I, W slots)."""
    return (p - 1) / (3 * m + p - 1)


def peak_activations_formula(p: int, m: int) -> float:
    """``min(2p-1, m)``: worker 0's warm-up ``2(p-1)`` plus the first steady forward."""
    return float(min(2 * p - 1, m))


SCHEDULE = Schedule(
    name="zb_h2",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    description="ZB-H2: split backward, doubled warm-up, W passes trail (2p-1 in flight)",
)
