"""Operations of a pipeline schedule and the data dependencies between them (docs/contract.md §2).

An operation is ``(kind, micro, stage)``: a forward (F), full backward (B), input-gradient (I)
or weight-gradient (W) pass of one microbatch through one model stage. Stages are numbered
along the microbatch's path through the model, ``0 … S-1``; where a schedule keeps several
model replicas, the microbatch's replica says which copy of the stage runs it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class Kind(IntEnum):
    """Integer codes of the cells of a schedule table."""

    IDLE = 0
    F = 1
    B = 2
    I = 3  # noqa: E741 - the literature's name for the input-gradient pass
    W = 4


#: Letters used in printed tables and in PyTorch's pipeline CSV convention.
KIND_LETTER = {Kind.F: "F", Kind.B: "B", Kind.I: "I", Kind.W: "W"}
LETTER_KIND = {letter: kind for kind, letter in KIND_LETTER.items()}

#: Value of ``micro``, ``stage`` and ``replica`` in idle cells.
NONE = -1


class Op(NamedTuple):
    """One operation of a schedule."""

    kind: Kind
    micro: int
    stage: int

    def __str__(self) -> str:
        return f"{KIND_LETTER[self.kind]}(mb={self.micro}, stage={self.stage})"


def dependencies(op: Op, n_stages: int, split_backward: bool) -> list[Op]:
    """Operations whose results ``op`` needs (docs/contract.md §2).

    Args:
      op: the consuming operation.
      n_stages: number of stages ``S`` on a microbatch's path.
      split_backward: True where the schedule splits B into I and W.

    Returns:
      The producing operations, in a fixed order (upstream data first, then the
      same-stage forward whose activation the backward consumes).
    """
    j, s = op.micro, op.stage
    grad = Kind.I if split_backward else Kind.B
    if op.kind == Kind.F:
        return [Op(Kind.F, j, s - 1)] if s > 0 else []
    if op.kind in (Kind.B, Kind.I):
        if s == n_stages - 1:
            return [Op(Kind.F, j, s)]
        return [Op(grad, j, s + 1), Op(Kind.F, j, s)]
    if op.kind == Kind.W:
        return [Op(Kind.I, j, s)]
    raise ValueError(f"operation kind {op.kind!r} has no dependencies (idle?)")


def expected_ops(m: int, n_stages: int, split_backward: bool) -> list[Op]:
    """Every operation a complete schedule of ``m`` microbatches over ``n_stages`` runs."""
    kinds = (Kind.F, Kind.I, Kind.W) if split_backward else (Kind.F, Kind.B)
    return [Op(k, j, s) for j in range(m) for s in range(n_stages) for k in kinds]
