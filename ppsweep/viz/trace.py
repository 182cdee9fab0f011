"""Simulated steps as events: Chrome/Perfetto traces and Gantt charts of one schedule at one point.

``python -m ppsweep.trace SCHEDULE p=P m=M [KEY=VALUE ...] [--gantt PNG] [--table-gantt PNG] [--trace JSON]``

simulates one step of a schedule with the reference simulator's event record
(:func:`ppsweep.engine.reference.reference_simulate` with ``record=True``; the tests check the
reference against the JAX engine) and writes any of:

- ``--trace PATH``: a Chrome trace-event JSON (open it in https://ui.perfetto.dev or
  ``chrome://tracing``): one process per worker, a ``compute`` thread with every operation (and
  optimizer update) as an ``"X"`` complete event, ``send`` threads with every outgoing message
  from its send to its arrival (as many ``send`` threads as messages in flight at once need), a
  ``sync`` thread with gradient synchronisations, and a flow arrow (``"s"``/``"f"`` events sharing
  an ``id``, the ``"f"`` bound to its enclosing slice with ``"bp": "e"``) from each message to
  the operation that consumes it. Times are microseconds.
- ``--gantt PATH``: a PNG Gantt chart of the simulated step (compute and messages on separate
  lanes, idle time hatched).
- ``--table-gantt PATH``: a PNG Gantt chart of the idealized table (unit slots, no communication).

Keys: ``p``, ``m`` (required), the point's value of any registered point dimension
(:mod:`ppsweep.sweep.dimensions`: ``bandwidth`` (bytes/s), ``latency`` (s), ``compute`` (peak
FLOP/s), ``fb_overlap`` (share); each checked against its accepted range), ``mode``
(``overlap``/``blocking``/``contention``/``ports``), ``model`` and ``system``
(names of configs in ``conf/model`` and ``conf/system``; default ``megatron_128l`` and
``baseline``), ``profile`` (a profiled-costs file: its measured costs instead of the model's);
any other key is a schedule option (``waves=2``). ``--store PATH`` takes the
model, system, profile, slots, schedule options and (single) communication mode from a results store's
configuration instead, so the step shown is a point of that sweep. A point value not given is
the system's, the mode ``overlap``. Bad input
prints one line ``error: ...`` and exits with 2.

Example: ``python -m ppsweep.trace 1f1b p=4 m=8 bandwidth=1e10 --gantt 1f1b.png --trace 1f1b.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from ppsweep.cli.support import UsageError, command_parser, run_command
from ppsweep.viz.display import assign_lanes, format_time, message_lanes  # noqa: F401 - the lanes are part of this module's API
from ppsweep.tables.ops import KIND_LETTER, op_label
from ppsweep.engine.reference import ReferenceResult, StepRecord, reference_simulate
from ppsweep.tables.table import ScheduleTable

#: Microseconds per second (Chrome trace timestamps are microseconds).
US = 1e6


def simulate_step(
    table: ScheduleTable,
    model,
    system,
    bandwidth: float | None = None,
    latency: float | None = None,
    mode: str = "overlap",
    peak_flops: float | None = None,
    profile: Any = None,
    fb_overlap: float | None = None,
) -> ReferenceResult:
    """One step of ``table`` at one point, with the event record, costs as a sweep computes them.

    Args:
      table: the schedule table.
      model, system: :class:`ppsweep.cost_model.ModelConfig` and :class:`~ppsweep.cost_model.SystemConfig`.
      bandwidth, latency: bytes/s and s; default the system's (the profile's with a profile).
      mode: communication mode.
      peak_flops: peak FLOP/s (a sweep's ``compute`` value); default the system's.
      profile: a :class:`ppsweep.cost_profile.CostProfile` whose measured costs replace the cost
        model's (``costs=profile``), or None.
      fb_overlap: share of an F&B pair's forward hidden under its backward (a sweep's
        ``fb_overlap`` value); default the system's.

    Returns:
      The reference result; its ``record`` holds every event.
    """
    from ppsweep.cost_model import stage_costs

    fb_overlap = system.fb_overlap if fb_overlap is None else fb_overlap
    if profile is not None:
        import numpy as np

        from ppsweep.cost_profile import engine_costs_from_profile

        network = {k: v for k, v in (("alpha", latency), ("beta", bandwidth)) if v is not None}
        c = engine_costs_from_profile(profile, table, **network, fb_overlap=fb_overlap, t_opt=system.optimizer_time)
        per_stage = {k: np.broadcast_to(v, (table.n_stages,)) for k, v in c.stages().items()}
        return reference_simulate(
            table, per_stage["t_f"], per_stage["t_b"], float(c.alpha), float(c.beta), float(c.msg_bytes), mode,
            t_i=per_stage["t_i"], t_w=per_stage["t_w"], grad_bytes=per_stage["grad_bytes"], t_opt=float(c.t_opt),
            fb_overlap=float(c.fb_overlap), record=True,
        )
    costs = stage_costs(model, system, table, peak_flops=None if peak_flops is None else [peak_flops])
    return reference_simulate(
        table,
        costs.t_f[0],
        costs.t_b[0],
        system.latency if latency is None else latency,
        system.bandwidth if bandwidth is None else bandwidth,
        costs.msg_bytes,
        mode,
        t_i=costs.t_i[0],
        t_w=costs.t_w[0],
        grad_bytes=costs.grad_bytes,
        t_opt=system.optimizer_time,
        fb_overlap=fb_overlap,
        record=True,
    )


def op_name(op) -> str:
    """Short label of an operation: ``F3s1`` (forward of microbatch 3 at stage 1), ``F3s1&B1s6`` for a pair."""
    return op_label(op, show_stage=True)


def chrome_trace(record: StepRecord, metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A Chrome trace-event document of a recorded step (see the module docstring for its layout).

    Args:
      record: the step's events.
      metadata: extra information for ``otherData`` (schedule, point, ...).

    Returns:
      ``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}``.
    """
    events: list[dict[str, Any]] = []
    lanes = message_lanes(record)
    n_lanes = [0] * record.p
    for msg, lane in zip(record.messages, lanes):
        n_lanes[msg.src] = max(n_lanes[msg.src], lane + 1)
    sync_tid = 1 + max(n_lanes, default=0)
    for w in range(record.p):
        events.append({"ph": "M", "name": "process_name", "pid": w, "tid": 0, "args": {"name": f"worker {w}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": w, "tid": 0, "args": {"sort_index": w}})
        events.append({"ph": "M", "name": "thread_name", "pid": w, "tid": 0, "args": {"name": "compute"}})
        for lane in range(n_lanes[w]):
            events.append({"ph": "M", "name": "thread_name", "pid": w, "tid": 1 + lane, "args": {"name": f"send {lane}"}})
        if any(w in s.holders for s in record.syncs):
            events.append({"ph": "M", "name": "thread_name", "pid": w, "tid": sync_tid, "args": {"name": "sync"}})
    consumer_event: dict[Any, dict[str, Any]] = {}
    for ev in record.ops:
        x = {
            "ph": "X",
            "name": op_name(ev.op),
            "cat": KIND_LETTER[ev.op.kind],
            "pid": ev.worker,
            "tid": 0,
            "ts": ev.start * US,
            "dur": (ev.end - ev.start) * US,
            "args": {"kind": KIND_LETTER[ev.op.kind], "microbatch": ev.op.micro, "stage": ev.op.stage},
        }
        consumer_event[ev.op] = x
        events.append(x)
    for ev in record.updates:
        events.append({"ph": "X", "name": "optimizer", "cat": "update", "pid": ev.worker, "tid": 0, "ts": ev.start * US, "dur": (ev.end - ev.start) * US})
    for ev in record.syncs:
        for w in ev.holders:
            events.append(
                {
                    "ph": "X", "name": f"sync stage {ev.stage}", "cat": "sync", "pid": w, "tid": sync_tid,
                    "ts": ev.start * US, "dur": (ev.end - ev.start) * US, "args": {"holders": list(ev.holders)},
                }
            )
    for k, (msg, lane) in enumerate(zip(record.messages, lanes)):
        send, dur = msg.send * US, (msg.arrive - msg.send) * US
        events.append(
            {
                "ph": "X", "name": f"{op_name(msg.producer)} -> w{msg.dst}", "cat": "message", "pid": msg.src,
                "tid": 1 + lane, "ts": send, "dur": dur,
                "args": {"to_worker": msg.dst, "for": op_name(msg.consumer), "ready_us": msg.ready * US, "arrive_us": msg.arrive * US},
            }
        )
        target = consumer_event[msg.consumer]
        # Binding points inside the slices (their midpoints), so no viewer drops an arrow at a slice edge.
        events.append({"ph": "s", "id": k, "name": "message", "cat": "message", "pid": msg.src, "tid": 1 + lane, "ts": send + dur / 2})
        events.append(
            {"ph": "f", "bp": "e", "id": k, "name": "message", "cat": "message", "pid": msg.dst, "tid": 0, "ts": target["ts"] + target["dur"] / 2}
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"mode": record.mode, "t_sim_s": record.t_sim, **dict(metadata or {})},
    }


