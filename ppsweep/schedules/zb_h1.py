"""ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2.1): 1F1B's memory, a third of its bubble.

The backward is split into I (input gradient) and W (weight gradient). Stage ``s`` lives on
worker ``s``. Phases on worker ``w``:

- **warm-up**: ``min(p-1-w, m)`` forwards, as 1F1B;
- **steady state**: one forward, one I — and, from the ``w``-th I on, the W of the I ``w`` places
  back: the W passes of worker ``w`` start ``w`` microbatches late, so every worker keeps ``p``
  microbatches in flight (1F1B's peak, reached on worker 0 only there);
- **cool-down**: the remaining I passes, each with its trailing W, then the last ``w`` W passes,
  which fill the drain that 1F1B leaves idle.

This is PyTorch's ``InterleavedZeroBubble`` with one chunk per worker
(:mod:`ppsweep.schedules.interleaved_zb` at ``v = 1``, tested equal).

**Operating range**: every ``p >= 2``, ``m >= 1``.

**Formulas.** The paper's idle per worker is ``(p-1)(F+I-W)`` (1F1B's is ``(p-1)(F+I+W)``); the
table has unit F, I, W slots, so the bubble is ``(p-1)/(3m + p-1)``, exact on the table for
``m >= p`` (see the tests). Peak activations (freed by W): ``min(p, m)``.
"""

from __future__ import annotations

from ppsweep.schedules import interleaved_zb
from ppsweep.schedules.base import Schedule, ScheduleOrder


def why_unsupported(p: int, m: int) -> str | None:
    """ZB-H1 runs for every ``p >= 2`` and ``m >= 1``."""
    return None


def build_order(p: int, m: int) -> ScheduleOrder:
    """Per-worker orders of ZB-H1 (interleaved zero bubble with one chunk)."""
    return interleaved_zb.build_order(p, m, v=1, name="zb_h1")


def bubble_formula(p: int, m: int) -> float:
    """``(p-1)/(3m + p-1)``: the paper's ``(p-1)(F+I-W)`` idle with unit F, I, W."""
    return (p - 1) / (3 * m + p - 1)


def peak_activations_formula(p: int, m: int) -> float:
    """``min(p, m)``: every worker holds ``p`` microbatches in flight once its W passes trail."""
    return float(min(p, m))


SCHEDULE = Schedule(
    name="zb_h1",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    description="ZB-H1: 1F1B with split backward, W passes trail to fill the drain",
)
