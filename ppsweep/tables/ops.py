"""Operations of a pipeline schedule and the data dependencies between them (docs/contract.md §2).

An operation is ``(kind, micro, stage)``: a forward (F), full backward (B), input-gradient (I)
or weight-gradient (W) pass of one microbatch through one model stage. Stages are numbered
along the microbatch's path through the model, ``0 … S-1``; where a schedule keeps several
model replicas, the microbatch's replica says which copy of the stage runs it.

DualPipe-style schedules also run an **overlapped pair** F&B (kind ``FB``): the forward
``F(micro, stage)`` of one chunk together with the full backward ``B(micro2, stage2)`` of another,
in one cell. It starts when the inputs of both halves have arrived and produces both outputs
when it ends; :func:`halves` gives its two halves, which is how every dependency sees it.

**Split backward, per microbatch-stage.** A schedule's backward of ``(micro, stage)`` is either
one B or an I and a W. ``split_backward`` is ``True`` (every backward split), ``False`` (none) or
the set of split ``(micro, stage)`` pairs (a *mixed* schedule such as PyTorch's DualPipeV, whose
pairs carry full backwards while its cool-down splits them). The input gradient of
``(micro, stage)`` comes from the B or the I of ``(micro, stage + 1)``, whichever it has.
"""

from __future__ import annotations

from enum import IntEnum
from typing import AbstractSet, Any, NamedTuple, Union


class Kind(IntEnum):
    """Integer codes of the cells of a schedule table."""

    IDLE = 0
    F = 1
    B = 2
    I = 3  # noqa: E741 - the literature's name for the input-gradient pass
    W = 4
    FB = 5  # an overlapped pair: a forward and a full backward in one cell


#: Letters used in printed tables and in PyTorch's pipeline CSV convention.
KIND_LETTER = {Kind.F: "F", Kind.B: "B", Kind.I: "I", Kind.W: "W", Kind.FB: "FB"}
LETTER_KIND = {letter: kind for kind, letter in KIND_LETTER.items()}

#: ``True``, ``False``, or the set of ``(micro, stage)`` whose backward is split into I and W.
SplitBackward = Union[bool, AbstractSet[tuple[int, int]]]

#: Value of ``micro``, ``stage`` and ``replica`` in idle cells.
NONE = -1


class Op(NamedTuple):
    """One operation of a schedule; a pair F&B also names its backward half (``micro2``, ``stage2``)."""

    kind: Kind
    micro: int
    stage: int
    micro2: int = NONE
    stage2: int = NONE

    def __str__(self) -> str:
        if self.kind == Kind.FB:
            return f"F&B(F mb={self.micro} stage={self.stage}; B mb={self.micro2} stage={self.stage2})"
        return f"{KIND_LETTER[self.kind]}(mb={self.micro}, stage={self.stage})"


def pair(forward: Op, backward: Op) -> Op:
    """The overlapped pair of a forward and a full backward."""
    if forward.kind != Kind.F or backward.kind != Kind.B:
        raise ValueError(f"an F&B pair is a forward and a full backward, got {forward} and {backward}")
    return Op(Kind.FB, forward.micro, forward.stage, backward.micro, backward.stage)


def op_label(op: Op, show_stage: bool = False) -> str:
    """Short label of an operation: ``F3`` (forward of microbatch 3), ``F3s5`` with its stage, and
    ``F3&B1`` (``F3s1&B1s6``) for an overlapped pair."""
    return "&".join(f"{KIND_LETTER[half.kind]}{half.micro}" + (f"s{half.stage}" if show_stage else "") for half in halves(op))


def halves(op: Op) -> tuple[Op, ...]:
    """The operations ``op`` runs: its two halves for a pair F&B, else ``(op,)``."""
    if op.kind == Kind.FB:
        return (Op(Kind.F, op.micro, op.stage), Op(Kind.B, op.micro2, op.stage2))
    return (op,)


def is_split(split_backward: SplitBackward, micro: int, stage: int) -> bool:
    """Whether the backward of ``(micro, stage)`` is split into I and W."""
    if isinstance(split_backward, bool):
        return split_backward
    return (micro, stage) in split_backward


def frees_activation(op: Op) -> bool:
    """Whether ``op`` (a half, not a pair) frees its stage's activation: B, or W of a split backward."""
    return op.kind in (Kind.B, Kind.W)


def dependencies(op: Op, n_stages: int, split_backward: SplitBackward) -> list[Op]:
    """Operations whose results ``op`` needs (docs/contract.md §2).

    Args:
      op: the consuming operation (a pair needs what its two halves need).
      n_stages: number of stages ``S`` on a microbatch's path.
      split_backward: ``True``/``False``, or the set of split ``(micro, stage)`` (module docstring).

    Returns:
      The producing operations, in a fixed order (upstream data first, then the
      same-stage forward whose activation the backward consumes; a pair: its forward half's
      inputs, then its backward half's).
    """
    j, s = op.micro, op.stage
    if op.kind == Kind.F:
        return [Op(Kind.F, j, s - 1)] if s > 0 else []
    if op.kind in (Kind.B, Kind.I):
        if s == n_stages - 1:
            return [Op(Kind.F, j, s)]
        grad = Kind.I if is_split(split_backward, j, s + 1) else Kind.B
        return [Op(grad, j, s + 1), Op(Kind.F, j, s)]
    if op.kind == Kind.W:
        return [Op(Kind.I, j, s)]
    if op.kind == Kind.FB:
        return [dep for half in halves(op) for dep in dependencies(half, n_stages, split_backward)]
    raise ValueError(f"operation kind {op.kind!r} has no dependencies (idle?)")


def expected_ops(m: int, n_stages: int, split_backward: SplitBackward) -> list[Op]:
    """Every operation a complete schedule of ``m`` microbatches over ``n_stages`` runs (pairs as halves)."""
    ops = []
    for j in range(m):
        for s in range(n_stages):
            kinds = (Kind.F, Kind.I, Kind.W) if is_split(split_backward, j, s) else (Kind.F, Kind.B)
            ops += [Op(k, j, s) for k in kinds]
    return ops


def pair_time(t_f: Any, t_b: Any, overlap: Any = 0.0) -> Any:
    """Duration of an overlapped pair F&B: ``(1 - overlap)·t_f + t_b``.

    Args:
      t_f: the forward half's time, s (numbers or arrays; numpy broadcasting).
      t_b: the full-backward half's time, s.
      overlap: share of the forward half hidden under the backward half, in [0, 1] (the README's
        ``fb_overlap``; the forward is the shorter half, a third of the pair with B = 2F). Default
        0: the pair lasts as long as its halves one after the other.

    Returns:
      The pair's time, s.
    """
    return (1.0 - overlap) * t_f + t_b
