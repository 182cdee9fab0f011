"""Shared test helpers: small valid tables of every registered schedule."""

from __future__ import annotations

import pytest

from ppsweep import SCHEDULES, build_schedule
from ppsweep.build import why_unsupported

#: (p, m) pairs tried for every schedule; unsupported ones are skipped.
SMALL_POINTS = [(2, 2), (2, 4), (3, 3), (4, 4), (4, 8), (6, 6), (8, 8), (8, 16)]


def supported_cases(points=SMALL_POINTS, options_by_schedule=None):
    """``(name, p, m, options)`` for every registered schedule at every supported point."""
    options_by_schedule = options_by_schedule or {}
    cases = []
    for name in sorted(SCHEDULES):
        for options in options_by_schedule.get(name, [{}]):
            for p, m in points:
                if why_unsupported(name, p, m, **options) is None:
                    cases.append((name, p, m, options))
    return cases


def case_id(case) -> str:
    name, p, m, options = case
    extra = "".join(f"-{k}={v}" for k, v in options.items())
    return f"{name}-p{p}-m{m}{extra}"


@pytest.fixture
def build():
    """``build(name, p, m, **options)``: a validated table."""
    return build_schedule
