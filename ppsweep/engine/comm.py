"""The communication rules of the engine, written once (docs/contract.md §4, README "Timing rules").

The evaluation methods of the engine -- the max-plus scan (:mod:`ppsweep.engine.core`), the
envelope builder (:mod:`ppsweep.engine.envelope`) and the reference simulator
(:mod:`ppsweep.engine.reference`) -- call the functions here. They differ only in what a
"time" is: the scan's time is a pair (time, compute time of the path that set it), the envelope's
a set of path vectors, the reference's an event that remembers the event that set it. Each supplies a small :class:`Algebra` (``join`` = the later of several
times, ``compute``/``comm`` = a time plus a duration that is, or is not, compute), and the rules
are written against it.

The rules, for every mode:

- a message's **time on the wire** is ``bytes/β`` (0 where ``β = ∞``), its **message time**
  ``α + bytes/β`` (:func:`wire_time`, :func:`message_time`), with the ``α`` and ``β`` of its tier
  (within a node or between nodes, :mod:`ppsweep.engine.tiers`);
- a replicated stage's gradient synchronisation is a **ring all-reduce** over its ``n`` holders:
  ``2(n-1)`` steps of ``α + (bytes/n)/β`` (:class:`RingAllReduce`), within a node where every holder
  is on one node, else between nodes;
- a message **holds resources** while it is on the wire: none (``overlap``, ``blocking``), its
  directed link (``contention``), its sender's egress and its receiver's ingress port (``ports``).
  It starts at the latest of its data being ready and each of its resources being free (in that
  order: the data first), holds them for its wire time, and arrives its message time after it
  started (:func:`send`); where several workers send through one resource (a receiver's ingress
  port) they take it in the order the table sends them (:attr:`Mode.sends_in_table_order`, :func:`route`);
- in ``blocking`` the **sender** is busy until its message arrives (:attr:`Mode.blocks_sender`);
- a **synchronisation** starts when each holder is ready and every resource of its ring hops
  (holder ``k`` to holder ``k+1``) is free, and holds them all until it ends (:func:`synchronise`);
- a worker's **optimizer update** starts when it has finished and every synchronisation of a stage
  it holds has ended; the **step** ends when every worker and every synchronisation has (:func:`step_end`).

Resources are numbered per mode (:meth:`Mode.n_resources`, :meth:`Mode.hop_resources`): links
``0 … n_links-1`` in ``contention``; egress ports ``0 … p-1`` and ingress ports ``p … 2p-1`` in
``ports``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np


#: Candidates within this relative distance of a maximum tie (README, "Critical path").
TIE_TOLERANCE = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-6}


def wire_time(n_bytes: Any, beta: Any) -> np.ndarray:
    """Seconds ``n_bytes`` occupy a link of ``beta`` bytes/s: ``bytes/β``, 0 where ``β = ∞``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isinf(beta), 0.0, n_bytes / beta)


def message_time(alpha: Any, wire: Any) -> Any:
    """Hockney message time ``α + bytes/β`` from the latency and the wire time (numbers, arrays or vectors)."""
    return alpha + wire


@dataclass(frozen=True)
class RingAllReduce:
    """Ring all-reduce over ``n`` holders: ``steps = 2(n-1)`` messages of ``bytes/n`` each (docs/contract.md §3)."""

    n: int

    @property
    def steps(self) -> int:
        """Messages one after the other."""
        return 2 * (self.n - 1)

    def time(self, alpha: Any, n_bytes: Any, beta: Any) -> Any:
        """Seconds to all-reduce ``n_bytes``: ``2(n-1)(α + (bytes/n)/β)``."""
        return self.steps * message_time(alpha, wire_time(n_bytes / self.n, beta))

    @property
    def alpha_coefficient(self) -> float:
        """The time's coefficient on ``α`` (it is linear in ``α`` and ``bytes/β``)."""
        return float(self.steps)

    @property
    def wire_coefficient(self) -> float:
        """The time's coefficient on ``bytes/β``."""
        return self.steps / self.n


class Algebra(Protocol):
    """What a time is, for :func:`send` and :func:`synchronise`."""

    def join(self, *times: Any) -> Any:
        """The latest of ``times`` (the first argument alone comes back unchanged)."""

    def comm(self, time: Any, duration: Any) -> Any:
        """``time`` plus a communication duration."""


