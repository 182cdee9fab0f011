"""PyTorch's pipeline runtime, run for real on this machine and timed (issue 26, item 4).

One spawned process per rank (``torch.set_num_threads(1)``), a gloo process group on localhost,
and PyTorch's own schedule classes (``torch.distributed.pipelining``) running real messages. A
:class:`Workload` says what a stage computes:

- ``kind="sleep"`` (emulated compute): each stage's forward and backward hold the rank for a set
  time without using a CPU (an autograd function that sleeps). The backward has two parts on two
  autograd nodes -- the input-gradient part on the activation path, the weight-gradient part on a
  parameter's path -- so PyTorch's split backward (``stage_backward_input`` /
  ``stage_backward_weight``) sleeps ``t_i`` in I and ``t_w`` in W, and a full backward both.
  PyTorch's first stage has no input gradient: its I does nothing and its W runs the whole
  backward (``PipelineStage.backward_weight_one_chunk``), and so it does here.
- ``kind="mlp"`` (real compute): each stage is ``layers`` Linear+tanh layers of width ``hidden``.

Workload times and layers are given per *physical* stage (``p`` of them, 1F1B's stages); a schedule
with ``v`` stages per rank splits each physical stage into ``v`` consecutive chunks of time/v
(layers/v), the profiled-costs stage-count rule (PROFILE_SCHEMA.md). Each stage's compute is
wrapped in ``record_function`` spans named by PyTorch's action strings (``0F3``, ``1I2``, ``2W0``,
``0B1``): PyTorch's ``_PipelineScheduleRuntime`` names its own spans ``PP:0F3`` but they include
the wait for the input message, and its single-stage schedules (GPipe, 1F1B) name none, so the
trace calibrates from these compute-only spans.

A step's time is the last rank's end minus the first rank's start (monotonic clock, shared by the
processes), each step after a barrier and traced as a ``ppsweep:step`` span; ``warmup`` steps are
discarded. Traced configurations run first, one by one; the others round-robin, step by step.
torch is imported inside the functions only.
"""

from __future__ import annotations

import json
import math
import os
import queue as queue_module
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: Name of the span around one ``schedule.step`` call (what a measured step times).
STEP_SPAN = "ppsweep:step"

#: ppsweep schedule -> (PyTorch class, stages per rank, placement style, ppsweep options).
TORCH_SCHEDULES: dict[str, tuple[str, int, str, dict[str, Any]]] = {
    "gpipe": ("ScheduleGPipe", 1, "loop", {}),
    "1f1b": ("Schedule1F1B", 1, "loop", {}),
    "interleaved_1f1b": ("ScheduleInterleaved1F1B", 2, "loop", {"v": 2}),
    "looped_bfs": ("ScheduleLoopedBFS", 2, "loop", {"v": 2}),
    "interleaved_zb": ("ScheduleInterleavedZeroBubble", 2, "loop", {"v": 2}),
    "zbv": ("ScheduleZBVZeroBubble", 2, "v", {}),
    "dualpipev": ("ScheduleDualPipeV", 2, "v", {}),
}


