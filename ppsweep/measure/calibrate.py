"""Per-stage costs fitted from a Chrome/Perfetto trace of pipeline steps (issue 26, item 3).

Reads one or more trace-event JSON files (or folders of them): PyTorch's profiler traces (one per
rank, or merged) and ppsweep's own (``python -m ppsweep.trace ... --trace``). Torch is not imported.

What is read:

- compute spans (``"ph": "X"``) named by PyTorch pipelining's action strings ``<stage><F|B|I|W><mb>``
  (``0F3``, ``1I2``, ``2W0``, ``0B1``), or ppsweep's ``F3s0`` (kind, microbatch, stage) with the
  categories ``F``/``B``/``I``/``W``. PyTorch's ``_PipelineScheduleRuntime`` also writes
  ``PP:0F3`` spans, but they include the wait for the input message: they are used only where a
  trace has no compute-only spans, and the result says so. Overlapped pairs are read from their halves.
- a *worker* is one ``(file, pid)``; the k-th occurrence of an action on its worker belongs to step k;
  files whose run information (``ppsweep`` or ``otherData``, rank aside) is the same are one run.
- the run's message bytes: the ``ppsweep.msg_bytes`` key our harness adds to a PyTorch trace
  (:mod:`ppsweep.measure.torch_runtime`), or ``otherData.msg_bytes`` of a ppsweep trace, else none.

The fit (every rule here is in the README section "Held against measurements"):

- ``t_f``, ``t_b``, ``t_i``, ``t_w`` of a stage: the median span over steps and microbatches, plus
  the worker's *dispatch overhead* ``o`` (the runtime's time between two operations when the
  second has nothing to wait for: the median gap before operations whose inputs were all ready when
  the previous operation ended). ppsweep has no per-operation overhead, so it is charged to each
  operation. Spread: the interquartile range over the median, the largest over stages. Where the
  trace nests the model's operators inside a span (a full profiler trace), the span's time outside
  them (the runtime's own Python work) is reported per kind (:attr:`Fit.fixed`): like ``o`` it does
  not shrink when a stage is cut into chunks (:func:`ppsweep.measure.predict.predict_step`).
- reported, not fitted: the median gap before an operation whose remote inputs ended before the
  previous operation started (:attr:`Fit.arrived_gap`): what the runtime spends receiving a message
  that had already arrived, which ppsweep's modes charge nothing for.
- message time: for every cross-worker dependency (F from the previous stage's F, B/I from the next
  stage's B/I) whose consumer waited for it (its worker was idle when the producer ended), the gap
  from the producer's end to the consumer's start, less ``o``: the median over those gaps is the
  per-hop time (everything included). Traces with different message sizes fit ``α + bytes/β`` by
  least squares over the per-size medians (the residual reported); one size gives ``message.time``.
- step overhead (``t_opt``): where the trace has ``ppsweep:step`` spans around each step (our
  harness writes them), the median over steps of the step's span (first rank's start to last rank's
  end) less the span of its operations: what the runtime spends before the first and after the last
  operation (splitting the batch, set-up, the last sends). ppsweep adds ``t_opt`` at each worker's end.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppsweep.cost_profile import CostProfile, profile_from_mapping

_TORCH = re.compile(r"(\d+)([FBIW])(\d+)")
_OURS = re.compile(r"([FBIW])(\d+)s(\d+)")
KINDS = ("F", "B", "I", "W")


class TraceError(ValueError):
    """A trace that cannot be calibrated; the message is one line."""


@dataclass(frozen=True)
class Span:
    """One compute operation as traced (times in seconds)."""

    worker: tuple[int, int]  # (file, pid)
    kind: str
    stage: int
    micro: int
    start: float
    end: float
    step: int = 0
    run: int = 0  # files of one run (same run information but the rank) share it
    own: float | None = None  # seconds inside the span outside any event nested in it (None: nothing nested)

    @property
    def dur(self) -> float:
        return self.end - self.start


@dataclass
class Fit:
    """The fitted costs and what the fit saw (see the module docstring)."""

    profile: CostProfile
    n_steps: int
    overhead: float
    n_gaps: int
    msg_sizes: dict[float, float] = field(default_factory=dict)
    residual: float | None = None
    waits_included: bool = False
    fixed: dict[str, float] = field(default_factory=dict)
    arrived_gap: float | None = None

    def per_operation(self) -> dict[str, float]:
        """Seconds of each operation kind that do not scale with the stage's size: the dispatch
        overhead plus the median time the runtime spends inside the span outside the model's
        operators (:attr:`fixed`; 0 where the trace has no nested events)."""
        return {k: self.overhead + self.fixed.get(k, 0.0) for k in KINDS}

    def summary(self) -> str:
        """A few lines for people."""
        prof = self.profile
        ms = lambda xs: "[" + ", ".join(f"{1e3 * x:.3f}" for x in xs) + "]"
        lines = [
            f"stages: {prof.n_stages}, steps: {self.n_steps}, dispatch overhead per operation: {1e6 * self.overhead:.1f} us"
            + "".join(f", {k} runtime-own {1e6 * v:.1f} us" for k, v in self.fixed.items()),
            f"t_f ms: {ms(prof.t_f)}", f"t_b ms: {ms(prof.t_b)}", f"t_i ms: {ms(prof.t_i)}", f"t_w ms: {ms(prof.t_w)}",
        ]
        if prof.msg_time is not None:
            lines.append(f"message: {1e6 * prof.msg_time:.1f} us per hop (median of {self.n_gaps} waited-for messages)")
        else:
            lines.append(f"message: alpha {1e6 * prof.alpha:.1f} us, beta {prof.beta:.4g} B/s "
                         f"(least squares over {len(self.msg_sizes)} sizes, rms residual {1e6 * (self.residual or 0):.1f} us)")
        if prof.t_opt is not None:
            lines.append(f"step overhead (t_opt): {1e3 * prof.t_opt:.3f} ms")
        if self.arrived_gap is not None:
            lines.append(f"gap before an operation whose input arrived during the previous one: {1e6 * self.arrived_gap:.0f} us "
                         "(not in the profile; ppsweep charges nothing there)")
        lines.append("spread (IQR/median, worst stage): " + ", ".join(f"{k} {v:.1%}" for k, v in prof.spread.items()))
        if self.waits_included:
            lines.append("note: only PyTorch's PP: spans found; they include message waits, so times are upper bounds")
        return "\n".join(lines)


def trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """The JSON files named (a folder: its ``*.json``, sorted)."""
    out: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            out += sorted(path.glob("*.json"))
        elif path.is_file():
            out.append(path)
        else:
            raise TraceError(f"trace: no file or folder {str(path)!r}")
    if not out:
        raise TraceError("trace: no JSON trace files found")
    return out


def _events(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TraceError(f"trace: {path} is not a JSON trace ({type(error).__name__})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"trace: {path} has no traceEvents list (Chrome trace-event format)")
    info: dict[str, Any] = {}
    if isinstance(data, dict):  # our harness's key in a PyTorch trace; ppsweep's trace keeps its point in otherData
        for key in ("otherData", "ppsweep"):
            if isinstance(data.get(key), dict):
                info.update(data[key])
    return events, info


def _parse(name: str, cat: Any) -> tuple[str, int, int] | None:
    """(kind, stage, micro) of a compute span's name, None for any other event."""
    match = _TORCH.fullmatch(name)
    if match:
        return match[2], int(match[1]), int(match[3])
    match = _OURS.fullmatch(name)
    if match and cat == match[1]:
        return match[1], int(match[3]), int(match[2])
    return None


