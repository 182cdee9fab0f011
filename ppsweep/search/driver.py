"""The schedule search: the best variants of a space for a point or a region, under a memory cap, beside the hand-made schedules.

:func:`search` evaluates each candidate in memory: the variant's table is built and validated
(:func:`ppsweep.tables.build.build_schedule`: an order that deadlocks or breaks a rule is invalid,
with its one-line reason), its peak activations are checked against the cap, and the engine runs
it over the whole region at once (:func:`ppsweep.search.region.figures`).

**Strategy** (documented heuristic):

1. *Grid*: the space's variants (:mod:`ppsweep.search.spaces`), in a fixed shuffled order (seed 0):
   every one of them where they fit in the budget (exhaustive), else the first half-budget of them.
2. *Local search*: from the best candidate, best-improvement hill climbing over neighbours: every
   grid option moved to its adjacent values, and every worker's ``warmup`` and ``lag`` (the space's
   per-worker options) moved by ±1 — a neighbourhood the grid cannot hold (``(2m)^(2p)`` lists). It
   stops at a local optimum or when the budget (candidates evaluated, the grid's included) is spent.

The incumbents are the hand-made schedules (:data:`INCUMBENTS`) that run at ``(p, m)`` and fit
the cap; the margin is the best incumbent's score minus the winner's, relative to the incumbent's
(for ``pwin``, the winner's share of points won against the best incumbent at each point).
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from ppsweep.search.region import (
    OBJECTIVES,
    Figures,
    Region,
    figures,
    peak_activations,
    score,
)
from ppsweep.search.spaces import Space, get_space, label, strip_times

#: Hand-made schedules the winner is compared with (those that run at ``(p, m)`` and fit the cap).
INCUMBENTS = ("gpipe", "1f1b", "zb_h1", "zb_h2", "interleaved_1f1b@v=2", "interleaved_zb@v=2", "zbv", "dualpipev")


@dataclass(frozen=True)
class Candidate:
    """One evaluated schedule: its label, score (lower is better) and figures."""

    label: str
    score: float
    figures: Figures
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class SearchResult:
    """What :func:`search` returns.

    Attributes:
      best: the ``top`` candidates, best first. incumbents: the hand-made schedules, best first.
      margin: ``(incumbent - winner) / |incumbent|`` of the scores (``pwin``: the winner's P(win)).
      evaluated: candidates evaluated; invalid: ``label -> one-line reason`` of those that cannot
        run; over_cap: labels whose peak activations exceed the cap.
      objective, cap, p, m, space, seconds: the search's inputs and its time.
    """

    best: list[Candidate]
    incumbents: list[Candidate]
    margin: float
    evaluated: int
    invalid: dict[str, str]
    over_cap: list[str]
    objective: str
    cap: float | None
    p: int
    m: int
    space: str
    seconds: float

    def summary(self) -> str:
        """A few lines for people: the winners, the incumbents, the margin."""
        lines = [(f"search space={self.space} p={self.p} m={self.m} objective={self.objective} cap={self.cap}: "
                  f"{self.evaluated} candidates in {self.seconds:.1f} s ({len(self.invalid)} invalid, "
                  f"{len(self.over_cap)} over the cap)")]
        for title, rows in (("best", self.best), ("hand-made", self.incumbents)):
            lines.append(f"{title}:")
            for c in rows:
                lines.append(f"  {c.score:12.6g}  mean {c.figures.mean:.6g} s  bubble {np.nanmean(c.figures.bubble):.4f}"
                             f"  peak {c.figures.peak:g}  {c.label}")
        lines.append(f"margin over the best hand-made: {self.margin:+.4%}" if self.objective != "pwin"
                     else f"P(win) over the best hand-made at each point: {self.margin:.4f}")
        return "\n".join(lines)


def nominal_times(region: Region) -> str:
    """``"F:I:W:C"`` of the region's mean point (whole-stage means, message ``latency + bytes/bandwidth``): the timed fill's costs."""
    bw = np.asarray(region.bandwidth)
    wire = np.where(np.isinf(bw), 0.0, region.msg_bytes / bw)
    c = float(np.mean(region.latency)) + float(np.mean(wire))
    parts = [float(np.mean(region.t_f)), float(np.mean(region.t_i)), float(np.mean(region.t_w)), c]
    return ":".join(f"{x:.6g}" for x in parts)


@contextmanager
def _no_disk_caches() -> Iterator[None]:
    """Candidates are built once: keep their programs off the on-disk caches."""
    from ppsweep.engine.envelope_cache import CACHE_ENV as ENVELOPES
    from ppsweep.tables.cache import CACHE_ENV as TABLES

    saved = {k: os.environ.get(k) for k in (ENVELOPES, TABLES)}
    os.environ.update({ENVELOPES: "off", TABLES: "off"})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _Evaluator:
    """Evaluates labels once each: the table, the cap, the engine."""

    def __init__(self, p: int, m: int, region: Region, cap: float | None, objective: str, reference: np.ndarray | None):
        self.p, self.m, self.region, self.cap, self.objective, self.reference = p, m, region, cap, objective, reference
        self.seen: dict[str, Candidate | None] = {}
        self.invalid: dict[str, str] = {}
        self.over_cap: list[str] = []

    def __call__(self, name: str, options: dict[str, Any] | None = None) -> Candidate | None:
        if name in self.seen:
            return self.seen[name]
        from ppsweep.tables.build import build_schedule

        result = None
        try:
            table = build_schedule(name, self.p, self.m)
        except ValueError as error:  # unsupported options, a deadlock, a broken rule: one line
            self.invalid[name] = str(error).splitlines()[0]
        else:
            if self.cap is not None and peak_activations(table, self.region) > self.cap + 1e-9:
                self.over_cap.append(name)
            else:
                fig = figures(table, self.region)
                if isinstance(fig, str):
                    self.invalid[name] = fig
                else:
                    result = Candidate(name, score(fig, self.objective, self.reference), fig, dict(options or {}))
        self.seen[name] = result
        return result


def _neighbours(options: dict[str, Any], grid: dict[str, list[Any]], per_worker: tuple[str, ...], p: int, m: int
                ) -> list[dict[str, Any]]:
    """Options one step away: a grid option to an adjacent value, or one worker's ``warmup``/``lag`` by ±1."""
    from ppsweep.schedules.flex import resolve

    out = []
    for key, values in grid.items():
        current = options.get(key)
        if current in values and len(values) > 1:
            i = values.index(current)
            for j in (i - 1, i + 1):
                if 0 <= j < len(values):
                    out.append({**options, key: values[j]})
    resolved = resolve(p, m, **{k: v for k, v in options.items()})
    if isinstance(resolved, str):
        return out
    for key in per_worker:
        lists = list(resolved[key])
        for w in range(p):
            for step in (-1, 1):
                moved = lists.copy()
                moved[w] += step
                if 0 <= moved[w] <= resolved["v"] * m:
                    out.append({**options, key: ":".join(map(str, moved))})
    return out


def _progress(total: int, stream: TextIO | None):
    stream = stream if stream is not None else sys.stderr
    from tqdm import tqdm

    return tqdm(total=total, desc="search", unit="cand", file=stream, dynamic_ncols=True,
                disable=not (getattr(stream, "isatty", None) and stream.isatty()))


def search(
    space: str | Space,
    p: int,
    m: int,
    region: Region,
    *,
    cap: float | None = None,
    objective: str = "mean",
    budget: int = 2000,
    top: int = 5,
    incumbents: tuple[str, ...] = INCUMBENTS,
    progress: bool = True,
    stream: TextIO | None = None,
) -> SearchResult:
    """The best schedules of ``space`` at ``(p, m)`` over ``region`` (module docstring).

    Args:
      space: a built-in space name (``a``, ``b``, ``c``) or a :class:`~ppsweep.search.spaces.Space`.
      p, m: workers and microbatches.
      region: the costs (one point or a grid, noise).
      cap: most activations the busiest worker may hold: in ``M_B`` (microbatches' activations of a
        whole stage), or bytes where ``region`` has ``activation_bytes``; None: no cap.
      objective: one of :data:`~ppsweep.search.region.OBJECTIVES`.
      budget: most candidates evaluated (>= 1). top: winners returned.
      incumbents: hand-made schedules to compare with.
      progress: a progress bar on a terminal (stderr).

    Returns:
      The :class:`SearchResult`.

    Raises:
      ValueError: a bad field, naming it and the accepted values.
    """
    from ppsweep.tables.build import check_positive_int

    start = time.perf_counter()
    space = get_space(space) if isinstance(space, str) else space
    p, m = check_positive_int("p", p, 2), check_positive_int("m", m, 1)
    budget, top = check_positive_int("budget", budget, 1), check_positive_int("top", top, 1)
    if objective not in OBJECTIVES:
        raise ValueError(f"objective: unknown {objective!r}; accepted: {', '.join(OBJECTIVES)}")
    if cap is not None and not (np.isfinite(cap) and cap > 0):
        raise ValueError(f"cap: must be a number > 0 (M_B, or bytes with activation_bytes), got {cap!r}")

    first = _Evaluator(p, m, region, cap, "mean" if objective == "pwin" else objective, None)
    hand = [c for c in (first(name) for name in incumbents) if c is not None]
    reference = np.min([c.figures.t_sim for c in hand], axis=0) if hand else None
    if objective == "pwin":
        if reference is None:
            raise ValueError("objective pwin: no hand-made schedule runs here within the cap")
        hand = [Candidate(c.label, score(c.figures, "pwin", reference), c.figures) for c in hand]
    hand.sort(key=lambda c: c.score)

    times = nominal_times(region)
    evaluate = _Evaluator(p, m, region, cap, objective, reference)
    cap_mb = cap if region.activation_bytes is None else None  # the generators' limits count M_B
    wshare = round(100 * region.w_share)
    grid = space.grid(p, m, cap_mb, times, wshare)
    variants = [strip_times(v) for v in space.variants(p, m, cap_mb, times, wshare)]
    unique = list({label(v): v for v in variants}.items())
    random.Random(0).shuffle(unique)
    bar = _progress(budget, stream) if progress else None
    with _no_disk_caches():
        for name, options in unique[: max(1, budget // 2) if len(unique) > budget else len(unique)]:
            evaluate(name, options)
            if bar is not None:
                bar.update(1)
        found = sorted((c for c in evaluate.seen.values() if c is not None), key=lambda c: c.score)
        current = found[0] if found else None
        while current is not None and len(evaluate.seen) < budget:
            improved = None
            for options in _neighbours(current.options, grid, space.per_worker, p, m):
                if len(evaluate.seen) >= budget:
                    break
                cand = evaluate(label(strip_times(options)), strip_times(options))
                if bar is not None:
                    bar.update(1)
                if cand is not None and cand.score < (improved or current).score - 1e-12:
                    improved = cand
            if improved is None:
                break
            current = improved
    if bar is not None:
        bar.close()
    best = sorted((c for c in evaluate.seen.values() if c is not None), key=lambda c: c.score)[:top]
    margin = float("nan")
    if best and hand:
        if objective == "pwin":
            margin = -best[0].score
        else:
            margin = (hand[0].score - best[0].score) / abs(hand[0].score) if hand[0].score else float("nan")
    return SearchResult(best, hand, margin, len(evaluate.seen), evaluate.invalid, evaluate.over_cap, objective, cap,
                        p, m, space.name, time.perf_counter() - start)