@dataclass(frozen=True)
class Workload:
    """What each physical stage computes per microbatch.

    Attributes:
      kind: ``"sleep"`` (emulated: ``t_f``, ``t_i``, ``t_w`` seconds per physical stage) or
        ``"mlp"`` (real: ``layers`` per physical stage, each Linear(hidden, hidden)+tanh).
      t_f, t_i, t_w: per physical stage, seconds (sleep only).
      layers: per physical stage (mlp only); divisible by the schedule's stages per rank.
      hidden: width of the activations (both kinds; the message is ``rows x hidden`` float32).
      rows: rows of one microbatch.
    """

    kind: str = "sleep"
    t_f: tuple[float, ...] = ()
    t_i: tuple[float, ...] = ()
    t_w: tuple[float, ...] = ()
    layers: tuple[int, ...] = ()
    hidden: int = 256
    rows: int = 8

    @property
    def msg_bytes(self) -> int:
        """Bytes of one activation (or gradient) message."""
        return 4 * self.rows * self.hidden

    def check(self, p: int) -> None:
        """Raise ValueError naming the first bad field for ``p`` ranks."""
        if self.kind not in ("sleep", "mlp"):
            raise ValueError(f"kind: must be 'sleep' or 'mlp', got {self.kind!r}")
        fields = ("t_f", "t_i", "t_w") if self.kind == "sleep" else ("layers",)
        for name in fields:
            value = getattr(self, name)
            if len(value) != p or any(not (math.isfinite(x) and x >= 0) for x in value):
                raise ValueError(f"{name}: needs {p} finite values >= 0 (one per physical stage), got {value!r}")
        if self.hidden < 1 or self.rows < 1:
            raise ValueError(f"hidden, rows: must be >= 1, got {self.hidden}, {self.rows}")


@dataclass(frozen=True)
class RunConfig:
    """One measured configuration: a schedule (ppsweep name, or a PyTorch CSV file) at ``m``.

    ``trace_dir``: where each rank writes its profiler trace (``rank<r>.json``) of the measured
    steps; None: no profiler.
    """

    schedule: str
    m: int
    steps: int = 5
    warmup: int = 2
    trace_dir: str | None = None
    csv_path: str | None = None


@dataclass
class Measurement:
    """Step times of one configuration (seconds), or why PyTorch refused it."""

    schedule: str
    p: int
    m: int
    times: list[float] = field(default_factory=list)
    refused: str | None = None
    trace_dir: str | None = None

    @property
    def median(self) -> float:
        """Median step time, s."""
        return statistics.median(self.times) if self.times else math.nan

    @property
    def spread(self) -> float:
        """Relative spread of the step times: (max - min) / median over the kept steps."""
        return (max(self.times) - min(self.times)) / self.median if len(self.times) > 1 else math.nan


# --------------------------------------------------------------------------------------------
# placement


def stage_ranks(p: int, v: int, style: str) -> dict[int, int]:
    """Stage -> rank: ``loop`` (stage s on rank s % p) or ``v`` (0..p-1 down, p..2p-1 back up)."""
    if style == "loop":
        return {s: s % p for s in range(p * v)}
    return {s: (s if s < p else 2 * p - 1 - s) for s in range(2 * p)}


def csv_stage_ranks(csv_path: str | os.PathLike) -> dict[int, int]:
    """Stage -> rank of a PyTorch pipeline CSV file (compute actions only)."""
    from ppsweep.tables.interchange import read_csv_order

    order = read_csv_order(csv_path)
    ranks: dict[int, int] = {}
    for w, ops in enumerate(order.orders):
        for op in ops:
            for stage in {op.stage, getattr(op, "stage2", op.stage)}:
                if stage >= 0:
                    ranks.setdefault(stage, w)
    return ranks


