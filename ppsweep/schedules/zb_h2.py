"""ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2.2): more warm-up, a parallelogram.

The backward is split into I (input gradient) and W (weight gradient). Stage ``s`` lives on
worker ``s``. Phases on worker ``w``:

- **warm-up**: ``min(2(p-1-w), m)`` forwards — twice 1F1B's: they fill the time until the first I
  comes back (one F and one I per hop, each one slot), so no worker waits before its first I;
- **steady state**: one forward, one I, and, from the ``2w``-th I on, the W of the I ``2w`` places
  back;
- **cool-down**: the remaining I passes with their trailing W, then the last ``2w`` W passes.

The W passes of worker ``w`` trail by ``lag·w`` I passes (option ``lag``, default 2). With
``lag = 2`` every worker holds ``2p-1`` microbatches in flight and its order is worker 0's shifted
by ``w`` F-I-W groups: the layout is the paper's parallelogram (its Figure 3, "we reorder the W
passes at the tail"): every worker runs the same span, starting ``w`` forwards and hops after
worker 0 and ending as late after it. This is the order of the authors' own script that computes
the paper's Table 5 (``get_hand_schedule(..., warmup_c=2)`` in ``efficiency.py`` of
sail-sg/zero-bubble-pipeline-parallelism, branch ``arxiv``). ``lag = 1`` is the order ppsweep
shipped as ``zb_h2`` before (ZB-H1's trailing W behind ZB-H2's warm-up): a trapezoid whose
tail ends on worker 0; its isolated step can be shorter where ``m < 2(p-1)`` (the
parallelogram's tail of ``2w`` W passes is then longer than the steady state that would hide it)
and in ``ports`` at high latency.

**Step time.** The paper's ZB-H2 has no bubble only when consecutive steps overlap: with the
optimizer's global checks post-validated (its section 4) nothing ends a step on all workers at
once, worker ``w`` starts the next step as soon as it ends this one, and the step's cost is the
longest worker *span* (first operation's start to last operation's end), not the isolated step's
makespan. ppsweep's ``t_sim`` is the isolated step (every schedule pays its fill and drain);
:func:`ppsweep.engine.reference.post_validated_step` gives the span (docs/contract.md §4,
"Post-validated steps"). Table 5 of the paper is reproduced with the span
(``tests/test_zero_bubble_paper.py``).

**Operating range**: every ``p >= 2``, ``m >= 1``; ``lag >= 0``. The paper's script requires
``m >= 2p``.

**Formulas.** The paper's idle per worker is ``(p-1)(F+I-2W)`` (its Table 2; with message time
``c``, ``(p-1)(F+I+2c-2W)``, the span's excess over ``m(F+I+W)`` wherever ``F+I+2c >= 2W``):
zero for equal F, I, W — the post-validated count. Level 1 gives that: 0 (:func:`bubble_formula`).
The table, which starts every step from an empty pipeline, has ``(p-1)/(3m + p-1)`` like ZB-H1:
the first slant (:func:`table_bubble`; exact for ``m >= 2(p-1)`` with ``lag = 2``, ``m >= p``
with ``lag = 1``). Peak activations ``min(2p-1, m)`` (``lag <= 2``).
"""

from __future__ import annotations

import numpy as np

from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder, one_replica_layout
from ppsweep.schedules.phases import check_int_option, one_f_one_b, one_f_one_b_positions, place
from ppsweep.tables.ops import Kind, Op

#: W passes of worker ``w`` trail its I passes by ``DEFAULT_LAG · w``: the paper's parallelogram.
DEFAULT_LAG = 2


def why_unsupported(p: int, m: int, lag: int = DEFAULT_LAG) -> str | None:
    """ZB-H2 runs for every ``p >= 2`` and ``m >= 1``."""
    check_int_option("lag", lag, 0)
    return None


def worker_order(p: int, m: int, w: int, lag: int = DEFAULT_LAG) -> list[Op]:
    """Worker ``w``'s order: the doubled warm-up, F-I with W trailing by ``lag·w``, cool-down."""
    forwards = [Op(Kind.F, j, w) for j in range(m)]
    grads = [Op(Kind.I, j, w) for j in range(m)]
    return one_f_one_b(forwards, grads, min(2 * (p - 1 - w), m), weight_lag=lag * w)


def order_arrays(p: int, m: int, lag: int = DEFAULT_LAG) -> OrderArrays:
    """:func:`worker_order` of every worker at once: the same phases, as arrays (a W has its I's pass)."""
    w = np.arange(p)
    positions = one_f_one_b_positions(m, np.minimum(2 * (p - 1 - w), m), weight_lag=lag * w)
    kind = np.array([int(Kind.F), int(Kind.I), int(Kind.W)])[None, :, None]
    return OrderArrays.from_grid(*place(positions, kind, np.arange(m)[None, None, :], w[:, None, None]))


def build_order(p: int, m: int, lag: int = DEFAULT_LAG) -> ScheduleOrder:
    """Per-worker orders of ZB-H2 (:func:`order_arrays`)."""
    lag = check_int_option("lag", lag, 0)
    orders = order_arrays(p, m, lag)
    options = {} if lag == DEFAULT_LAG else {"lag": lag}
    return ScheduleOrder("zb_h2", p, m, p, orders, split_backward=True, options=options,
                         **one_replica_layout(p, m, p, list(range(p))))


def bubble_formula(p: int, m: int, lag: int = DEFAULT_LAG) -> float:
    """0: the paper's ``(p-1)(F+I-2W)`` with equal F, I, W (post-validated steps)."""
    return 0.0


def table_bubble(p: int, m: int) -> float:
    """``(p-1)/(3m + p-1)``: the table's bubble (unit F, I, W slots), for ``m >= 2(p-1)``."""
    return (p - 1) / (3 * m + p - 1)


def peak_activations_formula(p: int, m: int, lag: int = DEFAULT_LAG) -> float:
    """``min(2p-1, m)`` for ``lag <= 2``: worker 0's warm-up ``2(p-1)`` plus the first steady forward
    (with ``lag = 2`` every worker holds that many); a longer lag makes the last worker hold
    ``lag·(p-1) + 1``."""
    return float(min(max(2 * p - 1, check_int_option("lag", lag, 0) * (p - 1) + 1), m))


SCHEDULE = Schedule(
    name="zb_h2",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    option_names={"lag": DEFAULT_LAG},
    description="ZB-H2: split backward, doubled warm-up, W passes trail by 2w (the paper's parallelogram)",
)
