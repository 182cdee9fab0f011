"""Hanayo (Liu et al., SC'23): a wave-like pipeline without model replicas.

**Placement.** With ``W`` waves (option ``waves``, default 1) the model is cut into ``S = 2·W·p``
equal stages laid out in a zig-zag: stages ``0 … p-1`` go down workers ``0 … p-1``, stages
``p … 2p-1`` come back up workers ``p-1 … 0``, the next ``p`` go down again, and so on. Each worker
holds ``2W`` stages. At a turn (bottom or top) two consecutive stages sit on the same worker, so
the microbatch stays there and nothing is sent.

**Microbatches.** The paper's regime is ``m = p``: one unit of ``p`` microbatches. ``m`` a multiple
of ``p`` is supported by concatenating units (below); other ``m`` are unsupported.

**Order.** Each worker's order is read off the equal-slot wave diagram (F and B one slot each) in
which a microbatch enters every two slots, as in Chimera's diagram, and every pass runs as soon as
its input exists:

- forward of microbatch ``j`` (of its unit) at stage ``s``: slot ``2j + s``;
- backward of microbatch ``j`` at stage ``s``: slot ``2j + 2S-1-s``.

The operations of stage ``s`` take ``p`` slots of one parity from slot ``s`` (forwards) and from
slot ``2S-1-s`` (backwards). A worker's down-going stages ``w, 2p+w, …`` and up-going stages
``2p-1-w, 4p-1-w, …`` have opposite parity; the forwards of its down-going stages followed by the
backwards of its up-going ones tile one parity without overlap, its up-going forwards followed by
its down-going backwards the other. So no two operations of a worker share a slot, and sorting by
slot gives the order. For one wave, worker ``w`` runs:

- **warm-up**: forwards of stage ``w`` (from slot ``w``), joined from slot ``2p-1-w`` by the
  forwards of the returning stage ``2p-1-w``;
- **steady state**: the returning stage's forwards alternate with its backwards (from slot
  ``2p+w``: microbatches that finished their forward path come back as a backward wave);
- **cool-down**: the backwards of stage ``w`` (from slot ``4p-1-w``), interleaved with the last
  backwards of the returning stage.

With more waves the same pattern repeats leg by leg: forwards sweep the zig-zag ``2W`` times
down and up, then backwards sweep it in reverse.

**Several units.** Unit ``k`` (microbatches ``k·p … k·p+p-1``) is drawn ``4Wp·k`` slots later
(``4Wp`` is a worker's busy time per unit), so its first forwards fill the idle slots at the end
of unit ``k-1``, exactly as Chimera's direct concatenation; each worker's order interleaves the
two.

**Formulas** (derived from the ASAP table, checked in the tests). Each worker runs ``2Wm``
forwards and ``2Wm`` backwards. With ``r = b_slots/f_slots`` an integer and ``k = m/p`` units, each
worker idles ``f·2(p-1)·(1 + (r-1)·k)`` slots (:func:`idle_per_worker`):

- F = B slots: ``2(p-1)``, the diagram's fill and drain; bubble ``(p-1)/(2Wm+p-1)``
  (:func:`bubble_equal_slots`);
- default F = 1, B = 2: ``2(p-1)(1+k)``: every unit adds ``2(p-1)``, because the backward wave,
  twice as long, no longer fits the forward wave's gaps; bubble
  ``(p-1)(m+p) / ((p-1)(m+p) + 3Wmp)`` (:func:`bubble_formula`, which is for these default slots).

Peak activations: ``2Wp`` stage-activations (each ``1/(2Wp)`` of the model) on worker ``p-1``, which
runs all ``2W·p`` forwards of a unit before its first backward. In bytes that is ``p`` microbatches'
activations of ``1/p`` of the model, as much as 1F1B holds at ``m >= p``.
"""

from __future__ import annotations

import numpy as np

from ppsweep.tables.ops import Kind, Op
from ppsweep.schedules.base import OrderArrays, Schedule, ScheduleOrder, one_replica_layout