STEP_SPAN = "ppsweep:step"


def read_spans(paths: Sequence[Path]) -> tuple[list[Span], dict[int, float], bool]:
    """Compute spans of every file, per-file message bytes, and whether only ``PP:`` spans were found.

    Steps are numbered per worker by occurrence; ``ppsweep:step`` spans come back with kind ``step``.
    """
    spans: list[Span] = []
    step_spans: list[Span] = []
    pp_spans: list[Span] = []
    msg_bytes: dict[int, float] = {}
    runs: dict[str, int] = {}
    for index, path in enumerate(paths):
        events, info = _events(path)
        run = runs.setdefault(json.dumps({k: v for k, v in info.items() if k != "rank"}, sort_keys=True, default=str), len(runs))
        if "msg_bytes" in info:
            msg_bytes[index] = float(info["msg_bytes"])
        threads = _threads(events)
        for ev in events:
            if not isinstance(ev, dict) or ev.get("ph") != "X" or not isinstance(ev.get("name"), str):
                continue
            name = ev["name"]
            if name == STEP_SPAN:
                start = float(ev["ts"]) * 1e-6
                step_spans.append(Span((index, int(ev.get("pid", 0))), "step", -1, -1, start, start + float(ev["dur"]) * 1e-6, 0, run))
                continue
            target = spans
            if name.startswith("PP:"):
                name, target = name[3:], pp_spans
            parsed = _parse(name, ev.get("cat"))
            if parsed is None:
                continue
            try:
                start, dur = float(ev["ts"]) * 1e-6, float(ev["dur"]) * 1e-6
            except (KeyError, TypeError, ValueError):
                raise TraceError(f"trace: {path}: span {ev['name']!r} needs numeric ts and dur (microseconds)") from None
            own = _own_time(ev, threads)
            target.append(Span((index, int(ev.get("pid", 0))), parsed[0], parsed[1], parsed[2], start, start + dur, 0, run, own))
    waits = not spans and bool(pp_spans)
    chosen = spans or pp_spans
    if not chosen:
        raise TraceError("trace: no compute spans named <stage><F|B|I|W><mb> (e.g. 0F3) or F<mb>s<stage> found")
    # the k-th occurrence of an action on its worker is step k
    seen: dict[tuple, int] = {}
    numbered = []
    for span in sorted(chosen + step_spans, key=lambda s: s.start):
        key = (span.worker, span.kind, span.stage, span.micro)
        numbered.append(Span(span.worker, span.kind, span.stage, span.micro, span.start, span.end, seen.get(key, 0),
                             span.run, span.own))
        seen[key] = seen.get(key, 0) + 1
    return numbered, msg_bytes, waits