def write_chrome_trace(record: StepRecord, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None) -> Path:
    """Write :func:`chrome_trace` as JSON to ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(record, metadata)))
    return path


# --------------------------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("trace", "Simulate one step of a schedule and draw it (see ppsweep.viz.trace's docstring).",
                            "1f1b p=4 m=8 bandwidth=1e10 --gantt 1f1b.png --trace 1f1b.json")
    parser.add_argument("schedule", help="registered schedule name")
    parser.add_argument("assignments", nargs="*", metavar="KEY=VALUE", help="p=P m=M, point and schedule options")
    parser.add_argument("--gantt", metavar="PNG", help="write a Gantt chart of the simulated step")
    parser.add_argument("--table-gantt", metavar="PNG", help="write a Gantt chart of the idealized table")
    parser.add_argument("--trace", metavar="JSON", help="write a Chrome/Perfetto trace of the simulated step")
    parser.add_argument("--store", metavar="PATH", help="take model, system, slots and options from this results store")
    parser.add_argument("--f-slots", type=int, default=None, metavar="N", help="slots per forward in the table (default 1)")
    parser.add_argument("--b-slots", type=int, default=None, metavar="N", help="slots per backward in the table (default 2)")
    return parser


def _yaml_file(kind: str, name: str) -> dict[str, Any]:
    import yaml

    from ppsweep.cli.main import find_conf_dir

    path = find_conf_dir() / kind / f"{name}.yaml"
    if not path.is_file():
        choices = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise UsageError(f"{kind}: no config {name!r}; choose one of {', '.join(choices)}")
    data = yaml.safe_load(path.read_text()) or {}
    return {k: v for k, v in data.items() if k != "defaults"}


def _store_config(path: str) -> dict[str, Any]:
    import yaml

    from ppsweep.analysis import AnalysisError, load

    try:
        dataset = load(path)
    except AnalysisError as error:
        raise UsageError(str(error)) from None
    config = yaml.safe_load(dataset.attrs.get("config") or "") or {}
    if not isinstance(config, dict) or "model" not in config or "system" not in config:
        raise UsageError(f"{path}: the store keeps no model/system configuration")
    return config


def _float(key: str, text: Any, least: str) -> float:
    """A finite number for ``key``, ``> 0`` (``least="> 0"``) or ``>= 0``; errors use the user's name."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"{key}: must be a number, got {text!r}") from None
    if not math.isfinite(value) or not (value > 0 if least == "> 0" else value >= 0):
        raise UsageError(f"{key}: must be a finite number {least}, got {text!r}")
    return value


