"""Schedule spaces: sets of variants of the ``flex`` schedule (:mod:`ppsweep.schedules.flex`) with documented ranges.

A space gives, for ``(p, m)`` and the search's nominal costs, a grid of option values (every
combination is one variant, ``flex@option=value…``) and the options the local search refines per
worker. The built-in spaces (issue 28):

- ``a`` — the 1F1B family, one chunk, split backward: ``warmup`` ``d`` in ``[p-1, 2p+1]`` (1F1B's and
  ZB-H1's depth ``p-1`` up to past ZB-H2's ``2(p-1)``), ``lag`` in ``{0, ⌈(p-1)/2⌉, p-1, 2(p-1), m}``
  (every W right after its I, …, ZB-H1's, …, all W last), ``fill`` ``lag`` or ``timed`` (W passes
  placed by playing the step at the search's nominal costs), ``gap`` ``{0, 50, 100}`` % of ``T_W``
  (timed fill only), and the cap as every worker's ``mem`` limit (with the search's ``wshare``). Spans 1F1B (lag 0: the same times where ``t_b = t_i + t_w``), ZB-H1, ZB-H2 and
  what lies between; per-worker refinement of ``warmup`` and ``lag``.
- ``b`` — interleaving: ``v`` in ``{1, 2, 4}``, ``shape`` ``loop`` or ``vee``, ``split`` on or off,
  ``warmup`` ``d`` in ``{0, ⌈(p-1)/2⌉, p-1, 2(p-1)}``, ``lag`` ``{0, p-1}``, ``fill`` ``lag`` or
  ``timed`` (``gap`` ``{0, 100}``), the cap as ``mem``; per-worker refinement of ``warmup`` and ``lag``.
- ``c`` — ``a`` with a per-worker activation limit ``mem`` in ``{⌈cap/2⌉ … cap}`` (the search's
  cap in ``M_B``; ``{p, 2p}`` without one), as the zero-bubble scheduler's ``mem_limit``.
- ``all`` — ``a`` and ``b`` together (:func:`union`).

Variants whose options cannot run are left out with their one-line reason (counted by the search).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ppsweep.schedules.variants import variant_label

SCHEDULE = "flex"


@dataclass(frozen=True)
class Space:
    """A named space of ``flex`` variants.

    Attributes:
      name: the space's name. description: one line.
      grid: ``(p, m, cap, times, wshare) -> {option: [values…]}``; ``cap`` the activation cap in ``M_B``
        or None, ``times`` the nominal ``"F:I:W:C"`` of the timed fill, ``wshare`` the percent of an
        activation kept from I to W (the memory rule the cap is checked with).
      per_worker: options the local search refines worker by worker.
      rule: optional ``options -> bool`` keeping only meaningful combinations.
    """

    name: str
    description: str
    grid: Callable[..., dict[str, list[Any]]]
    per_worker: tuple[str, ...] = ()
    rule: Callable[[dict[str, Any]], bool] | None = None
    parts: tuple[Space, ...] = ()

    def variants(self, p: int, m: int, cap: float | None, times: str, wshare: int = 100) -> list[dict[str, Any]]:
        """Every combination of the grid's values that passes :attr:`rule` (options as a dict); a union's parts' in turn."""
        if self.parts:
            return [v for part in self.parts for v in part.variants(p, m, cap, times, wshare)]
        grid = self.grid(p, m, cap, times, wshare)
        keys = list(grid)
        out = []
        for values in itertools.product(*(grid[k] for k in keys)):
            options = dict(zip(keys, values))
            if self.rule is None or self.rule(options):
                out.append(options)
        return out


def label(options: dict[str, Any]) -> str:
    """The variant label of ``options`` (``flex@…``, sorted; booleans as ``true``/``false``)."""
    shown = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in options.items()}
    return variant_label(SCHEDULE, shown)


def _lags(p: int, m: int) -> list[int]:
    return sorted({0, math.ceil((p - 1) / 2), p - 1, min(2 * (p - 1), m), m})


def _grid_a(p: int, m: int, cap: float | None, times: str, wshare: int = 100) -> dict[str, list[Any]]:
    return {"warmup": list(range(p - 1, min(2 * p + 1, m) + 1)), "lag": _lags(p, m), "fill": ["lag", "timed"],
            "gap": [0, 50, 100], "times": [times], "mem": [min(m, int(cap)) if cap else 0], "wshare": [wshare]}


def _grid_b(p: int, m: int, cap: float | None, times: str, wshare: int = 100) -> dict[str, list[Any]]:
    return {"v": [1, 2, 4], "shape": ["loop", "vee"], "split": [True, False],
            "warmup": sorted({0, math.ceil((p - 1) / 2), p - 1, 2 * (p - 1)}), "lag": [0, p - 1],
            "fill": ["lag", "timed"], "gap": [0, 100], "times": [times], "mem": [min(m, int(cap)) if cap else 0],
            "wshare": [wshare]}


def _grid_c(p: int, m: int, cap: float | None, times: str, wshare: int = 100) -> dict[str, list[Any]]:
    top = min(m, int(cap)) if cap else 2 * p
    mems = list(range(max(1, math.ceil(top / 2)), top + 1)) if cap else [p, 2 * p]
    return {**_grid_a(p, m, cap, times, wshare), "mem": [x for x in mems if x <= m]}


def _rule_a(options: dict[str, Any]) -> bool:
    # gap and times mean something only to the timed fill
    return options["fill"] == "timed" or options["gap"] == 100


def _rule_b(options: dict[str, Any]) -> bool:
    return _rule_a(options) and not (options["v"] == 1 and options["shape"] == "vee")


SPACES: dict[str, Space] = {
    s.name: s
    for s in (
        Space("a", "1F1B family: warm-up depth and W deferral per worker, lag or timed W fill", _grid_a,
              ("warmup", "lag"), _rule_a),
        Space("b", "interleaving degree and chunk placement (loop, vee)", _grid_b, ("warmup", "lag"), _rule_b),
        Space("c", "space a under a per-worker activation limit (mem_limit)", _grid_c, ("warmup", "lag"), _rule_a),
    )
}


def union(name: str, description: str, *parts: Space) -> Space:
    """A space holding every variant of ``parts``; its neighbours move each option over the values any part has."""

    def grid(*args: Any) -> dict[str, list[Any]]:
        merged: dict[str, list[Any]] = {}
        for part in parts:
            for key, values in part.grid(*args).items():
                merged[key] = sorted(set(merged.get(key, [])) | set(values), key=lambda x: (str(type(x)), x))
        return merged

    per_worker = tuple(dict.fromkeys(k for part in parts for k in part.per_worker))
    return Space(name, description, grid, per_worker, None, parts)


SPACES["all"] = union("all", "spaces a and b together", SPACES["a"], SPACES["b"])


def get_space(name: str) -> Space:
    """The built-in space ``name``; a ValueError naming the accepted ones otherwise."""
    if name not in SPACES:
        raise ValueError(f"space: unknown {name!r}; accepted: {', '.join(SPACES)}")
    return SPACES[name]


def strip_times(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without those that change nothing: ``times`` and ``gap`` where the fill is not timed,
    ``wshare`` without a ``mem`` limit, options at their defaults."""
    from ppsweep.schedules.flex import DEFAULTS

    drop = set() if options.get("fill", "lag") == "timed" else {"times", "gap"}
    if not options.get("mem"):
        drop.add("wshare")
    return {k: v for k, v in options.items() if k not in drop and v != DEFAULTS.get(k, object())}
