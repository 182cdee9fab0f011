"""The schedule registry: one module per schedule, looked up by name."""

from __future__ import annotations

from ppsweep.schedules import (
    chimera,
    dualpipe,
    dualpipev,
    gpipe,
    hanayo,
    interleaved_1f1b,
    interleaved_zb,
    looped_bfs,
    one_f_one_b,
    zb_h1,
    zb_h2,
    zbv,
)
from ppsweep.schedules.base import Schedule, ScheduleOrder

SCHEDULES: dict[str, Schedule] = {
    s.name: s
    for s in (
        gpipe.SCHEDULE,
        one_f_one_b.SCHEDULE,
        chimera.SCHEDULE,
        hanayo.SCHEDULE,
        interleaved_1f1b.SCHEDULE,
        looped_bfs.SCHEDULE,
        interleaved_zb.SCHEDULE,
        zb_h1.SCHEDULE,
        zb_h2.SCHEDULE,
        zbv.SCHEDULE,
        dualpipe.SCHEDULE,
        dualpipev.SCHEDULE,
    )
}


def get_schedule(name: str) -> Schedule:
    """The registered schedule called ``name``.

    Raises:
      ValueError: naming the accepted schedules when ``name`` is unknown.
    """
    try:
        return SCHEDULES[name]
    except KeyError:
        raise ValueError(
            f"schedule: unknown name {name!r}; accepted: {', '.join(sorted(SCHEDULES))}"
        ) from None


__all__ = ["SCHEDULES", "Schedule", "ScheduleOrder", "get_schedule"]