@dataclass(frozen=True)
class Mode:
    """One communication mode: which resources a message holds, and whether it blocks its sender.

    Attributes:
      name: the mode's name (``comm.mode``).
      blocks_sender: the sending worker is busy until its message arrives.
      resource: ``None`` (messages hold nothing), ``"link"`` (their directed link) or ``"port"``
        (their sender's egress and receiver's ingress port).
    """

    name: str
    blocks_sender: bool = False
    resource: str | None = None

    @property
    def sends_in_table_order(self) -> bool:
        """Several workers' messages share a resource (a receiver's ingress port): they take it in
        the order the table sends them (README "Timing rules", ``ports``), not as they come."""
        return self.resource == "port"

    def n_resources(self, p: int, n_links: int) -> int:
        """Resources of a table with ``p`` workers and ``n_links`` directed links."""
        return {None: 0, "link": n_links, "port": 2 * p}[self.resource]

    def hop_resources(self, p: int, src: int, dst: int, link: int) -> tuple[int, ...]:
        """Resources a message (or ring hop) from ``src`` to ``dst`` over directed link ``link`` holds, in order."""
        if self.resource == "link":
            return (link,)
        if self.resource == "port":
            return (src, p + dst)
        return ()


#: Every communication mode, by name (the order of :data:`MODES`).
MODE_RULES: dict[str, Mode] = {
    "overlap": Mode("overlap"),
    "blocking": Mode("blocking", blocks_sender=True),
    "contention": Mode("contention", resource="link"),
    "ports": Mode("ports", resource="port"),
}

#: Accepted values of ``comm.mode``.
MODES = tuple(MODE_RULES)


def check_mode(mode: str) -> str:
    """``mode`` if it is a known communication mode, else a ValueError naming the accepted ones."""
    if mode not in MODES:
        raise ValueError(f"comm.mode: unknown mode {mode!r}; accepted: {', '.join(MODES)}")
    return mode


def send(alg: Algebra, ready: Any, held: Sequence[Any], wire: Any, msg: Any) -> tuple[Any, Any]:
    """One message: ``(arrival, resources free again)``.

    Args:
      alg: the time algebra.
      ready: when its data exists (its producer's end).
      held: when each resource it holds is free (mode order).
      wire: its wire time; msg: its message time.

    Returns:
      Its arrival, and when its resources are free again (meaningless where it holds none).
    """
    start = alg.join(ready, *held)
    return alg.comm(start, msg), alg.comm(start, wire)


def synchronise(alg: Algebra, ready: Sequence[Any], held: Sequence[Any], duration: Any) -> Any:
    """One gradient synchronisation: its end (which is also when the resources it held are free).

    Args:
      alg: the time algebra.
      ready: when each holder is ready (its last backward ended), in increasing worker order.
      held: when each resource of its ring hops is free (ring order, mode order within a hop).
      duration: its all-reduce time.
    """
    return alg.comm(alg.join(*ready, *held), duration)


def step_end(alg: Algebra, finish: Sequence[Any], sync_end: Sequence[Any], sync_holders: Sequence[Sequence[int]],
             update: Callable[[int, Any], Any]) -> Any:
    """The end of the step, after the last operation and every synchronisation (docs/contract.md §4).

    Each worker's optimizer update starts at the latest of its finish (first) and the end of every
    synchronisation of a stage it holds (in stage order); the step ends at the latest of every
    worker's end (in worker order), then every synchronisation's end.

    Args:
      alg: the time algebra.
      finish: when each worker finished its last operation (in ``blocking``: and its last send).
      sync_end: when each synchronisation ended, in increasing stage order.
      sync_holders: each synchronisation's holders.
      update: ``update(worker, start)``: the worker's end, its update started at ``start`` (where
        the step has no updates: its finish).
    """
    held: list[list[Any]] = [[] for _ in finish]  # the ends of the synchronisations each worker holds, in stage order
    for end, holders in zip(sync_end, sync_holders):
        for w in set(holders).intersection(range(len(finish))):  # each worker's list is its own: any order
            held[w].append(end)
    return alg.join(*(update(w, alg.join(finish[w], *held[w])) for w in range(len(finish))), *sync_end)


@dataclass(frozen=True)
class Routing:
    """The resources a compiled table's messages and synchronisations hold in one mode.

    Attributes:
      mode: the :class:`Mode`.
      n_resources: resources of the table.
      lane_resources: ``(n_waves, p, k)`` resources of each lane's message (``-1``: it sends
        none), ``k`` resources per message (0 where messages hold nothing).
      rounds: ``(n_waves, p)``: messages of one wave that share a resource (several senders, one
        receiver's ingress port) take it one after the other in the table's send order
        (:func:`route`); a lane's message goes in round ``rounds[t, w]`` (0 where it shares nothing).
      sync_resources: per synchronisation, the resources of its ring hops (ring order).
    """

    mode: Mode
    n_resources: int
    lane_resources: np.ndarray
    rounds: np.ndarray
    sync_resources: tuple[tuple[int, ...], ...]

    @functools.cached_property
    def n_rounds(self) -> int:
        """Rounds of the busiest wave (at least 1)."""
        return int(self.rounds.max(initial=0)) + 1


