"""What every schedule generator returns, and how schedules are registered.

A schedule is the per-worker **order** of its operations (docs/contract.md §2). A generator builds
that order as a :class:`ScheduleOrder`; :func:`ppsweep.tables.table.realize` turns it into the dense
table. Each schedule lives in its own module with its order, its closed-form formulas and the
rule saying for which ``(p, m, options)`` it can run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Union

import numpy as np

from ppsweep.tables.ops import Kind, Op, SplitBackward


class UnsupportedPointError(ValueError):
    """A schedule that cannot run at this ``(p, m, options)``: a sweep marks it ``valid = False``
    (defined here, below both the schedules and :mod:`ppsweep.tables.build`, which re-exports it)."""


class OrderArrays(Sequence):
    """Per-worker orders held as flat integer arrays, worker by worker: the array form of a schedule's order.

    Generators that compute their orders with numpy return this instead of tuples of
    :class:`~ppsweep.tables.ops.Op`; the array paths (:mod:`ppsweep.tables.fast_realize`) read the arrays as they
    are, while everything else sees a sequence of per-worker tuples of operations, built on first
    access (``orders[w]``, ``len(orders)``, iteration and ``==`` behave as for the tuples).

    Attributes:
      lengths: int array ``(p,)``: operations of each worker.
      kind, micro, stage: int arrays ``(sum(lengths),)``: the operations, worker 0's first, each
        worker's in its order (a pair F&B: its forward half).
      micro2, stage2: the backward halves of pairs F&B (``-1`` for other operations), or None
        where the orders have no pair.
    """

    def __init__(self, lengths: np.ndarray, kind: np.ndarray, micro: np.ndarray, stage: np.ndarray,
                 micro2: np.ndarray | None = None, stage2: np.ndarray | None = None) -> None:
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.kind, self.micro, self.stage = (np.asarray(a, dtype=np.int64).reshape(-1) for a in (kind, micro, stage))
        arrays = [self.kind, self.micro, self.stage]
        self.micro2 = self.stage2 = None
        if micro2 is not None or stage2 is not None:
            self.micro2, self.stage2 = (np.asarray(a, dtype=np.int64).reshape(-1) for a in (micro2, stage2))
            arrays += [self.micro2, self.stage2]
        if any(a.shape != (int(self.lengths.sum()),) for a in arrays):
            raise ValueError(
                f"kind, micro and stage (and micro2, stage2 where given) must each hold sum(lengths)="
                f"{int(self.lengths.sum())} operations, got {', '.join(str(a.shape) for a in arrays)}"
            )

    @classmethod
    def from_grid(cls, kind: np.ndarray, micro: np.ndarray, stage: np.ndarray) -> "OrderArrays":
        """Orders in which every worker runs as many operations: ``(p, L)`` arrays, row ``w`` worker ``w``'s order.

        Args:
          kind, micro, stage: int arrays of one shape ``(p, L)`` (broadcast against each other).

        Returns:
          The orders.
        """
        kind, micro, stage = np.broadcast_arrays(kind, micro, stage)
        p, per_worker = kind.shape
        return cls(np.full(p, per_worker), kind, micro, stage)

    @cached_property
    def _rows(self) -> tuple[tuple[Op, ...], ...]:
        kinds = {int(k): k for k in Kind}
        fields = [self.kind.tolist(), self.micro.tolist(), self.stage.tolist()]
        if self.micro2 is not None:
            fields += [self.micro2.tolist(), self.stage2.tolist()]
        ops = [Op(kinds[k], *rest) for k, *rest in zip(*fields)]
        bounds = np.concatenate([[0], np.cumsum(self.lengths)]).tolist()
        return tuple(tuple(ops[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:]))

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def __getitem__(self, w):
        return self._rows[w]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return self._rows == tuple(tuple(row) for row in other)

    __hash__ = None  # like a list: compared by value, not hashed

    def __repr__(self) -> str:
        return f"OrderArrays(p={len(self)}, operations={int(self.lengths.sum())})"


#: A schedule's per-worker orders: tuples of operations, or the same as arrays.
Orders = Union[tuple[tuple[Op, ...], ...], OrderArrays]


@dataclass(frozen=True)
class ScheduleOrder:
    """Per-worker operation order of a schedule, with its placement.

    Attributes:
      name: registered schedule name.
      p: number of workers.
      m: number of microbatches.
      n_stages: stages ``S`` on a microbatch's path through the model.
      orders: ``orders[w]`` is the sequence of operations worker ``w`` runs (tuples of operations, or an
        :class:`OrderArrays` from generators that compute their order with numpy).
      placement: int array ``(R, S)``: worker of stage ``s`` of replica ``r``.
      micro_replica: int array ``(m,)``: replica each microbatch runs through.
      stage_fractions: float array ``(S,)``: share of the model's layers in each stage
        (the same for every replica); sums to 1.
      split_backward: True where B is split into I and W; or the set of split ``(micro, stage)``
        pairs of a mixed schedule (:mod:`ppsweep.tables.ops`).
      options: the schedule's options as given (e.g. ``{"waves": 2}``).
    """

    name: str
    p: int
    m: int
    n_stages: int
    orders: Orders
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
      option_bounds: largest value of an integer option whose size the table does not grow with
        (a percent, a threshold); any other integer option is bounded by
        :data:`ppsweep.tables.build.MAX_OPTION_VALUE`.
      description: one line for listings.
    """

    name: str
    build_order: Callable[..., ScheduleOrder]
    why_unsupported: Callable[..., str | None]
    bubble_formula: Callable[..., float]
    peak_activations_formula: Callable[..., float]
    option_names: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    option_bounds: dict[str, int] = field(default_factory=dict)


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