DEFAULT_WAVES = 1


def check_waves(waves: int) -> int:
    """``waves`` as an int, or a ValueError naming the field and what it accepts."""
    if isinstance(waves, bool) or not isinstance(waves, (int, float)) or waves != int(waves) or waves < 1:
        raise ValueError(f"waves: must be an integer >= 1, got {waves!r}")
    return int(waves)


def why_unsupported(p: int, m: int, waves: int = DEFAULT_WAVES) -> str | None:
    """None where Hanayo runs: ``m`` a multiple of ``p`` (the paper's ``m = p``, or several units).

    Raises:
      ValueError: a malformed ``waves`` (a configuration error rather than an unsupported point).
    """
    check_waves(waves)
    if m % p:
        return f"m must be a multiple of p={p} for hanayo (units of p microbatches, the paper's m = p), got {m}"
    return None


def n_stages(p: int, waves: int) -> int:
    """``S = 2·W·p`` stages."""
    return 2 * waves * p


def stage_worker(s: int, p: int) -> int:
    """Worker of stage ``s`` in the zig-zag: down on even legs of ``p`` stages, up on odd legs."""
    leg, r = divmod(s, p)
    return r if leg % 2 == 0 else p - 1 - r


def worker_stages(p: int, waves: int, w: int) -> list[int]:
    """The ``2W`` stages held by worker ``w``, in increasing order."""
    return [s for s in range(n_stages(p, waves)) if stage_worker(s, p) == w]


def diagram_slot(kind, unit, j, stage, p: int, waves: int):
    """Slot of an operation in the equal-slot wave diagram.

    Args:
      kind: F or B (or an int array of kind codes; the other arguments then broadcast with it).
      unit: the unit, ``0 … m/p-1``.
      j: microbatch within its unit, ``0 … p-1``.
      stage: the stage, ``0 … S-1``.
      p: number of workers.
      waves: ``W``.

    Returns:
      ``4Wp·unit + 2j + stage`` for F, ``4Wp·unit + 2j + 2S-1-stage`` for B.
    """
    s_total = n_stages(p, waves)
    offset = 4 * waves * p * unit + 2 * j
    return offset + np.where(np.equal(kind, Kind.F), stage, 2 * s_total - 1 - stage)


