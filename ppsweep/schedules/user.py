"""Your own schedules: an entry point, a ``module:function`` name, or a PyTorch CSV file.

:func:`ppsweep.schedules.get_schedule` looks a name up among the built-in schedules first, then:

- **a CSV file** (a name ending in ``.csv``): PyTorch's pipeline CSV
  (:mod:`ppsweep.tables.interchange`); it is valid at its own ``p`` and ``m`` only (other points are
  unsupported, ``valid = False`` in a sweep);
- **``module:function``**: the function is imported and called as ``function(p, m, **options)``;
- **an entry point** of the group ``ppsweep.schedules`` (declared by an installed package, as
  xarray's backends are): its name is the schedule's name, its object is loaded on first use.

A function (of either kind) returns a :class:`~ppsweep.schedules.base.ScheduleOrder`, or simply
the per-worker operation lists (``list[list[Op]]``), whose placement, replicas and split backward
are then inferred as for a CSV file (:func:`ppsweep.tables.interchange.infer_order`). It may raise
:class:`ppsweep.tables.build.UnsupportedPointError` where it cannot run. Its keyword parameters with
defaults are its options (``name@option=value`` in a sweep). An entry point may also name a
ready :class:`~ppsweep.schedules.base.Schedule` (with formulas and an operating range).
User schedules have no closed-form formula (``bubble_formula`` is NaN) unless they bring one.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import json
import os
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable

from ppsweep.schedules.base import Schedule, ScheduleOrder, UnsupportedPointError, no_formula

#: Entry-point group in which installed packages register schedules.
ENTRY_POINT_GROUP = "ppsweep.schedules"
#: Environment variable carrying the pinned files to spawned worker processes (JSON).
PINNED_ENV = "PPSWEEP_PINNED_SCHEDULES"
#: User schedules pinned to a file (``python -m ppsweep.verify --repair``: the absolute paths a
#: store recorded): name -> absolute path; a pinned ``module:function`` is loaded from that file.
_PINNED: dict[str, str] = dict(json.loads(os.environ.get(PINNED_ENV) or "{}"))


def pin_schedule_files(files: dict[str, str]) -> None:
    """Load the user schedules named in ``files`` from those absolute paths from now on (in this
    process and in the worker processes it spawns)."""
    _PINNED.update(files)
    os.environ[PINNED_ENV] = json.dumps(_PINNED)
    _csv_schedule.cache_clear()
    _callable_schedule.cache_clear()


def schedule_file(name: str) -> Path | None:
    """The file that defines user schedule ``name``, absolute: its CSV file, or the source of its
    ``module:function``'s (or entry point's) module; None for a name that is neither.

    A module is located without being run (``importlib.util.find_spec``; a dotted name imports
    its parent packages). Only this one file is digested into a store's identity.

    Raises:
      ValueError: naming ``schedule`` when the file does not exist or is not a file.
    """
    if name in _PINNED:
        return Path(_PINNED[name])
    if name.endswith(".csv"):
        path = Path(os.path.abspath(name))
        if path.exists() and not path.is_file():
            raise ValueError(f"schedule: {name!r} is a directory, not a CSV file")
        if not path.exists():
            raise ValueError(f"schedule: CSV file {name!r} not found")
        return path
    module_name = name.partition(":")[0] if ":" in name else _entry_point_module(name)
    if module_name is None:
        return None
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError) as error:
        raise ValueError(f"schedule: cannot load {name!r} as module:function ({error})") from None
    if found is None or not found.origin or not os.path.isfile(found.origin):
        if found is None:
            raise ValueError(f"schedule: cannot load {name!r} as module:function (no module named {module_name!r})")
        return None
    return Path(found.origin).resolve()


def _entry_point_module(name: str) -> str | None:
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return entry.value.partition(":")[0].strip()
    return None


def find_user_schedule(name: str) -> Schedule | None:
    """The user schedule called ``name`` (CSV file, ``module:function`` or entry point), else None.

    Raises:
      ValueError: naming ``schedule`` when the file, module or function cannot be loaded.
    """
    if name.endswith(".csv"):
        return _csv_schedule(_PINNED.get(name) or os.path.abspath(name), name)
    if ":" in name:
        return _callable_schedule(name)
    return _entry_point_schedule(name)


def as_schedule(obj: Any, name: str) -> Schedule:
    """``obj`` as a :class:`Schedule`: itself, or a generator function wrapped (module docstring)."""
    if isinstance(obj, Schedule):
        return obj
    if not callable(obj):
        raise ValueError(f"schedule {name!r}: must be a Schedule or a function (p, m, **options), got {type(obj).__name__}")
    options = {
        key: param.default
        for key, param in list(inspect.signature(obj).parameters.items())[2:]
        if param.default is not inspect.Parameter.empty
    }
    return Schedule(
        name=name,
        build_order=functools.partial(_call_generator, obj, name),
        why_unsupported=_runs_everywhere,
        bubble_formula=no_formula,
        peak_activations_formula=no_formula,
        option_names=options,
        description=(inspect.getdoc(obj) or f"user schedule {name}").splitlines()[0],
    )


def _runs_everywhere(p: int, m: int, **options: Any) -> str | None:
    return None


def _call_generator(function: Callable[..., Any], name: str, p: int, m: int, **options: Any) -> ScheduleOrder:
    from ppsweep.tables.interchange import infer_order

    try:
        result = function(p, m, **options)
    except UnsupportedPointError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's code: one line naming the schedule
        raise ValueError(f"schedule {name!r}: raised {type(error).__name__} at p={p}, m={m}: {error}") from None
    if isinstance(result, ScheduleOrder):
        return result
    try:
        rows = [list(row) for row in result]
    except TypeError:
        raise ValueError(
            f"schedule {name!r}: returned a {type(result).__name__} at p={p}, m={m}; a function returns a ScheduleOrder "
            "or per-worker lists of operations"
        ) from None
    order = infer_order(rows, name=name)
    if order.p != p or order.m != m:
        raise ValueError(f"schedule {name!r}: asked for p={p}, m={m}, it returned p={order.p}, m={order.m}")
    return order


@functools.lru_cache(maxsize=64)
def _callable_schedule(name: str) -> Schedule:
    module_name, _, attribute = name.partition(":")
    try:
        if name in _PINNED:  # from the recorded absolute file, never by a search of sys.path
            found = importlib.util.spec_from_file_location(module_name, _PINNED[name])
            if found is None or found.loader is None:
                raise ImportError(f"cannot load {_PINNED[name]}")
            module = importlib.util.module_from_spec(found)
            found.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        obj = getattr(module, attribute)
    except Exception as error:  # noqa: BLE001 - a user module that fails on import: one line
        raise ValueError(f"schedule: cannot load {name!r} as module:function ({type(error).__name__}: {error})") from None
    return as_schedule(obj, name)


@functools.lru_cache(maxsize=64)
def _entry_point_schedule(name: str) -> Schedule | None:
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return as_schedule(entry.load(), name)
    return None


def entry_point_names() -> list[str]:
    """Names registered in the ``ppsweep.schedules`` entry-point group (not loaded)."""
    return sorted(entry.name for entry in entry_points(group=ENTRY_POINT_GROUP))


@functools.lru_cache(maxsize=64)
def _csv_schedule(path: str, name: str) -> Schedule:
    from ppsweep.tables.interchange import CsvTableError, read_csv_order

    if not os.path.exists(path):
        raise ValueError(f"schedule: CSV file {name!r} not found")
    if not os.path.isfile(path):
        raise ValueError(f"schedule: {name!r} is a directory, not a CSV file")
    try:
        order = read_csv_order(path, name=name)
    except CsvTableError as error:
        raise ValueError(f"schedule: {name}: {error}") from None

    def why_unsupported(p: int, m: int) -> str | None:
        if (p, m) != (order.p, order.m):
            return f"the CSV file defines p={order.p}, m={order.m}"
        return None

    return Schedule(
        name=name,
        build_order=lambda p, m: order,
        why_unsupported=why_unsupported,
        bubble_formula=no_formula,
        peak_activations_formula=no_formula,
        description=f"PyTorch pipeline CSV, p={order.p}, m={order.m}",
    )