def chunk_workload(work: Workload, v: int) -> Workload:
    """The workload of ``v * p`` chunks: each physical stage split into ``v`` consecutive chunks of time/v."""
    if v == 1:
        return work
    if work.kind == "sleep":
        split = lambda xs: tuple(x / v for x in xs for _ in range(v))
        return replace(work, t_f=split(work.t_f), t_i=split(work.t_i), t_w=split(work.t_w))
    if any(n % v for n in work.layers):
        raise ValueError(f"layers: each must be divisible by {v} (stages per rank), got {work.layers}")
    return replace(work, layers=tuple(n // v for n in work.layers for _ in range(v)))


# --------------------------------------------------------------------------------------------
# the worker (one per rank, spawned)


def _modules(work: Workload, n_stages: int):
    """torch modules of the ``n_stages`` chunks (built in the worker)."""
    import torch

    class _SleepInput(torch.autograd.Function):
        """Forward sleeps t_f; backward (the input-gradient part) sleeps t_i."""

        @staticmethod
        def forward(ctx, x, anchor, t_f, t_i):
            ctx.t_i = t_i
            time.sleep(t_f)
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            time.sleep(ctx.t_i)
            return grad, torch.zeros(1), None, None

    class _SleepWeight(torch.autograd.Function):
        """Identity on a parameter; its backward (the weight-gradient part) sleeps t_w."""

        @staticmethod
        def forward(ctx, w, t_w):
            ctx.t_w = t_w
            return w.clone()

        @staticmethod
        def backward(ctx, grad):
            time.sleep(ctx.t_w)
            return grad, None

    class SleepStage(torch.nn.Module):
        def __init__(self, t_f: float, t_i: float, t_w: float, first: bool):
            super().__init__()
            self.t = (t_f, t_i, t_w)
            self.scale = torch.nn.Parameter(torch.ones(1))
            # The first stage's input needs no gradient: a parameter on its path keeps t_i in its backward.
            self.anchor = torch.nn.Parameter(torch.zeros(1)) if first else None

        def forward(self, x):
            t_f, t_i, t_w = self.t
            anchor = self.anchor if self.anchor is not None else torch.zeros(1)
            h = _SleepInput.apply(x, anchor, t_f, t_i)
            return h * _SleepWeight.apply(self.scale, t_w)

    if work.kind == "sleep":
        return [SleepStage(work.t_f[s], work.t_i[s], work.t_w[s], s == 0) for s in range(n_stages)]
    torch.manual_seed(0)
    mods = []
    for s in range(n_stages):
        layers = []
        for _ in range(work.layers[s]):
            layers += [torch.nn.Linear(work.hidden, work.hidden), torch.nn.Tanh()]
        mods.append(torch.nn.Sequential(*layers))
    return mods


def _traced_stage_class():
    """``PipelineStage`` whose compute calls are ``record_function`` spans named by PyTorch's action strings."""
    from torch.distributed.pipelining import PipelineStage
    from torch.profiler import record_function

    class TracedStage(PipelineStage):
        def forward_one_chunk(self, fwd_chunk_id, *args, **kwargs):
            with record_function(f"{self.stage_index}F{fwd_chunk_id}"):
                return super().forward_one_chunk(fwd_chunk_id, *args, **kwargs)

        def backward_one_chunk(self, bwd_chunk_id, loss=None, full_backward=True, last_backward=False):
            with record_function(f"{self.stage_index}{'B' if full_backward else 'I'}{bwd_chunk_id}"):
                return super().backward_one_chunk(bwd_chunk_id, loss=loss, full_backward=full_backward,
                                                  last_backward=last_backward)

        def backward_weight_one_chunk(self, bwd_chunk_id, last_backward=False):
            with record_function(f"{self.stage_index}W{bwd_chunk_id}"):
                return super().backward_weight_one_chunk(bwd_chunk_id, last_backward=last_backward)

    return TracedStage


def _build(config: RunConfig, work: Workload, rank: int, p: int):
    """This rank's schedule object and the stages it holds, for one configuration."""
    import torch
    from torch.distributed.pipelining import schedules as S

    if config.csv_path is not None:
        ranks = csv_stage_ranks(config.csv_path)
        v = len(ranks) // p
    else:
        cls_name, v, style, _ = TORCH_SCHEDULES[config.schedule]
        ranks = stage_ranks(p, v, style)
    n_stages = len(ranks)
    chunks = chunk_workload(work, v)
    mods = _modules(chunks, n_stages)
    Stage = _traced_stage_class()
    example = torch.zeros(work.rows, work.hidden)
    grad_example = example.clone().requires_grad_()  # outputs (and inputs after the first stage) carry gradients
    mine = sorted(s for s, r in ranks.items() if r == rank)
    stages = [Stage(mods[s], s, n_stages, torch.device("cpu"), input_args=example if s == 0 else grad_example,
                    output_args=grad_example) for s in mine]
    loss_fn = lambda out, target: (out * target).mean()
    if config.csv_path is not None:
        schedule = S._PipelineScheduleRuntime(stages, config.m, loss_fn=loss_fn, scale_grads=False)
        schedule._load_csv(str(config.csv_path))
    else:
        cls = getattr(S, cls_name)
        schedule = cls(stages[0] if v == 1 else stages, config.m, loss_fn=loss_fn, scale_grads=False)
    return schedule, mine, n_stages


def _worker(rank: int, p: int, port: int, work: Workload, configs: list[RunConfig], queue) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=p)
    try:
        results = _run_configs(rank, p, work, configs)
        if rank == 0:
            for result in results:
                queue.put(result)
    except BaseException:
        import traceback

        queue.put(("error", rank, traceback.format_exc()[-3000:]))
        raise
    finally:
        dist.destroy_process_group()


def _stepper(rank: int, p: int, work: Workload, config: RunConfig):
    """A function running one timed step of ``config`` on this rank, or PyTorch's refusal (text)."""
    import torch
    import torch.distributed as dist
    from torch.profiler import record_function

    try:
        schedule, mine, n_stages = _build(config, work, rank, p)
        refused = None
    except (ValueError, AssertionError, RuntimeError) as error:
        refused = f"{type(error).__name__}: {str(error).splitlines()[0]}"
    flags = [None] * p
    dist.all_gather_object(flags, refused)
    if any(flags):
        return next(f for f in flags if f)
    batch = torch.randn(config.m * work.rows, work.hidden, generator=torch.Generator().manual_seed(1))
    args = (batch,) if 0 in mine else ()
    kwargs: dict[str, Any] = {"target": batch, "losses": []} if n_stages - 1 in mine else {}

    def one_step() -> tuple[float, float]:
        dist.barrier()
        t0 = time.perf_counter()
        with record_function(STEP_SPAN):
            schedule.step(*args, **kwargs)
        return t0, time.perf_counter()

    return one_step


def _run_configs(rank: int, p: int, work: Workload, configs: list[RunConfig]) -> list[Measurement]:
    """Traced configurations one by one (warm-up, then the profiled steps); the others round-robin
    (all warmed up, then step k of each in turn), so a change in the machine's load falls on all alike."""
    import torch.distributed as dist

    steppers = [_stepper(rank, p, work, c) for c in configs]
    spans: list[list[tuple[float, float]]] = [[] for _ in configs]
    for i, (config, step) in enumerate(zip(configs, steppers)):
        if callable(step) and config.trace_dir is not None:
            from torch.profiler import ProfilerActivity, profile

            for _ in range(config.warmup):
                step()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(config.steps):
                    spans[i].append(step())
                    prof.step()
            Path(config.trace_dir).mkdir(parents=True, exist_ok=True)
            path = Path(config.trace_dir) / f"rank{rank}.json"
            prof.export_chrome_trace(str(path))
            _annotate_trace(path, {"rank": rank, "p": p, "m": config.m, "schedule": config.schedule,
                                   "msg_bytes": work.msg_bytes, "workload": work.kind})
    plain = [i for i, (c, s) in enumerate(zip(configs, steppers)) if callable(s) and c.trace_dir is None]
    for i in plain:
        for _ in range(configs[i].warmup):
            steppers[i]()
    for k in range(max((configs[i].steps for i in plain), default=0)):
        for i in plain:
            if k < configs[i].steps:
                spans[i].append(steppers[i]())
    everyone = [None] * p
    dist.all_gather_object(everyone, spans)
    results = []
    for i, config in enumerate(configs):
        result = Measurement(config.schedule, p, config.m, trace_dir=config.trace_dir)
        if not callable(steppers[i]):
            result.refused = steppers[i]
        else:
            result.times = [max(r[i][k][1] for r in everyone) - min(r[i][k][0] for r in everyone)
                            for k in range(config.steps)]
        results.append(result)
    return results


def _annotate_trace(path: Path, info: dict[str, Any]) -> None:
    """Add ppsweep's run information to a profiler trace (key ``ppsweep``; viewers ignore it)."""
    data = json.loads(path.read_text())
    data["ppsweep"] = info
    path.write_text(json.dumps(data))


# --------------------------------------------------------------------------------------------
# the parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pipeline(p: int, work: Workload, configs: Sequence[RunConfig], timeout: float = 600.0) -> list[Measurement]:
    """Run ``configs`` on ``p`` spawned ranks (one process group for all): the traced ones first,
    one after another, then the others round-robin, step by step.

    Args:
      p: ranks (>= 2).
      work: what each physical stage computes (:class:`Workload`).
      configs: the configurations, in order.
      timeout: seconds for all of them; the processes are ended after it.

    Returns:
      One :class:`Measurement` per configuration (``refused`` set where PyTorch's constructor refused it).

    Raises:
      ValueError: bad input (before any process starts); RuntimeError: a rank failed or timed out.
    """
    import multiprocessing as mp

    if p < 2:
        raise ValueError(f"p: must be >= 2, got {p}")
    work.check(p)
    for config in configs:
        if config.csv_path is None and config.schedule not in TORCH_SCHEDULES:
            raise ValueError(f"schedule: {config.schedule!r} is not one of {', '.join(TORCH_SCHEDULES)} (or give csv_path)")
        if config.steps < 1 or config.warmup < 0 or config.m < 1:
            raise ValueError(f"steps/warmup/m: need steps >= 1, warmup >= 0, m >= 1, got {config}")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, p, port, work, list(configs), queue), daemon=True) for r in range(p)]
    for proc in procs:
        proc.start()
    results: list[Measurement] = []
    deadline = time.monotonic() + timeout
    try:
        while len(results) < len(configs):
            try:
                item = queue.get(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            except queue_module.Empty:
                if time.monotonic() > deadline or not any(proc.is_alive() for proc in procs):
                    raise RuntimeError(f"pipeline p={p}: ranks stopped or timed out after {len(results)} of {len(configs)} configurations") from None
                continue
            if isinstance(item, tuple) and item[0] == "error":
                raise RuntimeError(f"pipeline p={p}: rank {item[1]} failed: {item[2]}")
            results.append(item)
        for proc in procs:
            proc.join(timeout=30)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
    return results


def measure_csv_schedule(
    csv_path: str | os.PathLike,
    p: int,
    m: int,
    stage_times: Workload,
    *,
    steps: int = 5,
    warmup: int = 2,
    trace_dir: str | None = None,
) -> Measurement:
    """Run a schedule given as a PyTorch pipeline CSV (compute actions, e.g. written by
    :func:`ppsweep.tables.interchange.write_csv`) through PyTorch's ``_PipelineScheduleRuntime``
    (its ``_load_csv``, the path torchtitan uses) and time it.

    Args:
      csv_path: the CSV file (one row per rank).
      p: ranks (rows of the file).
      m: microbatches (the file's).
      stage_times: the :class:`Workload` per physical stage; a file with ``v`` stages per rank
        splits each into ``v`` chunks of time/v.
      steps, warmup: measured and discarded steps.
      trace_dir: where to write profiler traces (``rank<r>.json``), or None.

    Returns:
      The :class:`Measurement` (``refused`` set where PyTorch rejects the file).
    """
    ranks = csv_stage_ranks(csv_path)
    if sorted(set(ranks.values())) != list(range(p)):
        raise ValueError(f"p: the file's stages sit on ranks {sorted(set(ranks.values()))}, not 0..{p - 1}")
    config = RunConfig(str(csv_path), m, steps=steps, warmup=warmup, trace_dir=trace_dir, csv_path=str(csv_path))
    return run_pipeline(p, stage_times, [config])[0]