def worker_order(p: int, m: int, waves: int, w: int) -> tuple[Op, ...]:
    """Worker ``w``'s operations sorted by their slot in the wave diagram, one at a time.

    The reference the tests compare :func:`build_order` (the same, for all workers at once) with.
    """
    stages = worker_stages(p, waves, w)
    timed = [
        (int(diagram_slot(kind, unit, j, s, p, waves)), Op(kind, unit * p + j, s))
        for unit in range(m // p)
        for j in range(p)
        for s in stages
        for kind in (Kind.F, Kind.B)
    ]
    timed.sort(key=lambda item: item[0])
    return tuple(op for _, op in timed)


def build_order(p: int, m: int, waves: int = DEFAULT_WAVES) -> ScheduleOrder:
    """Per-worker orders of Hanayo (see the module docstring): each worker's operations sorted by
    their slot in the wave diagram, all workers at once with numpy (:func:`worker_order` one by one).
    """
    waves = check_waves(waves)
    s_total = n_stages(p, waves)
    placement = [stage_worker(s, p) for s in range(s_total)]
    # Every operation of every worker: axes (worker, unit, microbatch of the unit, the worker's
    # stage, F or B), in the order worker_order lists them before sorting.
    held = np.argsort(placement, kind="stable").reshape(p, 2 * waves)  # row w: worker_stages(p, waves, w)
    stages = held[:, None, None, :, None]
    unit = np.arange(m // p)[None, :, None, None, None]
    j = np.arange(p)[None, None, :, None, None]
    kind = np.array([int(Kind.F), int(Kind.B)])[None, None, None, None, :]
    kind, unit, j, stages = (a.reshape(p, -1) for a in np.broadcast_arrays(kind, unit, j, stages))
    by_slot = np.argsort(diagram_slot(kind, unit, j, stages, p, waves), axis=1, kind="stable")
    orders = OrderArrays.from_grid(*(np.take_along_axis(a, by_slot, axis=1) for a in (kind, unit * p + j, stages)))
    return ScheduleOrder(
        name="hanayo",
        p=p,
        m=m,
        n_stages=s_total,
        orders=orders,
        options={"waves": waves},
        **one_replica_layout(p, m, s_total, placement),
    )


def idle_per_worker(p: int, m: int, waves: int = DEFAULT_WAVES, f_slots: int = 1, b_slots: int = 2) -> int:
    """Idle slots of each worker in the table, in closed form.

    With ``r = b_slots/f_slots`` an integer and ``k = m/p`` units: ``f·2(p-1)·(1 + (r-1)·k)``
    (derived from the ASAP realization and checked against it in the tests).

    Raises:
      ValueError: where ``b_slots`` is not a multiple of ``f_slots`` (no derived closed form).
    """
    if b_slots % f_slots:
        raise ValueError(f"hanayo: no closed form for f_slots={f_slots}, b_slots={b_slots} (b not a multiple of f)")
    r, units = b_slots // f_slots, m // p
    return f_slots * 2 * (p - 1) * (1 + (r - 1) * units)


def table_length(p: int, m: int, waves: int = DEFAULT_WAVES, f_slots: int = 1, b_slots: int = 2) -> int:
    """Length ``T`` of the table: ``2Wm·(f+b)`` busy slots per worker plus :func:`idle_per_worker`.

    For F = B: ``f·(4Wm + 2p - 2)``, the diagram itself. For the default (1, 2):
    ``6Wm + 2(p-1)(1 + m/p)`` (``(6W+4)p - 4`` for one unit, ``(6W+2)p - 2`` more per further unit).
    """
    waves = check_waves(waves)
    return 2 * waves * m * (f_slots + b_slots) + idle_per_worker(p, m, waves, f_slots, b_slots)


def table_bubble(p: int, m: int, waves: int = DEFAULT_WAVES, f_slots: int = 1, b_slots: int = 2) -> float:
    """Bubble of the table in closed form, ``idle_per_worker / table_length``."""
    return idle_per_worker(p, m, waves, f_slots, b_slots) / table_length(p, m, waves, f_slots, b_slots)


def bubble_equal_slots(p: int, m: int, waves: int = DEFAULT_WAVES) -> float:
    """``(p-1)/(2Wm+p-1)``: the table's bubble when F and B take the same number of slots."""
    return (p - 1) / (2 * check_waves(waves) * m + p - 1)


def bubble_formula(p: int, m: int, waves: int = DEFAULT_WAVES) -> float:
    """``(p-1)(m+p) / ((p-1)(m+p) + 3Wmp)``: the table's bubble for the default slots F = 1, B = 2.

    The equal-slot figure is :func:`bubble_equal_slots`.
    """
    idle = (p - 1) * (m + p)
    return idle / (idle + 3 * check_waves(waves) * m * p)


def peak_activations_formula(p: int, m: int, waves: int = DEFAULT_WAVES) -> float:
    """``2Wp``: worker ``p-1`` runs all ``2W·p`` forwards of a unit before its first backward.

    Counted in stage-activations of ``1/(2Wp)`` of the model each; it does not grow with the
    number of units, and holds for F = B and for B = 2·F slots (checked in tests).
    """
    return float(2 * check_waves(waves) * p)


SCHEDULE = Schedule(
    name="hanayo",
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=bubble_formula,
    peak_activations_formula=peak_activations_formula,
    option_names={"waves": DEFAULT_WAVES},
    description="Hanayo: wave-like zig-zag pipeline, 2·W·p stages, units of p microbatches",
)