def _point_values(values: dict[str, Any]) -> dict[str, float]:
    """The point's values given on the command line (``bandwidth=1e10``, ``fb_overlap=0.5``, …), one
    per registered point dimension (:data:`ppsweep.sweep.dimensions.POINT_DIMENSIONS`), taken out of
    ``values`` and checked against the dimension's accepted range."""
    import numpy as np

    from ppsweep.sweep.dimensions import POINT_DIMENSIONS

    point = {}
    for dim in POINT_DIMENSIONS:
        if dim.name in values:
            value = _float(dim.name, values.pop(dim.name), "> 0" if dim.positive else ">= 0")
            try:
                dim.check(np.array([value]))
            except ValueError as error:
                raise UsageError(str(error)) from None
            point[dim.name] = value
    return point


def _check_profile_point(point: Mapping[str, float], profile: Any) -> None:
    """Refuse a point value that the profile gives itself (each dimension's rule, e.g. ``compute``)."""
    from ppsweep.sweep.dimensions import POINT_DIMENSIONS

    for dim in POINT_DIMENSIONS:
        reason = dim.refused_by(profile) if dim.name in point else None
        if reason:
            raise UsageError(f"{dim.name}: {reason}")


def _run(args: argparse.Namespace) -> str:
    from ppsweep.tables.build import build_schedule
    from ppsweep.cost_model import ModelConfig, SystemConfig
    from ppsweep.viz.show import parse_assignments

    if not (args.gantt or args.table_gantt or args.trace):
        raise UsageError("nothing to write: give --gantt PNG, --table-gantt PNG and/or --trace JSON")
    values = parse_assignments(args.assignments)  # raises UsageError on bad input
    for key in ("p", "m"):
        if key not in values:
            raise UsageError(f"{key}: required, give {key}=N (p >= 2, m >= 1), e.g. p=4 m=8")
    p, m = values.pop("p"), values.pop("m")
    given = _point_values(values)
    mode = values.pop("mode", None)
    options: dict[str, Any] = {}
    slots = {"f": 1, "b": 2}
    if args.store:
        if "model" in values or "system" in values:
            raise UsageError("give either --store or model=/system=, not both")
        config = _store_config(args.store)
        model_cfg, system_cfg = config["model"], config["system"]
        options = dict((config.get("schedule_options") or {}).get(args.schedule) or {})
        slots.update(config.get("slots") or {})
        modes = (config.get("comm") or {}).get("mode") if isinstance(config.get("comm"), dict) else None
        profile_file = (config.get("costs") or {}).get("profile")
        if mode is None and isinstance(modes, str):
            mode = modes
    else:
        model_cfg = _yaml_file("model", str(values.pop("model", "megatron_128l")))
        system_cfg = _yaml_file("system", str(values.pop("system", "baseline")))
        profile_file = values.pop("profile", None)
    options.update(values)
    profile = None
    if profile_file is not None:
        from ppsweep.cost_profile import load_cost_profile

        profile = load_cost_profile(profile_file)  # a bad file: ValueError, one line
        _check_profile_point(given, profile)
    mode = str(mode or "overlap")
    f_slots = args.f_slots if args.f_slots is not None else slots["f"]
    b_slots = args.b_slots if args.b_slots is not None else slots["b"]
    model = ModelConfig.from_mapping(model_cfg)
    system = SystemConfig.from_mapping(system_cfg)
    from ppsweep.sweep.estimate import check_table

    check_table(args.schedule, p, m, f_slots, b_slots, **options)  # before building it
    table = build_schedule(args.schedule, p, m, f_slots=f_slots, b_slots=b_slots, **options)
    bandwidth, latency = given.get("bandwidth"), given.get("latency")
    result = simulate_step(table, model, system, bandwidth, latency, mode, given.get("compute"), profile, fb_overlap=given.get("fb_overlap"))
    record = result.record
    if profile is not None:  # the profile's network unless overridden
        latency = profile.network()[0] if latency is None else latency
        bandwidth = (profile.network()[1] if bandwidth is None else bandwidth) if not profile.message_is_time else math.inf
    point = {
        "schedule": args.schedule, "p": table.p, "m": table.m, "mode": mode, "options": table.options,
        "bandwidth": system.bandwidth if bandwidth is None else bandwidth,
        "latency": system.latency if latency is None else latency,
        "model": model.name, "system": system.name,
    }
    if profile is not None:
        point["profile"] = str(profile_file)
    busy = result.compute_time + sum(ev.end - ev.start for ev in record.updates)  # as the store's idle_sim
    idle = 1.0 - busy / (table.p * result.t_sim) if result.t_sim > 0 else float("nan")
    lines = [
        f"{args.schedule} p={table.p} m={table.m} {mode} bandwidth={point['bandwidth']:.3g} B/s "
        f"latency={point['latency']:.3g} s: t_sim = {format_time(result.t_sim)}, idle {idle:.1%}, "
        f"{len(record.messages)} messages, critical path {format_time(result.comm_time)} in communication"
    ]
    from ppsweep.viz import plots

    title = f"{args.schedule} p={table.p} m={table.m}, {mode}, {point['bandwidth']:.3g} B/s, {point['latency']:.3g} s"
    try:
        if args.trace:
            lines.append(f"wrote {write_chrome_trace(record, args.trace, point)} (Chrome/Perfetto trace)")
        if args.gantt:
            lines.append(f"wrote {plots.plot_step_gantt(record, args.gantt, title=title)} (simulated step)")
        if args.table_gantt:
            lines.append(f"wrote {plots.plot_table_gantt(table, args.table_gantt)} (idealized table)")
    except OSError as error:
        raise UsageError(f"cannot write {error.filename!r}: {error.strerror or error}") from None
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0, or 2 after one ``error:`` line on stderr)."""
    from ppsweep.tables.build import UnsupportedPointError

    return run_command(lambda: _run(_parser().parse_intermixed_args(argv)), (UnsupportedPointError, ValueError, TypeError))


if __name__ == "__main__":
    sys.exit(main())
