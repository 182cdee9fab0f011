"""Plain, slow reference simulator of communication-aware execution (docs/contract.md §4).

This module re-implements the timing rules of docs/contract.md §4 and of the README section
"Timing rules chosen where the contract is silent" as a step-by-step simulation in plain Python,
one point at a time. It shares no simulation code with the vectorized engine
(``ppsweep/engine/core.py``) -- its own operation graph, its own event-by-event stepping, its own
message queues -- so that tests comparing the two check the table's walk, not one implementation
against itself. The communication rules themselves are read, as the scan reads them, from
:mod:`ppsweep.engine.comm`: a message's start and arrival (:func:`~ppsweep.engine.comm.send`), a
synchronisation's end (:func:`~ppsweep.engine.comm.synchronise`), the ring all-reduce's time, and
per mode its record (:class:`~ppsweep.engine.comm.Mode`: which resources a message holds, whether
it blocks its sender, whether shared resources take messages in the table's order), with times
that are :class:`_Event` s (:class:`_EventAlgebra`). No rule here names a mode.

How it runs:

1. Every operation of the table, with its worker and its place in that worker's order, is read
   off the table. For each operation, its consumers are the operations that list it among their
   :func:`ppsweep.tables.ops.dependencies`; each consumer on another worker gets one message.
2. Workers advance one operation at a time: a worker whose next operation has all its
   producers finished (and, in ``ports``, all its input messages sent) is stepped (start = max
   of the worker being free and every input's arrival), its operation ends after its compute
   time, and its messages are sent at once (their arrival is then known); in ``ports`` they
   wait in their sender's outbox until each is next at both its sender's egress and its
   receiver's ingress port. This repeats until every worker is done.
3. Gradient synchronisations of replicated stages are computed (in the order the idealized
   table makes them ready: the slot where their last backward ends, ties by stage), then
   the optimizer updates (when ``t_opt > 0``), then ``t_sim``.

With ``record=True`` the result also carries a :class:`StepRecord` of every operation's start
and end, every message's ready, send and arrival times, every synchronisation and update
(:mod:`ppsweep.viz.trace` draws it); recording changes no computed value.

Every time is an :class:`_Event` remembering the candidate that set it (the first within a
relative ``1e-12`` of the maximum, candidates taken in the README's priority order) and the
compute time between that candidate and itself. Walking back from the event that sets ``t_sim``
sums the compute time on the critical path; ``comm_time`` is ``t_sim`` minus that sum.

Choices made where the README leaves room:

- An operation whose output goes to several consumers on other workers sends their messages
  in increasing destination-worker order (consumers on one destination: in that worker's
  order). In ``blocking`` they go one after the other: the first leaves when the operation
  ends, each next one when the previous one arrives, and the worker is busy until the last
  one arrives. In ``overlap`` they all leave when the operation ends; in ``contention`` each
  queues on its own link. (With the dependencies of docs/contract.md §2 an operation never has more
  than one cross-worker consumer; an overlapped pair F&B has one per half, and sends both
  halves' messages by this rule when it ends.)
- A message in ``contention`` starts at the later of its producer's end (candidate 1, the data)
  and its link being free (candidate 2, the link).
- A message in ``ports`` starts at the latest of its producer's end (the data), its sender's
  egress being free and its receiver's ingress being free, in that order. An ingress port takes
  messages in the order the table sends them: by the slot their producer ends in the table, then
  the slot it starts, then the message's place among its operation's messages (a pair's two,
  in destination order: 0, then 1), then the sender worker (an egress port's messages all come
  from its own worker, in that worker's order). A synchronisation holds, hop by hop, the
  sender's egress and the receiver's ingress port of its ring.
- An operation's "own previous activity" candidate is the end of the worker's previous
  operation, or in ``blocking`` the arrival of that operation's last message; for the worker's
  first operation it is time 0.
- A synchronisation waits for each holder's last backward (B, or W) of the stage to *end*; in
  ``blocking`` it does not wait for that operation's outgoing message. A holder that runs no
  backward of the stage is ready at time 0.
- Ring links of a synchronisation (contention) are taken in ring order: holder ``k`` to holder
  ``k+1`` (holders in increasing worker order), then the last to the first.
- Two tiers (``worker_node``): a message between two workers on one node takes ``alpha_intra``
  and ``msg_bytes/beta_intra``, any other ``alpha`` and ``msg_bytes/beta``; a synchronisation whose
  holders are all on one node runs its ring on the intra tier, else on the tier between nodes.
- Optimizer updates exist only when ``t_opt > 0``. Each update starts at the later of its
  worker's finish (first candidate) and the end of every synchronisation of a stage the worker
  holds (in increasing stage order). ``t_sim``'s candidates are the workers (their update end,
  or their finish without updates) in increasing order, then the synchronisations in increasing
  stage order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ppsweep.engine import comm
from ppsweep.engine.comm import MODE_RULES, Mode, RingAllReduce
from ppsweep.tables.ops import Kind, Op, dependencies, frees_activation, halves, pair_time
from ppsweep.tables.table import ScheduleTable

#: Accepted values of ``mode`` (the communication modes of :mod:`ppsweep.engine.comm`).
MODES = comm.MODES

#: Candidates within this relative distance of a maximum tie with it.
TIE_RTOL = 1e-12


@dataclass(frozen=True)
class ReferenceResult:
    """Result of one reference simulation.

    Attributes:
      t_sim: step time, s.
      worker_finish: ``(p,)`` time each worker finishes its last operation (in ``blocking``: and
        its last send), before any optimizer update, s.
      comm_time: ``t_sim`` minus the compute time (operations and updates) on the critical
        path, s.
      compute_time: total compute time of all operations (no optimizer updates), s.
      record: the step's event record (:class:`StepRecord`) when asked for with ``record=True``,
        else None.
    """

    t_sim: float
    worker_finish: np.ndarray
    comm_time: float
    compute_time: float
    record: "StepRecord | None" = None


@dataclass(frozen=True)
class OpEvent:
    """One operation as simulated: its worker, start and end, s."""

    worker: int
    op: Op
    start: float
    end: float


@dataclass(frozen=True)
class MessageEvent:
    """One point-to-point message as simulated.

    Attributes:
      src, dst: sending and receiving worker.
      producer, consumer: the operation whose output it carries, and the one that needs it.
      ready: when the producer ended (the data exists), s.
      send: when the message left: ``ready`` in ``overlap``; in ``blocking`` the arrival of the
        worker's previous message of the same operation (or ``ready``); in ``contention`` when it
        got its link, s.
      arrive: when it arrived at ``dst``, s.
    """

    src: int
    dst: int
    producer: Op
    consumer: Op
    ready: float
    send: float
    arrive: float


@dataclass(frozen=True)
class SyncEvent:
    """Gradient synchronisation of a replicated stage: its holders (ring order), start and end, s."""

    stage: int
    holders: tuple[int, ...]
    start: float
    end: float


@dataclass(frozen=True)
class UpdateEvent:
    """One optimizer update: its worker, start and end, s."""

    worker: int
    start: float
    end: float


@dataclass(frozen=True)
class StepRecord:
    """Every timed event of one simulated step (``reference_simulate(..., record=True)``).

    Attributes:
      p: workers.
      mode: communication mode.
      ops: every operation, in the order the simulation ran them.
      messages: every point-to-point message, in the order they were sent.
      syncs: gradient synchronisations, in the order they were computed.
      updates: optimizer updates (empty without ``t_opt``).
      t_sim: step time, s (the same value as the result's ``t_sim``).
    """

    p: int
    mode: str
    ops: tuple[OpEvent, ...]
    messages: tuple[MessageEvent, ...]
    syncs: tuple[SyncEvent, ...]
    updates: tuple[UpdateEvent, ...]
    t_sim: float


class _Event:
    """A time, the event that set it, and the compute time spent between the two."""

    __slots__ = ("time", "pred", "compute", "label")

    def __init__(self, time: float, pred: _Event | None = None, compute: float = 0.0, label: str = ""):
        self.time = time
        self.pred = pred
        self.compute = compute
        self.label = label

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"_Event({self.label}, t={self.time})"


_ZERO = _Event(0.0, None, 0.0, "time 0")


def _latest(candidates: list[_Event], label: str) -> _Event:
    """An event at the latest of ``candidates``, its predecessor the first one that ties."""
    latest = max(c.time for c in candidates)
    tol = TIE_RTOL * abs(latest)
    for cand in candidates:
        if cand.time >= latest - tol:
            return _Event(latest, cand, 0.0, label)
    raise AssertionError("unreachable")  # pragma: no cover


def _after(event: _Event, delay: float, label: str, compute: float = 0.0) -> _Event:
    """An event ``delay`` after ``event``, of which ``compute`` is compute time."""
    return _Event(event.time + delay, event, compute, label)


class _EventAlgebra:
    """The reference's times for :mod:`ppsweep.engine.comm` (its ``Algebra``): events.

    ``join`` is an event at the latest of its candidates, set by the first that ties
    (:func:`_latest`; one candidate comes back unchanged), ``comm`` an event a communication
    duration after another. Every event it makes is labelled ``label`` (debugging aid). A
    message's or synchronisation's start is the ``pred`` of the events ``comm`` makes from it.
    """

    def __init__(self, label: str):
        self.label = label

    def join(self, *times: _Event) -> _Event:
        return times[0] if len(times) == 1 else _latest(list(times), f"{self.label} starts")

    def comm(self, time: _Event, duration: float) -> _Event:
        return _after(time, duration, self.label)


# --------------------------------------------------------------------------------------------
# input checks


def _scalar(name: str, value: Any, *, positive: bool = False, allow_inf: bool = False) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number, got {value!r}") from None
    if isinstance(value, bool) or math.isnan(x) or (math.isinf(x) and not (allow_inf and x > 0)):
        raise ValueError(f"{name}: must be a finite number{' or inf' if allow_inf else ''}, got {value!r}")
    if positive and x <= 0:
        raise ValueError(f"{name}: must be > 0, got {value!r}")
    if not positive and x < 0:
        raise ValueError(f"{name}: must be >= 0, got {value!r}")
    return x


def _per_stage(name: str, value: Any, n_stages: int) -> list[float]:
    arr = np.asarray(value, dtype=object)
    if arr.ndim == 0:
        return [_scalar(name, value)] * n_stages
    if arr.ndim != 1 or arr.shape[0] != n_stages:
        raise ValueError(
            f"{name}: must be a number or a sequence of length S={n_stages} (one per stage), "
            f"got shape {arr.shape}"
        )
    return [_scalar(f"{name}[{s}]", v) for s, v in enumerate(arr)]


# --------------------------------------------------------------------------------------------
# the simulation


def reference_simulate(
    table: ScheduleTable,
    t_f: float | Sequence[float],
    t_b: float | Sequence[float],
    alpha: float,
    beta: float,
    msg_bytes: float,
    mode: str = "overlap",
    *,
    t_i: float | Sequence[float] | None = None,
    t_w: float | Sequence[float] | None = None,
    grad_bytes: float | Sequence[float] | None = None,
    t_opt: float = 0.0,
    fb_overlap: float = 0.0,
    record: bool = False,
    op_durations: Mapping[Op, float] | None = None,
    message_times: Mapping[Op, tuple[float, float]] | None = None,
    alpha_intra: float | None = None,
    beta_intra: float | None = None,
    worker_node: Sequence[int] | None = None,
) -> ReferenceResult:
    """Simulate one step of ``table`` at one point, step by step (docs/contract.md §4, README rules).

    Args:
      table: a valid schedule table (any placement, replicas, stages per worker, split backward).
      t_f, t_b: forward and full-backward time per microbatch, s: a number (every stage) or a
        sequence of length ``S = table.n_stages``.
      alpha: message latency, s (>= 0).
      beta: network bandwidth, bytes/s (> 0; ``math.inf`` for infinite bandwidth).
      msg_bytes: bytes of one point-to-point message (>= 0).
      mode: ``"overlap"``, ``"blocking"``, ``"contention"`` or ``"ports"``.
      t_i, t_w: input- and weight-gradient times (split backward), s; default ``t_b / 2`` each.
      grad_bytes: gradient bytes of each stage, for the synchronisation of replicated stages
        (a number or a length-``S`` sequence); default 0.
      t_opt: optimizer update time per worker, s; 0 (default) means no update.
      fb_overlap: share of an overlapped pair's forward half hidden under its backward half
        (:func:`ppsweep.tables.ops.pair_time`); default 0.
      record: also return the step's event record (:class:`StepRecord`: per-operation start and
        end, per-message ready, send and arrival times, synchronisations, updates) in the
        result's ``record``; it changes no other field.
      op_durations: explicit compute time of operations, s (e.g. drawn with noise,
        :func:`ppsweep.engine.noise.reference_inputs`); an operation not in it takes its stage's time.
        An overlapped pair's time may be given as its own or by its halves (``F(micro, stage)``,
        ``B(micro2, stage2)``): it then lasts :func:`ppsweep.tables.ops.pair_time` of the halves' times.
      message_times: explicit ``(hold, total)`` of the messages an operation sends, s: ``hold``
        occupies the link (``contention``) or the ports (``ports``), default ``bytes/β``;
        ``total`` is the time from leaving to arrival, default ``α + bytes/β``. A pair's messages
        are keyed by the half whose output they carry.
      alpha_intra, beta_intra: latency and bandwidth between two workers of one node (default
        ``alpha``, ``beta``, which are those between nodes).
      worker_node: the node of each worker (default: each its own node, so every message crosses nodes).

    Returns:
      The :class:`ReferenceResult`.

    Raises:
      ValueError: naming the bad field (``mode``, ``alpha``, ``beta``, ``msg_bytes``, ``t_f``, …).
    """
    if mode not in MODES:
        raise ValueError(f"mode: must be one of {', '.join(MODES)}, got {mode!r}")
    point = _read_point(table, t_f, t_b, alpha, beta, msg_bytes, mode, t_i, t_w, grad_bytes, t_opt, fb_overlap,
                        op_durations, message_times, alpha_intra, beta_intra, worker_node)
    graph = _read_graph(table)
    run = _run_operations(table, graph, point)
    syncs = _synchronise(table, graph, point, run)
    final, updates = _finish_step(point, run, syncs)
    return ReferenceResult(
        t_sim=final.time,
        worker_finish=np.array([e.time for e in run.finish], dtype=float),
        comm_time=final.time - _compute_on_path(final),
        compute_time=run.compute_time,
        record=StepRecord(
            p=int(table.p),
            mode=mode,
            ops=tuple(run.op_events),
            messages=tuple(run.message_events),
            syncs=tuple(syncs.events),
            updates=tuple(updates),
            t_sim=final.time,
        )
        if record
        else None,
    )


def worker_spans(result: ReferenceResult) -> np.ndarray:
    """``(p,)`` span of each worker in one step: from its first operation's start to its step end.

    A worker's step end is its optimizer update's end where the step has updates, else the later
    of its finish (``result.worker_finish``) and the end of every gradient synchronisation of a
    stage it holds. Needs a result simulated with ``record=True``.

    Raises:
      ValueError: the result has no record.
    """
    record = result.record
    if record is None:
        raise ValueError("result: simulate with record=True to have each worker's first start")
    start = np.full(record.p, np.inf)
    for event in record.ops:
        start[event.worker] = min(start[event.worker], event.start)
    end = np.array(result.worker_finish, dtype=float)
    for sync in record.syncs:
        for w in sync.holders:
            end[w] = max(end[w], sync.end)
    for update in record.updates:
        end[update.worker] = update.end
    return end - start


def post_validated_step(result: ReferenceResult) -> float:
    """The step time when consecutive steps overlap: the longest worker span (:func:`worker_spans`).

    With the optimizer's global checks (gradient norm, NaN/Inf) post-validated (Qi et al., ICLR
    2024, section 4) no synchronisation ends a step on every worker at once: a worker starts the
    next step's first operation as soon as its own step ends, and a step repeats every longest
    span -- the zero-bubble paper's cost ("the largest execution time of all stages", its Table 5).
    It equals ``t_sim`` wherever the worker that ends last also starts first (1F1B, ZB-H1); a
    schedule whose workers start late and end late (ZB-H2's parallelogram) hides its fill under
    the previous step's drain (docs/contract.md §4, "Post-validated steps"; in ``contention`` and
    ``ports`` it does not count a link or port the previous step's last messages still hold).
    """
    return float(worker_spans(result).max())


@dataclass(frozen=True)
class _Point:
    """One point's checked costs."""

    mode: str
    rule: Mode  # the mode's record (comm.MODE_RULES)
    alpha: float
    beta: float
    wire: float  # link (or port) busy time of one message (0 where beta is inf)
    hockney: float  # message time
    t_opt: float
    durations: dict[Kind, list[float]]
    grad: list[float]
    fb_overlap: float = 0.0
    op_durations: dict[Op, float] = field(default_factory=dict)  # explicit compute times (override the per-stage ones)
    message_times: dict[Op, tuple[float, float]] = field(default_factory=dict)  # explicit (wire, message time) of an op's messages
    alpha_intra: float = 0.0  # the tier within a node: latency, bandwidth, wire and message time
    beta_intra: float = math.inf
    wire_intra: float = 0.0
    hockney_intra: float = 0.0
    nodes: tuple[int, ...] = ()  # the node of each worker

    def hop(self, src: int, dst: int) -> tuple[int, ...]:
        """The resources a message (or ring hop) from worker ``src`` to ``dst`` holds, in order
        (:meth:`ppsweep.engine.comm.Mode.hop_resources`; the directed link ``src -> dst`` is
        numbered ``src * p + dst``)."""
        p = len(self.nodes)
        return self.rule.hop_resources(p, src, dst, src * p + dst)

    def same_node(self, workers: Sequence[int]) -> bool:
        """Whether every one of ``workers`` is on one node (then they talk over the intra tier)."""
        return len({self.nodes[w] for w in workers}) == 1

    def duration(self, op: Op) -> float:
        """Compute time of ``op`` (an explicit one first); an overlapped pair without one:
        :func:`ppsweep.tables.ops.pair_time` of its halves' times (each explicit or its stage's)."""
        if op in self.op_durations:
            return self.op_durations[op]
        if op.kind == Kind.FB:
            forward, backward = halves(op)
            return pair_time(self.duration(forward), self.duration(backward), self.fb_overlap)
        return self.durations[op.kind][op.stage]

    def message(self, op: Op, src: int, dst: int) -> tuple[float, float]:
        """``(wire, message time)`` of the messages ``op`` sends from worker ``src`` to ``dst``."""
        if op in self.message_times:
            return self.message_times[op]
        return (self.wire_intra, self.hockney_intra) if self.same_node((src, dst)) else (self.wire, self.hockney)


def _read_point(table, t_f, t_b, alpha, beta, msg_bytes, mode, t_i, t_w, grad_bytes, t_opt, fb_overlap=0.0,
                op_durations=None, message_times=None, alpha_intra=None, beta_intra=None, worker_node=None) -> _Point:
    """Check and expand the costs of one point (errors name the field)."""
    n_stages = int(table.n_stages)
    alpha = _scalar("alpha", alpha)
    beta = _scalar("beta", beta, positive=True, allow_inf=True)
    alpha_intra = alpha if alpha_intra is None else _scalar("alpha_intra", alpha_intra)
    beta_intra = beta if beta_intra is None else _scalar("beta_intra", beta_intra, positive=True, allow_inf=True)
    nodes = tuple(range(int(table.p))) if worker_node is None else tuple(worker_node)
    if len(nodes) != int(table.p) or not all(isinstance(n, (int, np.integer)) and n >= 0 for n in nodes):
        raise ValueError(f"worker_node: must be {table.p} integers >= 0, got {worker_node!r}")
    msg_bytes = _scalar("msg_bytes", msg_bytes)
    t_opt = _scalar("t_opt", t_opt)
    fb_overlap = _scalar("fb_overlap", fb_overlap)
    if fb_overlap > 1:
        raise ValueError(f"fb_overlap: must be in [0, 1], got {fb_overlap!r}")
    t_f_s = _per_stage("t_f", t_f, n_stages)
    t_b_s = _per_stage("t_b", t_b, n_stages)
    t_i_s = _per_stage("t_i", t_i, n_stages) if t_i is not None else [x / 2 for x in t_b_s]
    t_w_s = _per_stage("t_w", t_w, n_stages) if t_w is not None else [x / 2 for x in t_b_s]
    grad_s = _per_stage("grad_bytes", 0.0 if grad_bytes is None else grad_bytes, n_stages)
    wire = msg_bytes / beta
    wire_intra = msg_bytes / beta_intra
    return _Point(
        mode=mode, rule=MODE_RULES[mode], alpha=alpha, beta=beta, wire=wire, hockney=alpha + wire, t_opt=t_opt,
        alpha_intra=alpha_intra, beta_intra=beta_intra, wire_intra=wire_intra, hockney_intra=alpha_intra + wire_intra,
        nodes=tuple(int(n) for n in nodes),
        durations={Kind.F: t_f_s, Kind.B: t_b_s, Kind.I: t_i_s, Kind.W: t_w_s}, grad=grad_s, fb_overlap=fb_overlap,
        op_durations={op: _scalar(f"op_durations[{op}]", v) for op, v in (op_durations or {}).items()},
        message_times={op: (_scalar(f"message_times[{op}]", h), _scalar(f"message_times[{op}]", t))
                       for op, (h, t) in (message_times or {}).items()},
    )


@dataclass(frozen=True)
class _Graph:
    """Who runs what, in which order, and which consumers each operation's messages go to."""

    orders: list[list[Op]]
    where: dict[Op, tuple[int, int]]  # op, and each half of a pair -> (worker, index in that worker's order)
    remote_consumers: dict[Op, list[Op]]  # producer (op or half) -> consumers, in (destination worker, index) order
    ingress_queue: dict[int, list[tuple[Op, Op]]]  # ports: messages into each worker, in table order


def _read_graph(table: ScheduleTable) -> _Graph:
    """Read every operation, its worker and place in that worker's order, and its remote consumers."""
    orders = table.orders()
    where: dict[Op, tuple[int, int]] = {}
    for w, row in enumerate(orders):
        for k, op in enumerate(row):
            for key in (op, *halves(op)):
                where[key] = (w, k)
    remote_consumers: dict[Op, list[Op]] = {op: [] for op in where}
    for w, row in enumerate(orders):
        for op in row:
            for dep in dependencies(op, table.n_stages, table.split_backward):
                if dep not in where:
                    raise ValueError(f"table: {op} needs {dep}, which the table never runs")
                if where[dep][0] != w:
                    remote_consumers[dep].append(op)
    for consumers in remote_consumers.values():
        consumers.sort(key=lambda c: where[c])
    # The order the table sends messages (README "Timing rules", ports): one operation's messages
    # (a pair's: both halves') leave in destination order, its k-th message being its k-th send;
    # sends are ordered by the slot their producer ends, then the slot it starts, then k, then the
    # sender.
    sends: list[tuple[int, int, int, int, Op, Op]] = []
    for item in table.placed_ops():
        sent = sorted(((h, c) for h in halves(item.op) for c in remote_consumers[h]), key=lambda hc: where[hc[1]])
        sends += [(item.end, item.start, k, item.worker, h, c) for k, (h, c) in enumerate(sent)]
    ingress_queue: dict[int, list[tuple[Op, Op]]] = {w: [] for w in range(table.p)}
    for *_, producer, consumer in sorted(sends, key=lambda s: s[:4]):
        ingress_queue[where[consumer][0]].append((producer, consumer))
    return _Graph(orders=orders, where=where, remote_consumers=remote_consumers, ingress_queue=ingress_queue)


@dataclass
class _Run:
    """State and outcome of running every operation."""

    end: dict[Op, _Event]  # op -> its end
    arrival: dict[tuple[Op, Op], _Event]  # (producer, consumer) -> message arrival
    resource_free: dict[int, _Event]  # resource (_Point.hop) -> free again
    ingress_next: dict[int, int]  # sends in table order: worker -> index of the next message its ingress takes
    outbox: dict[int, list[tuple[Op, Op, _Event]]]  # sends in table order: worker -> its messages not yet sent, in its order
    finish: list[_Event]
    compute_time: float
    op_events: list[OpEvent]
    message_events: list[MessageEvent]


def _run_operations(table: ScheduleTable, graph: _Graph, point: _Point) -> _Run:
    """Step the workers, one operation at a time, until every operation has run.

    A worker is stepped when its next operation's inputs have all arrived (where messages are sent
    in the table's order, :attr:`ppsweep.engine.comm.Mode.sends_in_table_order`, a message waits
    in its sender's outbox until it is the next its receiver's ingress port takes).
    """
    p = int(table.p)
    run = _Run(end={}, arrival={}, resource_free={}, ingress_next={w: 0 for w in range(p)},
               outbox={w: [] for w in range(p)}, finish=[_ZERO] * p, compute_time=0.0, op_events=[],
               message_events=[])
    orders = graph.orders
    cursor = [0] * p
    remaining = sum(len(row) for row in orders)
    while remaining:
        progressed = False
        for w in range(p):
            while cursor[w] < len(orders[w]) and _can_run(table, graph, point, run, orders[w][cursor[w]]):
                _run_operation(table, graph, point, run, w, orders[w][cursor[w]])
                cursor[w] += 1
                remaining -= 1
                progressed = True
        if point.rule.sends_in_table_order:
            progressed = _send_queued(graph, point, run) or progressed
        if not progressed:
            waiting = "; ".join(
                f"worker {w} waits at {orders[w][cursor[w]]}" for w in range(p) if cursor[w] < len(orders[w])
            )
            raise ValueError(f"table: its order deadlocks ({waiting})")
    return run


def _can_run(table: ScheduleTable, graph: _Graph, point: _Point, run: _Run, op: Op) -> bool:
    """Every producer of ``op`` has ended and every message ``op`` needs has been sent (a message
    waiting in an outbox has no arrival yet)."""
    deps = dependencies(op, table.n_stages, table.split_backward)
    if any(dep not in run.end for dep in deps):
        return False
    return all((dep, op) in run.arrival for dep in deps if graph.where[dep][0] != graph.where[op][0])


def _send_queued(graph: _Graph, point: _Point, run: _Run) -> bool:
    """Sends in table order (``ports``): send every message that is next both at its sender's
    egress (the first of the sender's unsent messages) and at its receiver's ingress (its queue's
    next); True if any was sent."""
    sent_any = False
    progressed = True
    while progressed:
        progressed = False
        for w, outbox in run.outbox.items():
            while outbox:
                producer, consumer, done = outbox[0]
                dst = graph.where[consumer][0]
                if graph.ingress_queue[dst][run.ingress_next[dst]] != (producer, consumer):
                    break
                outbox.pop(0)
                _send(graph, point, run, w, producer, consumer, done, done)
                run.ingress_next[dst] += 1
                progressed = sent_any = True
    return sent_any


def _outgoing(graph: _Graph, op: Op) -> list[tuple[Op, Op]]:
    """``(producer, consumer)`` of every message ``op`` sends (a pair: both halves'), in destination order."""
    return sorted(((h, c) for h in halves(op) for c in graph.remote_consumers[h]), key=lambda hc: graph.where[hc[1]])


def _run_operation(table: ScheduleTable, graph: _Graph, point: _Point, run: _Run, w: int, op: Op) -> None:
    """Run ``op`` on worker ``w``: it starts at the latest of the worker being free (first) and each
    input's arrival, runs its compute time, then sends its messages."""
    candidates = [run.finish[w]]
    for dep in dependencies(op, table.n_stages, table.split_backward):
        candidates.append(run.end[dep] if graph.where[dep][0] == w else run.arrival[(dep, op)])
    start = _latest(candidates, f"start {op}")
    duration = point.duration(op)
    run.compute_time += duration
    done = _after(start, duration, f"end {op}", compute=duration)
    for half in halves(op):  # a pair's two outputs exist when it ends
        run.end[half] = done
    run.op_events.append(OpEvent(w, op, start.time, done.time))
    busy_until = done
    for producer, consumer in _outgoing(graph, op):
        if point.rule.sends_in_table_order:  # sent in the table's order (_send_queued)
            run.outbox[w].append((producer, consumer, done))
        else:
            busy_until = _send(graph, point, run, w, producer, consumer, done, busy_until)
    run.finish[w] = busy_until


def _send(graph: _Graph, point: _Point, run: _Run, w: int, op: Op, consumer: Op, done: _Event, busy_until: _Event) -> _Event:
    """Send ``op``'s message to ``consumer`` (:func:`ppsweep.engine.comm.send`); returns when worker
    ``w`` is free.

    Its data is ready when ``op`` ended (``done``), or, where the mode blocks the sender, when
    the worker is free again (``busy_until``: its previous message arrived, so an operation's
    messages go one after the other); it leaves when it is ready and each resource it holds is
    free, which it then holds for its wire time.
    """
    dst = graph.where[consumer][0]
    wire, hockney = point.message(op, w, dst)
    held = point.hop(w, dst)
    ready = busy_until if point.rule.blocks_sender else done
    alg = _EventAlgebra(f"message {op} -> {consumer} (worker {w} -> {dst})")
    arrival, released = comm.send(alg, ready, [run.resource_free.get(r, _ZERO) for r in held], wire, hockney)
    for r in held:
        run.resource_free[r] = released
    sent = arrival.pred
    if point.rule.blocks_sender:
        busy_until = arrival
    run.arrival[(op, consumer)] = arrival
    run.message_events.append(MessageEvent(w, dst, op, consumer, done.time, sent.time, arrival.time))
    return busy_until


@dataclass(frozen=True)
class _Syncs:
    """Gradient synchronisations: their ends by stage, each stage's holders, their events."""

    end: dict[int, _Event]
    holders: dict[int, list[int]]
    events: list[SyncEvent]


def _synchronise(table: ScheduleTable, graph: _Graph, point: _Point, run: _Run) -> _Syncs:
    """Synchronise the gradients of every replicated stage (ring all-reduce over its holders), in the
    order the idealized table makes them ready (the slot their last backward ends, ties by stage)."""

    def backward_stages(op: Op) -> set[int]:  # stages whose backward (B, or W where split) ``op`` ends
        return {half.stage for half in halves(op) if frees_activation(half)}

    placement = np.asarray(table.placement)
    last_slot = {s: 0 for s in range(table.n_stages)}
    for item in table.placed_ops():
        for s_done in backward_stages(item.op):
            last_slot[s_done] = max(last_slot[s_done], item.end)
    syncs = _Syncs(end={}, holders={}, events=[])
    for s in sorted(range(table.n_stages), key=lambda s: (last_slot[s], s)):
        holders = sorted({int(w) for w in placement[:, s]})
        syncs.holders[s] = holders
        n = len(holders)
        if n < 2:
            continue
        ready = []
        for w in holders:
            mine = [op for op in graph.orders[w] if s in backward_stages(op)]
            ready.append(run.end[mine[-1]] if mine else _ZERO)
        ring = [(holders[k], holders[(k + 1) % n]) for k in range(n)]
        held = [r for src, dst in ring for r in point.hop(src, dst)]
        alpha, beta = (point.alpha_intra, point.beta_intra) if point.same_node(holders) else (point.alpha, point.beta)
        duration = float(RingAllReduce(n).time(alpha, point.grad[s], beta))
        alg = _EventAlgebra(f"sync stage {s}")
        end = syncs.end[s] = comm.synchronise(alg, ready, [run.resource_free.get(r, _ZERO) for r in held], duration)
        syncs.events.append(SyncEvent(s, tuple(holders), end.pred.time, end.time))
        for r in held:
            run.resource_free[r] = end
    return syncs


def _finish_step(point: _Point, run: _Run, syncs: _Syncs) -> tuple[_Event, list[UpdateEvent]]:
    """The optimizer updates (when ``t_opt > 0``), then the event that sets ``t_sim``
    (:func:`ppsweep.engine.comm.step_end`)."""
    updates: list[UpdateEvent] = []

    def update(w: int, start: _Event) -> _Event:
        if point.t_opt <= 0:
            return run.finish[w]
        end = _after(start, point.t_opt, f"update of worker {w} ends", compute=point.t_opt)
        updates.append(UpdateEvent(w, start.time, end.time))
        return end

    stages = sorted(syncs.end)
    final = comm.step_end(_EventAlgebra("step end"), run.finish, [syncs.end[s] for s in stages],
                          [syncs.holders[s] for s in stages], update)
    return final, updates


def _compute_on_path(final: _Event) -> float:
    """Compute time on the critical path: walk back from ``final`` summing each step's compute."""
    on_path = 0.0
    event: _Event | None = final
    while event is not None:
        on_path += event.compute
        event = event.pred
    return on_path
