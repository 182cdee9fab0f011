"""Which points of a grid the scan must compute; the others interpolated where convexity proves it exact.

A table's step time is its longest path, and each path's time is a sum of the point's costs
(durations, latencies, wire and all-reduce times) with non-negative whole coefficients: as a
function of the costs, the step time is a maximum of linear functions, convex, and affine wherever
one path stays the longest. Along a grid axis that moves the costs on a line (a latency axis moves
every ``α``; a bandwidth axis every wire and all-reduce time with ``1/β``), the step time at the
points of each line of the grid is a convex function ``f`` of one number ``u``, the position on that
line (:func:`grid_lines`). Then, for a segment ``[u0, u1]`` of a line and its midpoint ``c``
(docs/contract.md §4, "The piecewise scan"):

- ``f`` lies below the chord ``h`` through ``(u0, f(u0))`` and ``(u1, f(u1))`` on the segment;
- where ``f(c) = h(c)``, ``f = h`` on the whole segment: for ``u`` in it, ``c`` lies between ``u`` and
  the point ``u'`` mirrored about ``c`` (also in the segment), and ``f(c) <= (f(u) + f(u')) / 2``
  with ``f(u') <= h(u')`` leaves ``f(u) >= h(u)``.

So the scan computes the ends of each line's segments (:data:`SEGMENT` indices apart) and each
segment's midpoint (a point off the grid: the mean of its ends' costs). A segment whose midpoint lies
on the chord within :data:`TOLERANCE` of its larger end's step time is *certified* and its inner
points are interpolated along the chord; the inner points of the others are scanned in a second
call. Each worker's finish time is a longest path too, and is certified the same way when it is
asked for. The critical path's compute time (``comm_time = t_sim - path compute``) is affine on a
segment where one path is the longest throughout; a segment is certified only where it too lies on
its chord. The axis taken is the one that moves the costs least (:func:`grid_lines`): a network
grid's step time bends along its bandwidth axis and seldom along its latency axis.

This module holds the plan and the arithmetic (numpy only); the ``piecewise_scan`` backend
(:mod:`ppsweep.engine.core`) runs the scan at the points the plan names.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: Indices between the ends of a segment: a line of ``n`` points is scanned at every
#: ``SEGMENT``-th index, its last, and the midpoint of each segment (8 points along an axis of 8: 3
#: scanned; 64: 19).
SEGMENT = 7

#: Largest distance of a segment's midpoint from its chord, relative to the larger of its ends'
#: step times, that still certifies it (docs/contract.md §4: an interpolated value is then within
#: about ``2 · TOLERANCE`` of the convex function it stands for, plus the scan's own rounding at the
#: ends). Measured on nine p = 32–64 design tables in every mode: 2e-14 left 17 % more points to the
#: scan than 1e-13, whose largest difference from the periodic scan was the same (8.9e-14 of ``t_sim``);
#: 3e-13 certified no more.
TOLERANCE = 1e-13

#: Largest departure of the costs from a line along an axis, relative to each cost's largest
#: magnitude on the grid (costs computed point by point round apart by a few units of 2⁻⁵²).
LINE_TOLERANCE = 1e-14


class GridLines(NamedTuple):
    """A grid whose axis ``axis`` moves the costs on lines (:func:`grid_lines`).

    Attributes:
      shape: ``(before, n, after)``: the points before that axis (the product of the earlier axes'
        lengths), along it, after it.
      u: ``(n,)`` each index's position on every line, 0 at the first and 1 at the last.
      axis: the axis (its place in the grid's shape).
    """

    shape: tuple[int, int, int]
    u: np.ndarray
    axis: int


def grid_lines(costs: np.ndarray, batch: tuple[int, ...]) -> GridLines | str:
    """The grid's axis along which the scan may interpolate, or why none.

    An axis qualifies where, at every index of the other axes, its points' costs lie on a line, at
    the same positions on every line, strictly ordered (the positions read off the cost the axis
    moves most for its size). Of those, the one whose span moves the costs least (summed over every
    cost, at the first index of the others) is taken.

    Args:
      costs: ``(R, n)`` every cost the scan reads at each point (flat C order over ``batch``).
      batch: the grid's shape.

    Returns:
      :class:`GridLines`, or a reason: no axis longer than 2, or none that moves the costs on lines.
    """
    costs = costs[costs.max(axis=1) > costs.min(axis=1)]  # a cost the grid keeps fixed lies on every line
    scale = np.abs(costs).max(axis=1) * LINE_TOLERANCE
    best, why = None, "no axis longer than 2"
    for axis, n in enumerate(batch):
        if n <= 2:
            continue
        before, after = int(np.prod(batch[:axis], dtype=np.int64)), int(np.prod(batch[axis + 1:], dtype=np.int64))
        x = costs.reshape(costs.shape[0], before, n, after)
        moved = x - x[:, :, :1, :]  # (R, before, n, after)
        span = moved[:, :, -1:, :]
        first = span[:, 0, 0, 0]
        if not first.any():
            why = f"axis {axis} moves no cost"
            continue
        # positions read off the cost the axis moves most for its size: a cost that sits on a large
        # constant (an all-reduce's bandwidth term under its latency term) rounds its moves on that
        # constant's scale, and positions read from it would put a small cost off its own line
        ref = int(np.argmax(np.abs(first) / scale))  # (every cost left moves: its scale is positive)
        u = moved[ref, 0, :, 0] / first[ref]
        if not np.all(np.diff(u) > 0):
            why = f"axis {axis} moves the costs back and forth along its line"
            continue
        if np.any(np.abs(moved - span * u[None, None, :, None]) > scale[:, None, None, None]):
            why = f"axis {axis} moves the costs off one line (or to other positions on other lines)"
            continue
        size = float(np.abs(first).sum())
        if best is None or size < best[0]:
            best = (size, GridLines((before, n, after), u, axis))
    return why if best is None else best[1]


class Plan(NamedTuple):
    """The points the scan computes first, the segments they bound, and every other point's segment (:func:`plan`).

    Attributes:
      lines: the grid (:class:`GridLines`).
      ends: flat indices of the segments' ends (scanned first).
      segments: ``(n_segments, 2)`` flat indices of each segment's two ends (line by line).
      probed: ``(n_segments,)`` the segments with inner points (each gets a midpoint).
      inner: flat indices of the other points.
      home: ``(n_inner,)`` each one's segment.
      fraction: ``(n_inner,)`` its place between its segment's ends (0 at the first, 1 at the last).
    """

    lines: GridLines
    ends: np.ndarray
    segments: np.ndarray
    probed: np.ndarray
    inner: np.ndarray
    home: np.ndarray
    fraction: np.ndarray

    @property
    def probed_ends(self) -> np.ndarray:
        """``(n_probed, 2)`` the ends of each probed segment (the mean of their costs is its midpoint)."""
        return self.segments[self.probed]


def plan(lines: GridLines) -> Plan:
    """The segments of every line of ``lines``' grid: ends every :data:`SEGMENT` indices and the last."""
    before, n, after = lines.shape
    cut = np.unique(np.r_[np.arange(0, n, SEGMENT), n - 1])
    seg = np.minimum(np.searchsorted(cut, np.arange(n), side="right") - 1, cut.size - 2)  # each index's segment
    lo, hi = cut[seg], cut[seg + 1]
    n_seg = cut.size - 1
    b, a = np.divmod(np.arange(before * after), after)  # each line's place before and after the axis
    flat = lambda line, i: b[line] * (n * after) + i * after + a[line]  # noqa: E731 - line × index on it
    lines_of_segments = np.repeat(np.arange(before * after), n_seg)
    starts = np.tile(cut[:-1], before * after)
    stops = np.tile(cut[1:], before * after)
    segments = np.c_[flat(lines_of_segments, starts), flat(lines_of_segments, stops)]
    inside = ~np.isin(np.arange(n), cut)
    line, i = np.nonzero(np.broadcast_to(inside, (before * after, n)))
    fraction = (lines.u[i] - lines.u[lo[i]]) / (lines.u[hi[i]] - lines.u[lo[i]])
    ends = np.sort(flat(np.repeat(np.arange(before * after), cut.size), np.tile(cut, before * after)))
    return Plan(lines, ends, segments, stops - starts > 1, flat(line, i), line * n_seg + seg[i], fraction)


def certified(end_values: np.ndarray, mid_values: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Which probed segments lie on their chords, for every output.

    Args:
      end_values: ``(k, n_probed, 2)`` each of ``k`` outputs at each segment's ends.
      mid_values: ``(k, n_probed)`` the same at its midpoint.
      top: ``(n_probed,)`` the larger of its ends' step times (the tolerance's scale).

    Returns:
      ``(n_probed,)`` True where every output's midpoint is within :data:`TOLERANCE` ``· top`` of its chord.
    """
    chord = (end_values[..., 0] + end_values[..., 1]) / 2
    return np.all(np.abs(mid_values - chord) <= TOLERANCE * top, axis=0)


def interpolate(plan: Plan, values: np.ndarray, exact: np.ndarray) -> None:
    """Fill ``values`` in place along the chord at the inner points of the certified segments.

    Args:
      plan: the plan.
      values: ``(k, n)`` the outputs at every point, known at the segments' ends.
      exact: ``(n_segments,)`` the certified segments.
    """
    take = exact[plan.home]
    ends = plan.segments[plan.home[take]]  # (m, 2)
    s = plan.fraction[take]
    values[:, plan.inner[take]] = values[:, ends[:, 0]] * (1 - s) + values[:, ends[:, 1]] * s
