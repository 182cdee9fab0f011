"""What every schedule generator returns, and how schedules are registered.

A schedule is the per-worker **order** of its operations (docs/contract.md §2). A generator builds
that order as a :class:`ScheduleOrder`; :func:`ppsweep.table.realize` turns it into the dense
table. Each schedule lives in its own module with its order, its closed-form formulas and the
rule saying for which ``(p, m, options)`` it can run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ppsweep.ops import Op, SplitBackward


@dataclass(frozen=True)
class ScheduleOrder:
    """Per-worker operation order of a schedule, with its placement.

    Attributes:
      name: registered schedule name.
      p: number of workers.
      m: number of microbatches.
      n_stages: stages ``S`` on a microbatch's path through the model.
      orders: ``orders[w]`` is the sequence of operations worker ``w`` runs.
      placement: int array ``(R, S)``: worker of stage ``s`` of replica ``r``.
      micro_replica: int array ``(m,)``: replica each microbatch runs through.
      stage_fractions: float array ``(S,)``: share of the model's layers in each stage
        (the same for every replica); sums to 1.
      split_backward: True where B is split into I and W; or the set of split ``(micro, stage)``
        pairs of a mixed schedule (:mod:`ppsweep.ops`).
      options: the schedule's options as given (e.g. ``{"waves": 2}``).
    """

    name: str
    p: int
    m: int
    n_stages: int
    orders: tuple[tuple[Op, ...], ...]
    placement: np.ndarray
    micro_replica: np.ndarray
    stage_fractions: np.ndarray
    split_backward: SplitBackward = False
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def n_replicas(self) -> int:
        """Number of model replicas ``R`` (2 for Chimera, else 1)."""
        return int(self.placement.shape[0])


@dataclass(frozen=True)
class Schedule:
    """A registered schedule: its generator, its formulas and its operating range.

    Attributes:
      name: the name users give (``"1f1b"``).
      build_order: ``(p, m, **options) -> ScheduleOrder``.
      why_unsupported: ``(p, m, **options) -> str | None``: None where the schedule can run,
        else one sentence saying which field breaks which rule.
      bubble_formula: ``(p, m, **options) -> float``: closed-form bubble ratio, NaN where the
        schedule has none.
      peak_activations_formula: ``(p, m, **options) -> float``: closed-form peak number of stored
        microbatch-stage activations on the busiest worker, NaN where there is none.
      option_names: options the schedule accepts, with their defaults.
      description: one line for listings.
    """

    name: str
    build_order: Callable[..., ScheduleOrder]
    why_unsupported: Callable[..., str | None]
    bubble_formula: Callable[..., float]
    peak_activations_formula: Callable[..., float]
    option_names: dict[str, Any] = field(default_factory=dict)
    description: str = ""


def one_replica_layout(p: int, m: int, n_stages: int, placement: list[int]) -> dict[str, np.ndarray]:
    """Placement arrays for a schedule with a single model replica and equal stages.

    Args:
      p: number of workers (only used to check the placement).
      m: number of microbatches.
      n_stages: stages on a microbatch's path.
      placement: ``placement[s]`` is the worker of stage ``s``.

    Returns:
      ``placement``, ``micro_replica`` and ``stage_fractions`` keyword arguments for
      :class:`ScheduleOrder`.
    """
    if len(placement) != n_stages or not all(0 <= w < p for w in placement):
        raise ValueError(f"placement {placement} does not map {n_stages} stages onto {p} workers")
    return {
        "placement": np.asarray([placement], dtype=np.int64),
        "micro_replica": np.zeros(m, dtype=np.int64),
        "stage_fractions": np.full(n_stages, 1.0 / n_stages),
    }


def no_formula(p: int, m: int, **options: Any) -> float:
    """Formula placeholder for schedules without a closed form: NaN."""
    return math.nan
