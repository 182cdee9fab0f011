"""``build_schedule``: from a name and ``(p, m, options)`` to a checked table."""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from typing import Any, Callable

from ppsweep.schedules import SCHEDULES, get_schedule
from ppsweep.schedules.base import UnsupportedPointError  # noqa: F401 - its home is schedules.base; re-exported
from ppsweep.tables.paths import realize, validate
from ppsweep.schedules.variants import split_label, typed_value
from ppsweep.tables.table import ScheduleTable
from ppsweep.tables.cache import cached_table


def check_positive_int(field: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """``value`` as an int, or a ValueError naming ``field`` and the accepted values (``inf`` and
    ``nan`` included)."""
    bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
    if bad or value != int(value) or value < minimum or (maximum is not None and value > maximum):
        accepted = f"an integer >= {minimum}" if maximum is None else f"an integer from {minimum} to {maximum:,}"
        raise ValueError(f"{field}: must be {accepted}, got {value!r}")
    return int(value)


#: Largest value of a built-in schedule's integer option (``waves``, ``v``): a table's stages, and so
#: its size, grow with it; beyond it a sweep is a typo (``hanayo@waves=100000``), not a design.
MAX_OPTION_VALUE = 64


def resolve_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The schedule's options with defaults filled in; unknown names are an error.

    ``name`` may be a variant label (``interleaved_1f1b@v=4``): its options come first, typed after
    the defaults (:mod:`ppsweep.schedules.variants`), then ``options`` (which must not repeat them).
    """
    schedule = get_schedule(name)
    _, texts = split_label(name)
    fixed = {key: typed_value(name, key, text, schedule.option_names.get(key)) for key, text in texts.items()}
    unknown = sorted((set(options) | set(fixed)) - set(schedule.option_names))
    if unknown:
        accepted = ", ".join(schedule.option_names) or "none"
        raise ValueError(f"schedule {name!r}: unknown option {unknown[0]!r}; accepted: {accepted}")
    twice = sorted(set(options) & set(fixed))
    if twice:
        raise ValueError(f"schedule {name!r}: option {twice[0]!r} is set by the label and again in its options")
    resolved = {**schedule.option_names, **fixed, **options}
    if split_label(name)[0] in SCHEDULES:  # a user schedule's options mean what its function makes of them
        for key, value in resolved.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(schedule.option_names[key], int) \
                    and not isinstance(schedule.option_names[key], bool) and value > schedule.option_bounds.get(key, MAX_OPTION_VALUE):
                limit = schedule.option_bounds.get(key, MAX_OPTION_VALUE)
                why = "its accepted range" if key in schedule.option_bounds else "the table grows with it"
                raise ValueError(f"schedule {name!r}: option {key} must be at most {limit} ({why}), got {value!r}")
    return resolved


def why_unsupported(name: str, p: int, m: int, **options: Any) -> str | None:
    """None where ``name`` can run at ``(p, m, options)``, else the reason."""
    return get_schedule(name).why_unsupported(p, m, **resolve_options(name, options))


def build_schedule(name: str, p: int, m: int, f_slots: int = 1, b_slots: int = 2, **options: Any) -> ScheduleTable:
    """Build, realize and validate a schedule table.

    Args:
      name: a registered schedule (``gpipe``, ``1f1b``, …; see ``ppsweep.SCHEDULES``).
      p: number of workers, at least 2.
      m: number of microbatches, at least 1.
      f_slots: slots a forward takes in the idealized table.
      b_slots: slots a backward takes in the idealized table.
      **options: schedule options (for instance ``waves`` for Hanayo).

    Returns:
      The valid :class:`ScheduleTable`.

    Raises:
      ValueError: a bad field, naming it and the accepted values.
      UnsupportedPointError: the schedule cannot run at this point.
    """
    p = check_positive_int("p", p, 2)
    m = check_positive_int("m", m, 1)
    f_slots = check_positive_int("f_slots", f_slots, 1)
    b_slots = check_positive_int("b_slots", b_slots, 1)
    options = resolve_options(name, options)
    # The option's type is part of the key: True == 1 must not return a table built for 1.
    return _build_cached(name, p, m, f_slots, b_slots, tuple(sorted((k, type(v).__name__, v) for k, v in options.items())))


#: Most table cells the in-memory cache of built tables keeps (least recently used go first): a
#: sweep's units reuse their tables, and a design-space sweep's large tables (p=64, m=1024: 10^6
#: cells and more, with their compiled forms) must not pile up.
KEPT_CELLS = 1 << 21


class _CellBoundedCache:
    """``functools.lru_cache`` for :func:`_build`, bounded by the cells of the tables it keeps."""

    def __init__(self, build: Callable[..., ScheduleTable]):
        self._build = build
        self._kept: OrderedDict[tuple, ScheduleTable] = OrderedDict()
        self._held = 0  # the kept tables' cells
        self._lock = threading.Lock()
        functools.update_wrapper(self, build)

    def __call__(self, *key: Any) -> ScheduleTable:
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        table = self._build(*key)
        with self._lock:
            if key not in self._kept:
                self._kept[key] = table
                self._held += table.kind.size
            table = self._kept[key]
            self._kept.move_to_end(key)
            while self._held > KEPT_CELLS and len(self._kept) > 1:
                self._held -= self._kept.popitem(last=False)[1].kind.size
        return table

    def cache_clear(self) -> None:
        """Forget every kept table."""
        with self._lock:
            self._kept.clear()
            self._held = 0


def _build(name: str, p: int, m: int, f_slots: int, b_slots: int, options: tuple) -> ScheduleTable:
    schedule = get_schedule(name)
    kwargs = {key: value for key, _, value in options}
    reason = schedule.why_unsupported(p, m, **kwargs)
    if reason:
        raise UnsupportedPointError(f"{name} at p={p}, m={m}: {reason}")

    def build() -> ScheduleTable:
        # the array code where it handles the order and the table, else the references (ppsweep.tables.paths)
        table = realize(schedule.build_order(p, m, **kwargs), f_slots, b_slots)
        validate(table)
        return table

    if split_label(name)[0] not in SCHEDULES:  # a user's schedule: its code is not part of the cache's key
        return build()
    return cached_table(name, p, m, f_slots, b_slots, options, build)


_build_cached = _CellBoundedCache(_build)


def bubble_formula(name: str, p: int, m: int, **options: Any) -> float:
    """Closed-form bubble ratio of a schedule (NaN where it has none or cannot run)."""
    if why_unsupported(name, p, m, **options):
        return math.nan
    return float(get_schedule(name).bubble_formula(p, m, **resolve_options(name, options)))


def peak_activations_formula(name: str, p: int, m: int, **options: Any) -> float:
    """Closed-form peak stored activations of a schedule (NaN where it has none or cannot run)."""
    if why_unsupported(name, p, m, **options):
        return math.nan
    return float(get_schedule(name).peak_activations_formula(p, m, **resolve_options(name, options)))
