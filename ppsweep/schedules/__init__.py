"""The schedule registry: one module per schedule, looked up by name."""

from __future__ import annotations

from ppsweep.schedules import (
    chimera,
    dualpipe,
    dualpipev,
    flex,
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
from ppsweep.schedules.user import find_user_schedule
from ppsweep.schedules.variants import split_label

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
        flex.SCHEDULE,
    )
}


def get_schedule(name: str) -> Schedule:
    """The schedule a name or variant label (``name@option=value``) refers to.

    Built-in schedules first, then the user's (:mod:`ppsweep.schedules.user`: a ``.csv`` file, a
    ``module:function``, an entry point of the group ``ppsweep.schedules``). The variant's options
    are not applied here (:func:`ppsweep.tables.build.resolve_options` does).

    Raises:
      ValueError: naming the accepted schedules when ``name`` is unknown.
    """
    base, _ = split_label(name)
    if base in SCHEDULES:
        return SCHEDULES[base]
    user = find_user_schedule(base)
    if user is not None:
        return user
    raise ValueError(
        f"schedule: unknown name {base!r}; accepted: {', '.join(sorted(SCHEDULES))}, "
        "a PyTorch CSV file (*.csv), module:function, or an entry point of the group ppsweep.schedules"
    )


__all__ = ["SCHEDULES", "Schedule", "ScheduleOrder", "get_schedule"]