def route(program: "Any", mode: str, table: "Any" = None) -> Routing:
    """The :class:`Routing` of a compiled table (:class:`ppsweep.engine.program.Program`) in ``mode``, in array code.

    Messages that share a resource take it in the order the table sends them (README "Timing
    rules", ``ports``): by the slot their producer ends, then the slot it starts, then the
    message's place among its operation's messages (a pair F&B sends its two in destination
    order), then the sender. The scan walks waves in (start slot, sub-wave) order, a pair's
    second message one sub-wave after its first, and within a wave the rounds follow (end slot,
    sender): this is the table's order wherever no message is sent to a shared port before one
    whose producer started earlier (true with the default slots; a pair ends after every other
    operation that starts with it, as it lasts ``f_slots + b_slots``).

    Args:
      program: the compiled table.
      mode: a communication mode.
      table: unused (the program carries each lane's end slot, ``program.lane_end``); kept for callers.

    Raises:
      NotImplementedError: where the scan's wave order cannot follow the table's send order (a
        later-starting producer ends strictly before an earlier one and both send through one port).
    """
    rule = MODE_RULES[mode]
    p, links = program.p, program.links
    n_res = rule.n_resources(p, program.n_links)
    k = len(rule.hop_resources(p, 0, 0, 0)) if program.n_links else 0
    per_link = np.array([rule.hop_resources(p, int(src), int(dst), i) for i, (src, dst) in enumerate(links)],
                        dtype=np.int64).reshape(program.n_links, k)
    lanes = np.full(program.link.shape + (k,), -1, dtype=np.int64)
    rounds = np.zeros(program.link.shape, dtype=np.int64)
    if k:  # messages hold resources (a mode whose messages hold none has nothing more to route)
        sending = np.flatnonzero(program.link != program.trash_link)  # lanes wave·p + worker that send
        hops = np.take(per_link, program.link.reshape(-1)[sending], axis=0)  # each sending lane's resources
        for j in range(k):  # a column at a time (whole rows by a list of lanes are several times slower)
            lanes.reshape(program.link.size, k)[:, j][sending] = hops[:, j]
        if rule.sends_in_table_order and sending.size:
            rounds.reshape(-1)[sending] = _port_rounds(program, sending, hops)
    sync = tuple(
        tuple(i for link in row if link >= 0 for i in per_link[int(link)].tolist()) for row in program.sync_ring_links
    )
    return Routing(mode=rule, n_resources=n_res, lane_resources=lanes, rounds=rounds, sync_resources=sync)


def scan_lanes(program: "Any", routing: Routing) -> np.ndarray:
    """The program's active lanes (``wave · p + worker``) in the order the scan and the envelope's
    walk take them: by wave, then round (:attr:`Routing.rounds`), then worker."""
    lane = np.flatnonzero(program.active)  # by wave, then worker
    n_rounds = routing.n_rounds
    if n_rounds > 1:  # a stable sort by (wave, round) keeps each round's workers in order
        lane = lane[np.argsort(lane // program.p * n_rounds + routing.rounds.reshape(-1)[lane], kind="stable")]
    return lane


def _port_rounds(program: "Any", sending: np.ndarray, ports: np.ndarray) -> np.ndarray:
    """``ports``: the round of every sending lane ``sending`` (``wave·p + worker``, ascending), whose
    ``(egress, ingress)`` ports are ``ports``, after checking that
    every port takes its messages in non-decreasing end slot in the scan's order.

    Within a wave every sender is another worker, so only ingress ports are shared: a lane's
    round is the number of lanes of its wave before it, in (end slot, sender) order, that send to
    the same receiver. The walk over the messages is compiled (:func:`ppsweep.engine.port_rounds.port_rounds`).
    """
    from ppsweep.engine.port_rounds import port_rounds

    wave, worker = np.divmod(sending, program.p)
    end = program.lane_end.reshape(-1)[sending].astype(np.int64, copy=False)
    egress, ingress = ports[:, 0], ports[:, 1]
    rounds, bad, before = port_rounds(wave, end, egress, ingress)
    if bad >= 0:
        raise NotImplementedError(
            f"mode ports: worker {worker[bad]} sends at slot {end[bad]} a message that must take a port "
            f"before one sent at slot {end[before]} by an operation that started earlier"
        )
    return rounds