def _threads(events: list[Any]) -> dict[tuple[Any, Any], list[tuple[float, float]]]:
    """Every complete event that is not a compute span, by (pid, tid): sorted (start, end) in microseconds."""
    threads: dict[tuple[Any, Any], list[tuple[float, float]]] = {}
    for e in events:
        if (isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))
                and isinstance(e.get("dur"), (int, float)) and e.get("name") != STEP_SPAN
                and not _parse(str(e.get("name", "")).removeprefix("PP:"), e.get("cat"))):
            threads.setdefault((e.get("pid"), e.get("tid")), []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    for intervals in threads.values():
        intervals.sort()
    return threads


def _own_time(span: dict[str, Any], threads: dict[tuple[Any, Any], list[tuple[float, float]]]) -> float | None:
    """Seconds of ``span`` outside the events nested in it on its thread (the runtime's own Python
    work around the model's operators), None where nothing is nested (a trimmed or ppsweep trace)."""
    t0, t1 = float(span["ts"]), float(span["ts"]) + float(span["dur"])
    intervals = threads.get((span.get("pid"), span.get("tid")), [])
    covered, reach, nested = 0.0, t0, False
    for a, b in intervals[bisect.bisect_left(intervals, (t0, -math.inf)):]:
        if a > t1:
            break
        if b > t1:
            continue
        nested = True
        if b > reach:  # union of the nested intervals
            covered += b - max(a, reach)
            reach = b
    return max(0.0, (t1 - t0 - covered) * 1e-6) if nested else None


def _producers(span: Span, n_stages: int, split: set[tuple[int, int]]) -> list[tuple[str, int, int]]:
    """(kind, stage, micro) of the operations ``span`` needs from other stages (the data edges)."""
    if span.kind == "F":
        return [("F", span.stage - 1, span.micro)] if span.stage > 0 else []
    if span.kind in ("B", "I") and span.stage < n_stages - 1:
        nxt = span.stage + 1
        return [("I" if (nxt, span.micro) in split else "B", nxt, span.micro)]
    return []


def _quantile_spread(values: list[float]) -> float:
    if len(values) < 4:
        return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 and statistics.median(values) > 0 else 0.0
    q = statistics.quantiles(values, n=4)
    med = statistics.median(values)
    return (q[2] - q[0]) / med if med > 0 else 0.0


def fit_trace(paths: Sequence[str | Path], source: str | None = None) -> Fit:
    """Fit a profiled-costs record to the traces (module docstring).

    Args:
      paths: trace files or folders of them (one per rank, merged, or several runs).
      source: the profile's ``source`` text (default: names the files).

    Returns:
      The :class:`Fit` (its ``profile`` is a :class:`~ppsweep.cost_profile.CostProfile`).

    Raises:
      TraceError: one line naming what is missing or malformed.
    """
    files = trace_files(paths)
    spans, msg_bytes, waits = read_spans(files)
    step_overhead = _step_overhead(spans)
    spans = [s for s in spans if s.kind != "step"]
    n_stages = 1 + max(s.stage for s in spans)
    split = {(s.stage, s.micro) for s in spans if s.kind == "I"}
    index = {(s.run, s.kind, s.stage, s.micro, s.step): s for s in spans}
    by_worker: dict[tuple[int, int], list[Span]] = {}
    for span in spans:
        by_worker.setdefault(span.worker, []).append(span)
    # gaps: dispatch overhead (nothing to wait for) and messages (waited for)
    overheads: list[float] = []
    waited: list[tuple[Span, Span, float]] = []
    arrived: list[float] = []  # gaps before operations whose remote inputs ended before the previous one started
    for ops in by_worker.values():
        ops.sort(key=lambda s: s.start)
        for prev, op in itertools.pairwise(ops):
            ready = prev.end
            deps = [index.get((op.run, k, st, mb, op.step)) for k, st, mb in _producers(op, n_stages, split)]
            remote = [d for d in deps if d is not None and d.worker != op.worker]
            if any(d.end > prev.end for d in remote):
                producer = max(remote, key=lambda d: d.end)
                waited.append((producer, op, op.start - producer.end))
            elif not _producers(op, n_stages, split) or all(d is not None and d.worker == op.worker for d in deps):
                overheads.append(op.start - ready)  # nothing to receive: the gap is the runtime's own
            elif remote and all(d.end < prev.start for d in remote):
                arrived.append(op.start - ready)
    overhead = max(0.0, statistics.median(overheads)) if overheads else 0.0
    # per-stage times
    times: dict[str, list[float]] = {}
    spread: dict[str, float] = {}
    for kind in KINDS:
        per_stage = [[s.dur for s in spans if s.kind == kind and s.stage == st] for st in range(n_stages)]
        if all(per_stage):
            times[kind] = [statistics.median(v) + overhead for v in per_stage]
            spread[f"t_{kind.lower()}"] = round(max(_quantile_spread(v) for v in per_stage), 4)
    if "F" not in times:
        raise TraceError("trace: forward (F) spans missing on some stage")
    if "B" not in times and not ("I" in times and "W" in times):
        raise TraceError("trace: backward spans (B on every stage, or I and W on every stage) missing")
    mapping: dict[str, Any] = {"t_f": times["F"]}
    if "B" in times:
        mapping["t_b"] = times["B"]
    if "I" in times and "W" in times:  # a split backward traced on every stage
        mapping["t_i"], mapping["t_w"] = times["I"], times["W"]
    # messages
    gaps_by_size: dict[float, list[float]] = {}
    for producer, _, gap in waited:
        size = msg_bytes.get(producer.worker[0], math.nan)
        gaps_by_size.setdefault(size, []).append(max(0.0, gap - overhead))
    residual = None
    sizes = {k: statistics.median(v) for k, v in gaps_by_size.items()}
    known = {k: v for k, v in sizes.items() if not math.isnan(k)}
    if len(known) >= 2:
        alpha, inv_beta, residual = _least_squares(known)
        beta = math.inf if inv_beta <= 0 else 1.0 / inv_beta
        mapping["message"] = {"alpha": max(0.0, alpha), "beta": beta, "bytes": max(known)}
    else:
        all_gaps = [g for v in gaps_by_size.values() for g in v]
        mapping["message"] = {"time": statistics.median(all_gaps) if all_gaps else 0.0}
        if all_gaps:
            spread["message"] = round(_quantile_spread(all_gaps) if statistics.median(all_gaps) > 0 else 0.0, 4)
    if step_overhead is not None:
        mapping["t_opt"] = step_overhead
    n_steps = 1 + max(s.step for s in spans)
    mapping["source"] = source or (
        f"calibrated from {', '.join(f.name for f in files)}: {n_steps} step(s), {n_stages} stages"
        + ("; PP: spans (include waits)" if waits else "")
    )
    mapping["spread"] = spread
    profile = profile_from_mapping(mapping)
    fixed = {k: statistics.median(own) for k in KINDS
             if (own := [s.own for s in spans if s.kind == k and s.own is not None])}
    return Fit(profile, n_steps, overhead, len(waited), sizes, residual, waits, fixed,
               statistics.median(arrived) if arrived else None)


def _step_overhead(spans: list[Span]) -> float | None:
    """Median over steps of (the step spans' extent - the operations' extent), None without step spans."""
    extents: dict[tuple[int, int], list[float]] = {}
    for span in spans:
        ext = extents.setdefault((span.run, span.step), [math.inf, -math.inf, math.inf, -math.inf])
        at = 0 if span.kind == "step" else 2
        ext[at], ext[at + 1] = min(ext[at], span.start), max(ext[at + 1], span.end)
    gaps = [(e[1] - e[0]) - (e[3] - e[2]) for e in extents.values() if math.isfinite(e[0]) and math.isfinite(e[2])]
    return max(0.0, statistics.median(gaps)) if gaps else None


def _least_squares(points: dict[float, float]) -> tuple[float, float, float]:
    """``t = alpha + bytes * inv_beta`` through ``{bytes: t}``: (alpha, inv_beta, rms residual)."""
    xs, ys = list(points), list(points.values())
    n, mx, my = len(xs), statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    alpha = my - slope * mx
    rms = math.sqrt(sum((alpha + slope * x - y) ** 2 for x, y in zip(xs, ys)) / n)
    return alpha, slope, rms


def trim_trace(src: str | Path, dst: str | Path) -> Path:
    """A copy of a PyTorch profiler trace with only what calibration reads (compute spans, the
    ``ppsweep`` key), a few KB: for committed test traces."""
    data = json.loads(Path(src).read_text())
    keep = []
    for ev in data.get("traceEvents", []):
        name = ev.get("name", "")
        if ev.get("ph") == "X" and isinstance(name, str) and _parse(name.removeprefix("PP:"), ev.get("cat")):
            keep.append({k: ev[k] for k in ("ph", "name", "cat", "pid", "tid", "ts", "dur") if k in ev})
    out = {"traceEvents": keep, "displayTimeUnit": data.get("displayTimeUnit", "ms")}
    for key in ("distributedInfo", "ppsweep"):
        if key in data:
            out[key] = data[key]
    keep += [{k: ev[k] for k in ("ph", "name", "pid", "tid", "ts", "dur")}
             for ev in data.get("traceEvents", []) if ev.get("name") == STEP_SPAN and ev.get("ph") == "X"]
    out["traceEvents"] = keep
    Path(dst).write_text(json.dumps(out, separators=(",", ":")))
    return Path(dst)
