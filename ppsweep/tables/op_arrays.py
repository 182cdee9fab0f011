"""A dense table's operations as arrays, below :mod:`ppsweep.tables.table` (which reads its
activation profile with them) and :mod:`ppsweep.tables.fast_realize` (which builds on them).

- :func:`table_ops`: the operations of a dense table as arrays (what ``placed_ops`` lists); None
  for the tables the array paths leave to the references.
- :func:`activation_profile_fast`: stored activations per worker and slot with array code.

It reads a table's fields only (no import of :mod:`ppsweep.tables.table`: no import circle).
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ppsweep.tables.ops import Kind

if TYPE_CHECKING:
    from ppsweep.tables.table import ScheduleTable

__all__ = ["FAST_KINDS", "OpArrays", "activation_profile_fast", "remember_ops", "table_ops"]

#: The kinds of single operations; an F&B pair (``Kind.FB``) holds a forward and a full backward.
FAST_KINDS = (Kind.F, Kind.B, Kind.I, Kind.W)


@dataclass(frozen=True)
class OpArrays:
    """Operations as parallel int64 arrays (one entry per operation; a pair F&B is one operation).

    Attributes:
      worker, start, slots, kind, micro, stage: where each operation runs, its first slot and
        length in slots, and the operation itself (a pair: its forward half's microbatch and stage).
      micro2, stage2: a pair's backward half's microbatch and stage (-1 for other operations);
        None where the table has no pair.
    """

    worker: np.ndarray
    start: np.ndarray
    slots: np.ndarray
    kind: np.ndarray
    micro: np.ndarray
    stage: np.ndarray
    micro2: np.ndarray | None = None
    stage2: np.ndarray | None = None

    @property
    def end(self) -> np.ndarray:
        """First slot after each operation."""
        return self.start + self.slots

    @property
    def has_pairs(self) -> bool:
        """Whether some operation is an F&B pair (the arrays then have ``micro2`` and ``stage2``)."""
        return self.micro2 is not None

    def taken(self, index: np.ndarray) -> "OpArrays":
        """The operations at ``index``, in that order."""
        return OpArrays(*(None if a is None else a[index] for a in (getattr(self, f.name) for f in dataclasses.fields(self))))

    def __len__(self) -> int:
        return int(self.kind.shape[0])


# ---------------------------------------------------------------------------------------------
# reading a dense table


def table_ops(table: ScheduleTable) -> OpArrays | None:
    """The operations of ``table`` in (worker, slot) order, as :meth:`ScheduleTable.placed_ops` finds them.

    An operation is a maximal run of consecutive cells of a row holding the same
    ``(kind, micro, stage)`` (a pair F&B: and the same backward half). Returns None for the tables
    the array paths leave to the references: arrays of the wrong shape, or a cell holding an
    unknown kind (or F&B without the pair arrays). Every array path, and the disk cache (which
    stores what they read), asks this one question.
    """
    known = _OPS.get(table)
    if known is not None:
        return known
    ops = _read_ops(table)
    if ops is not None:
        _OPS[table] = ops
    return ops


def remember_ops(table: ScheduleTable, ops: OpArrays) -> None:
    """Take ``ops`` as :func:`table_ops` of ``table`` (the table cache stores them beside the table
    they were read from, so a table read from disk is not read again cell by cell)."""
    _OPS[table] = ops


#: Operation arrays of tables already read (or realized here), held as long as the table lives.
_OPS: "weakref.WeakKeyDictionary[ScheduleTable, OpArrays]" = weakref.WeakKeyDictionary()


def _read_ops(table: ScheduleTable) -> OpArrays | None:
    kind, micro, stage = table.kind, table.micro, table.stage
    if kind.ndim != 2 or micro.shape != kind.shape or stage.shape != kind.shape:
        return None
    cells = [kind, micro, stage]
    codes = [int(Kind.IDLE)] + [int(k) for k in FAST_KINDS]
    pairs = table.pair_micro is not None and table.pair_stage is not None
    if pairs:
        if table.pair_micro.shape != kind.shape or table.pair_stage.shape != kind.shape:
            return None
        cells += [table.pair_micro, table.pair_stage]
        codes.append(int(Kind.FB))
    if not np.isin(kind, np.array(codes)).all():
        return None
    busy = kind != Kind.IDLE
    same_as_previous = np.zeros(kind.shape, dtype=bool)
    same_as_previous[:, 1:] = np.logical_and.reduce([a[:, 1:] == a[:, :-1] for a in cells])
    begins = busy & ~same_as_previous
    w, t = np.nonzero(begins)  # row-major: worker, then slot
    # A run ends where the next run (or an idle cell, or the row's end) begins.
    boundary = ~same_as_previous
    boundary = np.concatenate([boundary[:, 1:], np.ones((kind.shape[0], 1), dtype=bool)], axis=1)
    bw, bt = np.nonzero(boundary)  # last cell of each run (busy or idle), row-major
    flat_last = bw * kind.shape[1] + bt
    flat_begin = w * kind.shape[1] + t
    last = flat_last[np.searchsorted(flat_last, flat_begin)]
    return OpArrays(
        worker=w.astype(np.int64),
        start=t.astype(np.int64),
        slots=(last - flat_begin + 1).astype(np.int64),
        kind=kind[w, t].astype(np.int64),
        micro=micro[w, t].astype(np.int64),
        stage=stage[w, t].astype(np.int64),
        micro2=table.pair_micro[w, t].astype(np.int64) if pairs else None,
        stage2=table.pair_stage[w, t].astype(np.int64) if pairs else None,
    )


def activation_profile_fast(table: ScheduleTable, stage_weights: np.ndarray | None = None) -> np.ndarray | None:
    """:meth:`ScheduleTable.activation_profile` with array code (the same floats), or None where the
    :func:`table_ops` leaves the table to the reference (the caller then uses it).
    """
    ops = table_ops(table)
    if ops is None:
        return None
    weights = np.ones(table.n_stages) if stage_weights is None else np.asarray(stage_weights, float)
    width = table.length + 1
    # At most one operation starts and one ends at a cell, so each cell's change is 0 + stored -
    # freed, at most: the reference's floats (bincount adds a cell's terms in order from 0, and
    # x + (-y) is x - y). A pair stores its forward half's activation and frees its backward half's.
    pairs = ops.kind == Kind.FB
    stores = (ops.kind == Kind.F) | pairs
    frees = (ops.kind == Kind.B) | (ops.kind == Kind.W) | pairs  # ppsweep.tables.ops.frees_activation
    freed_stage = np.where(pairs, ops.stage2, ops.stage) if ops.has_pairs else ops.stage
    cells = np.concatenate([ops.worker[stores] * width + ops.start[stores], ops.worker[frees] * width + ops.end[frees]])
    change = np.concatenate([weights[ops.stage[stores]], -weights[freed_stage[frees]]])
    delta = np.bincount(cells, weights=change, minlength=table.p * width).reshape(table.p, width)
    return np.cumsum(delta, axis=1)[:, : table.length]
