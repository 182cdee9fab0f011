"""Compiled envelopes: a table's step time as a maximum of linear functions of the point's costs.

With the order on each worker fixed, every time the engine computes is a maximum of sums
(max-plus algebra): an operation starts at the later of its worker being free and its input's
arrival, and ends a duration later. Unrolled, ``t_sim`` is the maximum, over the paths of the
table's event graph, of the sum of the costs along the path. A path's sum is linear in the
point's cost **features** ``y`` (all ``>= 0``): ``t = c · y`` for a coefficient vector ``c`` that
depends on the table and the mode only. So

    t_sim(y) = max_k  C[k] · y

over a set ``C`` of path vectors. A vector dominated by another (``c' <= c`` componentwise), or
by a mix of two others (``c' <= λ·a + (1-λ)·b``, ``0 <= λ <= 1``), can never be the strict maximum
for ``y >= 0`` and is pruned exactly (:func:`prune`). The mixes matter: whole families of paths
trade one cost for another along a line (``a + i·u``, say one compute slot for two messages), and
only the two ends of such a line can be the maximum. :func:`build_envelope`
enumerates the Pareto-maximal vectors with a max-plus dynamic programme over the same event
graph the scan runs (:mod:`ppsweep.engine.program`), pruning at every node, and gives up when a set grows
past a cap (the engine then falls back to the scan). Evaluating a point is then a small
matrix-vector product and a maximum (:func:`evaluate`).

**Features.** The raw costs of a table are its duration rows (kind × stage), ``t_opt``, the latency
``alpha``, the wire time ``msg_bytes/beta``, the same two of the tier within a node (``alpha_intra``,
``msg_bytes/beta_intra``: messages between workers of one node, :mod:`ppsweep.engine.tiers`) and
one all-reduce time per synchronised stage (on its tier). Sweeps
vary them along few directions: the cost model makes every stage's forward, backward, I and W
proportional to one per-layer time, and the all-reduce and message times proportional to
``1/beta``. :func:`features` finds such directions in the inputs it is given (a per-stage array
that is one profile times a per-point scale; features proportional to each other at every
point; features that are zero everywhere), so the envelope lives in a space of a handful of
features and has few vectors. The reduction is exact for the inputs at hand (checked to 1e-14
relative), so it never changes a result, only the size of the envelope. Compute features
(durations, ``t_opt``) and communication features (``alpha``, wire, all-reduce) are never merged,
so each vector splits into a compute part and a communication part.

**comm_time.** Along the path that sets ``t_sim``, ``comm_time = t_sim - compute part``. Where one
vector (or several with the same communication part) is the maximum, that is its communication
part ``c_comm · y`` -- exactly the scan's answer: the scan's critical path (README, "Critical
path") is a maximal path, and any maximal path's vector is dominated by a kept maximal vector
whose parts can then differ only where the features are 0, or by a mix of two kept vectors, which
then both reach the maximum at ``y``: a tie, flagged below where their communication parts differ. Where distinct vectors with different
communication parts tie within the tie tolerance (accumulated over the path's length), the
README's tie rule decides which path is critical; :func:`evaluate` flags those points
(``ambiguous``) and the engine recomputes their ``comm_time`` with the scan. So the envelope's
``comm_time`` always follows the README rule.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ppsweep.engine.comm import RingAllReduce, Routing, message_time, route, send, step_end, synchronise, wire_time
from ppsweep.engine.program import Program, compute_time, n_duration_rows
from ppsweep.engine.tiers import INTER, INTRA, Tiers, tiers_for
from ppsweep.last_value import LastValue

#: Largest set of vectors the programme keeps at one node before giving up (the engine then scans).
DEFAULT_CAP = 64

#: Two per-stage profiles or features agree when they differ by at most this, relative.
_EXACT = 1e-14

#: Vectors closer than this (relative, per component) are the same vector (rounding of sums).
_SAME = 1e-14

#: Largest feature (elements) compared with another for proportionality.
_MERGE_LIMIT = 1 << 22

_KINDS = ("t_f", "t_b", "t_i", "t_w", "t_pf")  # duration row blocks (ppsweep.engine.program.KIND_ROW, PAIR_F)


class EnvelopeTooLarge(Exception):
    """A table whose envelope needs more vectors than the cap at some node of its event graph."""


def over_budget_message(budget: int | None) -> str:
    """Why a programme stopped at ``budget``: :class:`EnvelopeOverBudget`'s message."""
    return f"its programme needs more work than its budget ({budget}), or runs ahead of its pace"


class EnvelopeOverBudget(EnvelopeTooLarge):
    """A table whose envelope programme needs more work than its budget (:func:`build_envelope`).

    Attributes:
      budget: the budget the programme passed (it needs more than this).
    """

    def __init__(self, message: str, budget: int):
        super().__init__(message, budget)
        self.budget = int(budget)

    def __str__(self) -> str:
        return str(self.args[0])


# --------------------------------------------------------------------------------------------
# features


def raw_size(program: Program) -> int:
    """Raw cost coordinates of a table: ``5·S + 1`` duration rows, ``t_opt``, ``alpha``, wire, the
    tier within a node's ``alpha`` and wire, all-reduces."""
    return n_duration_rows(program.n_stages) + 5 + program.n_sync


def raw_index(program: Program) -> dict[str, int]:
    """Positions of ``t_opt``, ``alpha``, ``wire``, ``alpha_intra`` and ``wire_intra`` among the raw
    coordinates (syncs follow)."""
    base = n_duration_rows(program.n_stages)
    return {"t_opt": base, "alpha": base + 1, "wire": base + 2, "alpha_intra": base + 3, "wire_intra": base + 4,
            "sync": base + 5}


@dataclass(frozen=True)
class Features:
    """The point's costs as ``raw = Σ_j arrays[j] · weights[j]`` (every point, exactly).

    Attributes:
      arrays: one array per feature, each broadcastable to the point shape (same ndim), ``>= 0``.
      weights: ``(J, raw_size)`` non-negative weight of each feature on each raw coordinate.
      comm: ``(J,)`` True for communication features (latency, wire, all-reduce).
    """

    arrays: tuple[np.ndarray, ...]
    weights: np.ndarray
    comm: np.ndarray

    @property
    def n(self) -> int:
        """Number of features."""
        return len(self.arrays)

    def key(self) -> tuple:
        """Hashable identity of the feature directions (what an envelope is compiled for)."""
        return (self.weights.shape, self.weights.tobytes(), self.comm.tobytes())


def _rank_one(a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``a (..., K)`` as ``y[..., None] * profile`` (profile max 1), or None where it is not one."""
    flat = a.reshape(-1, a.shape[-1])
    ref = flat[int(np.argmax(flat.sum(axis=1)))]
    top = float(ref.max(initial=0.0))
    if top <= 0:
        return np.zeros(a.shape[:-1]), np.zeros(a.shape[-1])
    profile = ref / top
    y = flat @ profile / float(profile @ profile)
    scale = float(np.abs(flat).max())
    if np.abs(flat - y[:, None] * profile).max(initial=0.0) > _EXACT * scale:
        return None
    return np.maximum(y, 0.0).reshape(a.shape[:-1]), profile


def features(
    program: Program,
    stage_arrays: Mapping[str, np.ndarray],
    alpha: np.ndarray,
    beta: np.ndarray,
    msg_bytes: np.ndarray,
    t_opt: np.ndarray,
    ndim: int,
    tiers: Tiers | None = None,
    alpha_intra: np.ndarray | None = None,
    beta_intra: np.ndarray | None = None,
) -> Features:
    """Reduce a point grid's costs to a few features (module docstring, "Features").

    Args:
      program: the compiled table.
      stage_arrays: ``t_f``, ``t_b``, ``t_i``, ``t_w``, ``t_pf`` (a pair's forward part; may be absent where
        the table has no pair), ``grad_bytes``, each ``batch_k + (S or 1,)``.
      alpha, beta, msg_bytes, t_opt: per-point arrays broadcastable to the point shape.
      ndim: number of axes of the point shape.
      tiers: the tier of each link and synchronisation (default: every one between nodes).
      alpha_intra, beta_intra: the tier within a node (default ``alpha``, ``beta``): its features
        are added only where ``tiers`` uses it.

    Returns:
      The :class:`Features`.
    """
    S = program.n_stages
    D = raw_size(program)
    idx = raw_index(program)

    def lead(a: np.ndarray, trailing: int) -> np.ndarray:
        a = np.asarray(a, dtype=float)
        return a.reshape((1,) * (ndim + trailing - a.ndim) + a.shape)

    cands: list[tuple[np.ndarray, np.ndarray, bool]] = []
    used_rows = set(np.flatnonzero(np.bincount(program.compute_rows, minlength=n_duration_rows(S))).tolist())  # the rows a step uses
    for k, name in enumerate(_KINDS):
        rows = [k * S + s for s in range(S)]
        if not used_rows.intersection(rows):
            continue
        a = lead(stage_arrays[name], 1)
        if a.shape[-1] == 1:
            w = np.zeros(D)
            w[rows] = 1.0
            cands.append((a[..., 0], w, False))
            continue
        one = _rank_one(a)
        if one is not None:
            w = np.zeros(D)
            w[rows] = one[1]
            cands.append((one[0], w, False))
        else:
            for s in range(S):
                w = np.zeros(D)
                w[rows[s]] = 1.0
                cands.append((a[..., s], w, False))
    w = np.zeros(D)
    w[idx["t_opt"]] = 1.0
    cands.append((lead(t_opt, 0), w, False))

    tiers = tiers_for(program) if tiers is None else tiers
    alpha_intra = alpha if alpha_intra is None else alpha_intra
    beta_intra = beta if beta_intra is None else beta_intra
    alpha, beta, msg_bytes = lead(alpha, 0), lead(beta, 0), lead(msg_bytes, 0)
    alpha_intra, beta_intra = lead(alpha_intra, 0), lead(beta_intra, 0)
    rings = [RingAllReduce(int(np.sum(program.sync_holders[k] >= 0))) for k in range(program.n_sync)]
    for tier, latency, bandwidth, names in ((INTER, alpha, beta, ("alpha", "wire")),
                                            (INTRA, alpha_intra, beta_intra, ("alpha_intra", "wire_intra"))):
        if tier == INTRA and not tiers.uses_intra:
            break  # the tier within a node carries nothing
        w = np.zeros(D)
        w[idx[names[0]]] = 1.0
        for k, ring in enumerate(rings):
            if tiers.sync_tier[k] == tier:
                w[idx["sync"] + k] = ring.alpha_coefficient
        cands.append((latency, w, True))
        w = np.zeros(D)
        w[idx[names[1]]] = 1.0
        cands.append((wire_time(msg_bytes, bandwidth), w, True))
    if program.n_sync:
        g = lead(stage_arrays["grad_bytes"], 1)
        g = np.broadcast_to(g, g.shape[:-1] + (S,))[..., program.sync_stages]
        sync_beta = np.where(tiers.sync_tier == INTRA, beta_intra[..., None], beta[..., None])  # each sync's tier
        per_sync = wire_time(g, sync_beta)  # (..., n_sync)
        factor = np.array([ring.wire_coefficient for ring in rings])
        one = _rank_one(per_sync)
        if one is not None:
            w = np.zeros(D)
            w[idx["sync"] : idx["sync"] + program.n_sync] = one[1] * factor
            cands.append((one[0], w, True))
        else:
            for k in range(program.n_sync):
                w = np.zeros(D)
                w[idx["sync"] + k] = factor[k]
                cands.append((per_sync[..., k], w, True))

    kept: list[list[Any]] = []  # [array, weights, comm]
    for y, w, comm in cands:
        if not np.any(y):
            continue  # zero at every point: contributes nothing
        for other in kept:
            if other[2] == comm and _proportional(other[0], y) is not None:
                other[1] = other[1] + _proportional(other[0], y) * w
                break
        else:
            kept.append([np.asarray(y, dtype=float), w, comm])
    if not kept:
        return Features((), np.zeros((0, D)), np.zeros(0, dtype=bool))
    return Features(
        arrays=tuple(k[0] for k in kept),
        weights=np.stack([k[1] for k in kept]),
        comm=np.array([k[2] for k in kept], dtype=bool),
    )


def _proportional(base: np.ndarray, other: np.ndarray) -> float | None:
    """``c`` with ``other == c · base`` at every point (to 1e-14), else None.

    Only features on the same axes are compared (features along different axes are proportional
    only where both are constant, which merging would barely help).
    """
    if base.shape != other.shape or base.size > _MERGE_LIMIT:
        return None
    b, o = base.ravel(), other.ravel()
    bb = float(b @ b)
    if bb == 0:
        return None
    c = float(o @ b) / bb
    if c < 0 or np.abs(o - c * b).max() > _EXACT * float(np.abs(o).max()):
        return None
    return c


def unwalked_refusal(program: Program, n_components: int, budget: int | None) -> EnvelopeOverBudget | None:
    """The verdict of a compiled walk (vectors of ``n_components``) whose steps alone pass ``budget``
    (:func:`ppsweep.engine.native_envelope.least_work`): its own verdict, given before it walks; None
    where it may stay within it (or has no budget)."""
    from ppsweep.engine import native_envelope

    if budget and native_envelope.supports(n_components) and native_envelope.least_work(program) > budget:
        return EnvelopeOverBudget(over_budget_message(budget), budget)
    return None


# --------------------------------------------------------------------------------------------
# the max-plus programme


@dataclass(frozen=True)
class Envelope:
    """A table's compiled envelope in one feature space.

    Attributes:
      t_sim: ``(K, J)`` Pareto-maximal path vectors of the step time.
      finish: per worker, ``(K_w, J)`` vectors of its finish time (before any optimizer update).
      compute: ``(J,)`` vector of the total compute time (every operation and update).
      comm: ``(J,)`` True on communication features.
      depth: maximum nodes on a path (scales the tie band).
      largest: largest set kept at any node.
      work: the compiled programme's work (:func:`ppsweep.engine.native_envelope.run_waves`; 0 from
        the reference walk, which does not count it).
      need: the least budget under which the compiled programme runs to its end: its work, or
        more where it ran ahead of a smaller budget's pace.
    """

    t_sim: np.ndarray
    finish: tuple[np.ndarray, ...]
    compute: np.ndarray
    comm: np.ndarray
    depth: int
    largest: int
    work: int = 0
    need: int = 0

    @property
    def n_vectors(self) -> int:
        """Vectors of the step time."""
        return int(self.t_sim.shape[0])


def prune(vectors: np.ndarray, cap: int = DEFAULT_CAP) -> np.ndarray:
    """The rows of ``vectors`` that may be the strict maximum of ``v · y`` for some ``y >= 0``, as far
    as two rows at a time tell (rows within rounding of each other count as one).

    First the Pareto-maximal rows, by decreasing sum: a row is dropped where an earlier one is at
    least as large in every component. Then, in that order, a row is dropped where a mix of two
    other rows still kept covers it (:func:`_drop_mixed`): rows along a line of paths, ``a + i·u``,
    keep their two ends only.

    Raises:
      EnvelopeTooLarge: more than ``cap`` rows remain.
    """
    if vectors.shape[0] <= 1:
        return vectors
    order = np.argsort(-vectors.sum(axis=1), kind="stable")
    v = vectors[order]
    tol = _SAME * np.abs(v).max(axis=0)
    # dom[i, j]: row i >= row j in every component (within rounding); only earlier rows (larger sums) prune.
    dom = at_least(v[:, None, :], v[None, :, :] - tol)
    dominated = np.triu(dom, 1).any(axis=0)
    kept = _drop_mixed(v[~dominated], tol)
    if kept.shape[0] > cap:
        raise EnvelopeTooLarge(f"{kept.shape[0]} vectors at one node (cap {cap})")
    return kept


def _drop_mixed(v: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """``v`` without each row that a mix of two other rows still kept covers, taken in order.

    Row ``j`` is covered where some ``λ`` in ``[0, 1]`` has ``λ·a + (1-λ)·b >= j - tol`` in every
    component: then ``j·y <= max(a·y, b·y)`` for every ``y >= 0`` (within the rounding tolerance
    ``tol``), and ``j`` is never the strict maximum. Each component bounds ``λ``: ``λ·d >= r`` with
    ``d = a - b``, ``r = j - tol - b`` (a lower bound where ``d > 0``, an upper one where ``d < 0``, and
    none possible where ``d = 0 < r``). The compiled walk's :func:`ppsweep.engine.native_envelope.hull_rows`
    takes the same decisions from the same quotients.
    """
    n = v.shape[0]
    if n <= 2:
        return v
    first, second = np.triu_indices(n, 1)  # the pairs (a, b), a < b
    d = v[first] - v[second]
    covers = np.empty((n, first.size), dtype=bool)  # covers[j, k]: pair k's mixes cover row j
    step = max(1, (1 << 21) // max(1, d.size))  # rows at a time: at most about 2 M quotients
    for j0 in range(0, n, step):
        rows = v[j0 : j0 + step] - tol
        lo, hi = np.zeros((rows.shape[0], first.size)), np.ones((rows.shape[0], first.size))
        possible = np.ones((rows.shape[0], first.size), dtype=bool)
        for c in range(v.shape[1]):  # one component at a time (numpy reduces a short last axis slowly)
            dc, rc = d[:, c], rows[:, c, None] - v[second, c]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = rc / dc
            lo = np.maximum(lo, np.where(dc > 0, ratio, 0.0))
            hi = np.minimum(hi, np.where(dc < 0, ratio, 1.0))
            possible &= (dc != 0) | (rc <= 0)
        covers[j0 : j0 + step] = possible & (lo <= hi)
    alive = np.ones(n, dtype=bool)
    for j in range(n):  # in order: a row dropped covers no later one
        usable = alive[first] & alive[second] & (first != j) & (second != j)
        alive[j] = not np.any(covers[j] & usable)
    return v[alive]


def at_least(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.all(a >= b, axis=-1)`` with ``a`` and ``b`` broadcast, one component at a time.

    The same comparisons as the one-line form, without its reduction over a short last axis
    (slow in numpy) and its boolean array ``J`` times the size of the result.

    Args:
      a, b: arrays whose last axis is the vectors' components (broadcast against each other).

    Returns:
      Boolean array of the broadcast shape without the last axis: True where ``a >= b`` in
      every component (True for vectors of no component).
    """
    J = max(a.shape[-1], b.shape[-1])
    if J == 0:
        return np.ones(np.broadcast_shapes(a.shape, b.shape)[:-1], dtype=bool)
    out = a[..., 0] >= b[..., 0]
    for j in range(1, J):
        out &= a[..., j] >= b[..., j]
    return out


class _SetAlgebra:
    """Times of the envelope programme for :mod:`ppsweep.engine.comm`: sets of path vectors.

    ``native``: joins pruned by the compiled :func:`ppsweep.engine.native_envelope.prune` (the same rows).
    """

    def __init__(self, cap: int, native: bool = False):
        self.cap = cap
        self.largest = 1
        self.native = native

    def join(self, *sets: np.ndarray) -> np.ndarray:
        if len(sets) == 1:
            return sets[0]
        if self.native:
            from ppsweep.engine.native_envelope import prune as native_prune

            out = native_prune(np.concatenate(sets), _SAME)
            if out.shape[0] > self.cap:
                raise EnvelopeTooLarge(f"{out.shape[0]} vectors at one node (cap {self.cap})")
        else:
            out = prune(np.concatenate(sets), self.cap)
        self.largest = max(self.largest, out.shape[0])
        return out

    def comm(self, time: np.ndarray, duration: np.ndarray) -> np.ndarray:
        return time + duration


def build_envelope(program: Program, mode: str, weights: np.ndarray, comm: np.ndarray, cap: int = DEFAULT_CAP,
                   routing: Routing | None = None, native: bool = True, tiers: Tiers | None = None,
                   budget: int | None = None) -> Envelope:
    """Enumerate the maximal path vectors of ``program`` in ``mode`` (module docstring).

    The programme walks the same waves, registers, resources and synchronisations as the scan
    (:mod:`ppsweep.engine.core`), with the same rules (:mod:`ppsweep.engine.comm`), with sets of vectors in
    place of times.

    Args:
      program: the compiled table.
      mode: a communication mode (:data:`ppsweep.engine.comm.MODES`).
      weights: ``(J, raw_size)`` feature weights (:class:`Features`).
      comm: ``(J,)`` communication features.
      cap: largest set kept at a node.
      routing: the program's :class:`~ppsweep.engine.comm.Routing` in ``mode`` (computed if not given).
      native: run the programme compiled (:mod:`ppsweep.engine.native_envelope`, the same vectors
        to the bit; vectors of more than 128 features take the reference); False: the reference,
        lane by lane in numpy.
      tiers: the tier of each link and synchronisation (default: every one between nodes); a
        message adds its tier's latency and wire vectors.
      budget: most work the compiled programme may do, and the pace it may not run ahead of
        (:func:`ppsweep.engine.native_envelope.run_waves`);
        None: no limit. The reference walk (``native=False`` or more than 128 features) has none.

    Raises:
      EnvelopeTooLarge: when some node needs more than ``cap`` vectors.
      EnvelopeOverBudget: (an EnvelopeTooLarge) when the programme needs more work than ``budget``
        (or runs ahead of its pace).
    """
    J = weights.shape[0]
    refused = unwalked_refusal(program, J, budget)
    if refused is not None:
        raise refused
    routing = route(program, mode) if routing is None else routing
    idx = raw_index(program)
    p = program.p
    rows = weights[:, : n_duration_rows(program.n_stages)].T  # (5S+1, J) duration of each row (the last is 0)
    t_opt = weights[:, idx["t_opt"]]
    # per tier (rows INTER, INTRA), a message's wire and whole time; each lane's message its link's tier
    wire = weights[:, [idx["wire"], idx["wire_intra"]]].T
    msg = message_time(weights[:, [idx["alpha"], idx["alpha_intra"]]].T, wire)
    tiers = tiers_for(program) if tiers is None else tiers
    lane_tier = tiers.lane_tier(program.link)  # the trash link (no message) reads INTER
    sync_vec = weights[:, idx["sync"] : idx["sync"] + program.n_sync].T
    zero = np.zeros((1, J))
    from ppsweep.engine import native_envelope

    native = native and native_envelope.supports(J)
    alg = _SetAlgebra(cap, native)
    work = 0
    if native:  # the same walk, compiled
        free, reg, res, ready, alg.largest, too_many, work, need = native_envelope.run_waves(
            program, routing, rows, wire, msg, cap, _SAME, lane_tier, budget or 0)
        if too_many < 0:
            raise EnvelopeOverBudget(over_budget_message(budget), budget)
        if too_many:
            raise EnvelopeTooLarge(f"{too_many} vectors at one node (cap {cap})")
    else:  # the reference: lane by lane
        free = [zero] * p
        reg = [zero] * (program.n_regs + 2)
        res = [zero] * routing.n_resources
        ready = [zero] * (program.n_sync * p + 1)
        for t in range(program.n_waves):
            writes: list[tuple[list[np.ndarray], int, np.ndarray]] = []
            # lanes sharing a resource take it in round order (the scan's rounds, the table's send order)
            for w in sorted(np.flatnonzero(program.active[t]), key=lambda w: (routing.rounds[t, w], w)):
                dep = int(program.dep_reg[t, w])
                start = free[w] if dep == program.zero_reg else alg.join(free[w], reg[dep])
                end = start + rows[program.cost_row[t, w]]
                out = int(program.out_reg[t, w])
                sends = out != program.trash_reg
                busy = end
                if sends:
                    held = [int(i) for i in routing.lane_resources[t, w]]
                    tier = lane_tier[t, w]
                    arrival, released = send(alg, end, [res[i] for i in held], wire[tier], msg[tier])
                    for i in held:
                        res[i] = released
                    writes.append((reg, out, arrival))
                    busy = arrival if routing.mode.blocks_sender else end
                writes.append((free, int(w), busy))
                slot = int(program.sync_slot[t, w])
                if slot != program.trash_sync:
                    writes.append((ready, slot, end))
            for target, i, value in writes:  # every lane reads registers before any writes (as the scan)
                target[i] = value

    finish = list(free)
    sync_end: dict[int, np.ndarray] = {}
    for k in program.sync_order:
        k = int(k)
        holders = [int(w) for w in program.sync_holders[k] if w >= 0]
        held = routing.sync_resources[k]
        end = synchronise(alg, [ready[k * p + w] for w in holders], [res[i] for i in held], sync_vec[k])
        for i in held:
            res[i] = end
        sync_end[k] = end
    t_sim = step_end(alg, finish, [sync_end[k] for k in range(program.n_sync)],
                     [[int(w) for w in row if w >= 0] for row in program.sync_holders], lambda w, start: start + t_opt)
    return Envelope(
        t_sim=t_sim,
        finish=tuple(finish),
        compute=compute_time(program, rows, t_opt),
        comm=np.asarray(comm, dtype=bool),
        depth=program.n_ops + program.n_sync + 2,
        largest=alg.largest,
        work=work,
        need=need if native else work,
    )


# --------------------------------------------------------------------------------------------
# evaluation


@dataclass(frozen=True)
class EnvelopeResult:
    """What :func:`evaluate` gives, every array with the point shape (``finish``: ``+ (p,)``)."""

    t_sim: np.ndarray
    finish: np.ndarray | None
    comm_time: np.ndarray
    ambiguous: np.ndarray
    compute_time: np.ndarray


def evaluate(env: Envelope, feats: Features, batch: tuple[int, ...], dtype: Any = np.float64, finish: bool = True, tie_rtol: float = 1e-12) -> EnvelopeResult:
    """Evaluate the envelope at every point: ``t_sim = max_k C[k]·y`` and the rest.

    Only the vectors that can come within the tie band of the maximum somewhere in the grid's box
    of feature values are evaluated (a vector below another by more than the band, plus a
    rounding margin, at every point of the box is dropped: exact to the bit, :func:`_box_keep`);
    on sweeps where compute dominates, one vector remains. Where the envelope has more than a
    few vectors, the grid is also cut into blocks along its (up to two) largest axes, each block
    pruned the same way within its own box. Most blocks need one to a few vectors.

    Args:
      env: the compiled envelope.
      feats: the features of the points (same directions the envelope was compiled for).
      batch: the point shape.
      dtype: float dtype of the evaluation.
      finish: also evaluate each worker's finish time.
      tie_rtol: the tie tolerance of one maximum (README); the band in which distinct
        communication parts make a point ambiguous is ``depth · tie_rtol`` (relative; float32:
        ``tie_rtol``).

    Returns:
      An :class:`EnvelopeResult`; ``ambiguous`` marks points whose ``comm_time`` the README's tie
      rule must settle (the engine recomputes them with the scan).
    """
    dtype = np.dtype(dtype)
    ndim = len(batch)
    ys = tuple(np.asarray(y, dtype=dtype).reshape((1,) * (ndim - np.ndim(y)) + np.shape(y)) for y in feats.arrays)
    # float64: a maximal path's value is within depth · tie_rtol of t_sim (one tie tolerance per
    # node). float32 rounds at 1e-7, so vectors closer than its tie tolerance cannot be ordered:
    # those points go to the (float32) scan too.
    band = float(env.depth) * tie_rtol if dtype == np.float64 else tie_rtol
    compute = _shared_compute_time(env, feats, ys, batch, dtype)
    # First the vectors that can matter anywhere on the grid (_box_keep: exact), then, where many
    # remain, block by block.
    lo, hi = _box(ys)
    vectors = env.t_sim[_box_keep(env.t_sim, lo, hi, band, dtype)]
    fins = _box_kept(env.finish, lo, hi, band, dtype) if finish else None
    # Whether the grid is cut follows the envelope as compiled (a matter of speed): every vector is
    # summed alike wherever it is evaluated (_dot), so no cut, pruning or form changes a bit.
    many = env.n_vectors > _BLOCK_MIN_VECTORS or (finish and max(f.shape[0] for f in env.finish) > _BLOCK_MIN_VECTORS)
    blocks = _blocks(ys, batch) if many else None
    if blocks is None:
        check = _tie_form(vectors, env.comm)
        return _evaluate_block(env, vectors, fins, ys, batch, dtype, band, tie_rtol, compute, check)
    t_sim, comm = np.empty(batch), np.empty(batch)
    ambiguous = np.empty(batch, dtype=bool)
    fin = np.empty(batch + (len(env.finish),)) if finish else None
    for block in blocks:
        sub = tuple(y[tuple(sl if y.shape[ax] > 1 else slice(None) for ax, sl in enumerate(block))] for y in ys)
        shape = tuple(len(range(*sl.indices(n))) for sl, n in zip(block, batch))
        lo, hi = _box(sub)
        block_vectors = vectors[_box_keep(vectors, lo, hi, band, dtype)]
        block_fins = _box_kept(fins, lo, hi, band, dtype) if finish else None
        check = _tie_form(block_vectors, env.comm)
        r = _evaluate_block(env, block_vectors, block_fins, sub, shape, dtype, band, tie_rtol, compute, check)
        t_sim[block], comm[block], ambiguous[block] = r.t_sim, r.comm_time, r.ambiguous
        if finish:
            fin[block] = r.finish
    return EnvelopeResult(t_sim=t_sim, finish=fin, comm_time=comm, ambiguous=ambiguous, compute_time=compute)


#: Envelopes with more vectors than this are evaluated block by block (:func:`evaluate`).
_BLOCK_MIN_VECTORS = 16

#: Blocks per split axis, and the fewest points along an axis worth splitting.
_BLOCKS_PER_AXIS = 4
_BLOCK_MIN_AXIS = 64


def _blocks(ys: tuple[np.ndarray, ...], batch: tuple[int, ...]) -> list[tuple[slice, ...]] | None:
    """Blocks of the grid: its (up to two) largest axes along which some feature varies, cut in pieces."""
    varying = [ax for ax in range(len(batch)) if batch[ax] >= _BLOCK_MIN_AXIS and any(y.shape[ax] > 1 for y in ys)]
    if not varying:
        return None
    axes = sorted(varying, key=lambda ax: -batch[ax])[:2]
    pieces = []
    for ax in range(len(batch)):
        if ax in axes:
            edges = np.linspace(0, batch[ax], _BLOCKS_PER_AXIS + 1).round().astype(int)
            pieces.append([slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a])
        else:
            pieces.append([slice(None)])
    return [tuple(block) for block in itertools.product(*pieces)]


def _box(ys: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Each feature's least and largest value over its points (float64): the box of the grid."""
    return np.array([float(y.min()) for y in ys]), np.array([float(y.max()) for y in ys])


def _box_keep(vectors: np.ndarray, lo: np.ndarray, hi: np.ndarray, band: float, dtype: Any = np.float64,
              margin: bool = True) -> np.ndarray:
    """Rows that may come within ``band`` (relative) of the maximum somewhere in the box ``lo <= y <= hi``.

    Row ``k`` is dropped when another row ``i`` exceeds it by more than ``(band + margin) · top`` at
    every point of the box: ``least[i, k] = min_box (c_i - c_k)·y``, taken feature by feature at
    ``lo`` or ``hi``, and ``top >= |c·y|`` for every row and point of the box, with every term
    ``|c_j y_j|`` summed.

    Why dropping is exact (no bit of any result changes): the evaluation computes a row's value
    ``v = c·y`` in ``dtype`` (unit roundoff ``u``) with the row rounded to ``dtype``, one product and
    one sum (or one fused multiply-add) per feature, so its computed value differs from the exact
    ``Σ c_j y_j`` by at most about ``(J + 2)·u·top``; ``floor = t - band·|t|`` by at most ``2u·|t|``;
    ``least`` and ``top`` here (float64) by far less. With ``margin = 8·(J + 2)·eps`` (``eps = 2u``)
    every computed value of a dropped row lies strictly below the computed ``floor`` at every point of the box
    (``floor <= t``), so the row is never the maximum and never within the tie band: ``t_sim``, the
    near set whose communication parts give ``comm_time`` and ``ambiguous``, and a worker's finish
    (a plain maximum) come out the same to the bit. Dropping is transitive (a row that beats a
    dropped row beats, within the box, everything that row beat), so a row that is the maximum
    somewhere is never dropped. NaN or infinite bounds drop nothing (comparisons are False).

    Args:
      vectors: ``(K, J)`` rows.
      lo, hi: ``(J,)`` least and largest feature values over the box.
      band: the tie band, relative.
      dtype: the dtype of the evaluation (its roundoff sets the margin).
      margin: False: without the rounding margin (the rule :func:`_tie_form` replays; not exact
        on its own).

    Returns:
      ``(K,)`` True for the rows to keep.
    """
    keep = _box_keep_each((vectors,), lo, hi, band, dtype, margin)[0]
    return np.ones(vectors.shape[0], dtype=bool) if keep is None else keep


def _box_kept(sets: tuple[np.ndarray, ...], lo: np.ndarray, hi: np.ndarray, band: float, dtype: Any) -> tuple[np.ndarray, ...]:
    """The rows of each of ``sets`` that :func:`_box_keep` keeps (a set of one row or none as it is)."""
    return tuple(v if keep is None else v[keep] for v, keep in zip(sets, _box_keep_each(sets, lo, hi, band, dtype)))


def _box_keep_each(sets: tuple[np.ndarray, ...], lo: np.ndarray, hi: np.ndarray, band: float, dtype: Any = np.float64,
                   margin: bool = True) -> list[np.ndarray | None]:
    """:func:`_box_keep` of each of ``sets`` (``(K_i, J)`` rows each; a worker's finish vectors, one set
    a worker), None for a set of one row or none (kept whole): the sets of more than one row are
    stacked and computed together, as many at once as :data:`_BOX_KEEP_ELEMENTS` allows, with the
    same masks (:func:`_box_keep_stacked`)."""
    masks: list[np.ndarray | None] = [None] * len(sets)
    many = [i for i, v in enumerate(sets) if v.shape[0] > 1]
    if not many:
        return masks
    size, width = max(sets[i].shape[0] for i in many), sets[many[0]].shape[1]
    per_part = max(1, _BOX_KEEP_ELEMENTS // max(1, size * size * width))
    for part in range(0, len(many), per_part):
        chosen = many[part : part + per_part]
        for i, keep in zip(chosen, _box_keep_stacked([sets[i] for i in chosen], size, lo, hi, band, dtype, margin)):
            masks[i] = keep
    return masks


#: Most elements of one stacked difference array of :func:`_box_keep_each` (``sets × K × K × J``; 8 MiB in float64).
_BOX_KEEP_ELEMENTS = 1 << 20


def _box_keep_stacked(sets: list[np.ndarray], size: int, lo: np.ndarray, hi: np.ndarray, band: float, dtype: Any,
                      margin: bool) -> list[np.ndarray]:
    """:func:`_box_keep` of each of ``sets`` (each of 2 to ``size`` rows), stacked: a set's padding rows
    count 0 in its ``top`` and their NaN differences drop nothing, so each mask is the set's own."""
    rows = np.zeros((len(sets), size, sets[0].shape[1]))
    real = np.zeros(rows.shape[:2], dtype=bool)
    for n, v in enumerate(sets):
        rows[n, : v.shape[0]] = v.astype(dtype)  # the rows the evaluation multiplies, in float64
        real[n, : v.shape[0]] = True
    with np.errstate(invalid="ignore", over="ignore"):  # infinite bounds: NaN comparisons drop nothing
        top = np.where(real, np.maximum(np.abs(rows * lo), np.abs(rows * hi)).sum(axis=2), 0.0).max(axis=1)
        rows = np.where(real[..., None], rows, np.nan)
        diff = rows[:, :, None, :] - rows[:, None, :, :]
        least = np.minimum(diff * lo, diff * hi).sum(axis=-1)  # least[., i, k] = min over the box of (c_i - c_k)·y
        rounding = 8.0 * (rows.shape[2] + 2) * float(np.finfo(dtype).eps) if margin else 0.0
        drop = (least > ((band + rounding) * top)[:, None, None]).any(axis=1)
    return [~drop[n, : v.shape[0]] for n, v in enumerate(sets)]


def _tie_form(vectors: np.ndarray, comm: np.ndarray) -> bool:
    """Whether a part of the grid is evaluated in the tie-checking form (``check`` of :func:`_evaluate_block`):
    where the ``vectors (K, J)`` it keeps (:func:`_box_keep`) differ in their communication parts
    (``comm (J,)``: True on communication features), several may be near the maximum with different
    ones. Either form sums every vector alike (:func:`_dot`), so the form decides which points are
    ambiguous, never a bit of a value."""
    return bool(vectors.shape[0] > 1 and np.ptp(vectors[:, comm], axis=0).max(initial=0.0) > 0)


def _shared_compute_time(env: Envelope, feats: Features, ys: tuple[np.ndarray, ...], batch: tuple[int, ...],
                         dtype: np.dtype) -> np.ndarray:
    """:func:`_compute_time`, the last one computed on this thread given again where it is asked for
    the same features, compute vector, shape and dtype: the envelopes of a table's modes share their
    features and their compute vector (the program's), so a sweep computes each table's once."""
    key = (env.compute.tobytes(), env.comm.tobytes(), batch, dtype)
    compute = _COMPUTE_MEMO.get((feats,), key)
    return _COMPUTE_MEMO.put((feats,), key, _compute_time(env, ys, batch, dtype)) if compute is None else compute


#: One-entry memo of :func:`_shared_compute_time` per thread.
_COMPUTE_MEMO = LastValue()


def _compute_time(env: Envelope, ys: tuple[np.ndarray, ...], batch: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``compute_time`` of every point: a read-only ``batch``-shaped view of its values over the axes
    along which the compute features vary (most grids: a single value).

    It is the sum of the compute features weighted by the envelope's ``compute`` vector, summed as
    every row is (:func:`_dot`), without writing (and copying out) one value per point.
    """
    compute_idx = tuple(int(j) for j in np.flatnonzero(~env.comm))
    small = _dot(env.compute.astype(dtype), ys, dtype, compute_idx)
    return np.broadcast_to(small.astype(np.float64, copy=False), batch)


def _evaluate_block(env: Envelope, vectors: np.ndarray, finish: tuple[np.ndarray, ...] | None, ys: tuple[np.ndarray, ...],
                    batch: tuple[int, ...], dtype: np.dtype, band: float, tie_rtol: float, compute: np.ndarray,
                    check: bool) -> EnvelopeResult:
    rows = vectors.astype(dtype)
    comm_idx = tuple(int(j) for j in np.flatnonzero(env.comm))
    band = np.asarray(band, dtype=dtype)[()]
    # Every value is computed over the axes along which the features vary, then spread over the grid.
    t, hi, lowest = _values_in_chunks(rows, ys, dtype, (band, comm_idx) if check else None)
    if not check:  # every maximal vector has the same communication part: the first one's
        hi = _dot(rows[0], ys, dtype, comm_idx)
    t_sim = np.broadcast_to(t, batch)
    comm_time = np.broadcast_to(hi, batch)
    # several vectors with different communication parts near the maximum: an ambiguous point
    ambiguous = (np.broadcast_to(hi - lowest > tie_rtol * np.abs(t), batch) if check
                 else np.zeros(batch, dtype=bool))
    fin = None
    if finish is not None:  # each worker's finish: the maximum of its own rows
        fin = np.stack([np.broadcast_to(_values_in_chunks(f.astype(dtype), ys, dtype)[0], batch) for f in finish], axis=-1)
    return EnvelopeResult(
        t_sim=np.array(t_sim, dtype=np.float64),
        finish=None if fin is None else fin.astype(np.float64, copy=False),
        comm_time=np.array(comm_time, dtype=np.float64),
        ambiguous=np.array(ambiguous),
        compute_time=compute,
    )


#: Most points of the features' broadcast shape evaluated at once where several rows are
#: (:func:`_values_in_chunks`): each row's arrays then stay in the CPU's cache. Measured on a
#: 1,000 × 1,000 grid (2 cores): Chimera p = 8 in `ports`, 13 vectors, 28 ms against 47 ms whole;
#: pieces of 2^14 and 2^17 points no faster.
_CHUNK_POINTS = 1 << 16


def _values_in_chunks(rows: np.ndarray, ys: tuple[np.ndarray, ...], dtype: np.dtype,
                      tie: tuple[np.floating, tuple[int, ...]] | None = None
                      ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``(t, hi, lowest)`` over the broadcast shape of the features ``ys``: the maximum of the rows,
    then with ``tie = (band, comm_idx)`` the highest and lowest communication part of the rows
    near it (:func:`_near_span`); without, None and None.

    Where there are several rows, a grid of more than :data:`_CHUNK_POINTS` points is evaluated in
    pieces of its longest axis, each in one workspace (:class:`_Work`) allocated once: every value
    is the same elementwise sum (the same bits), its arrays stay in the CPU's cache, and no array
    is allocated per row (freeing large arrays returns their pages to the system, and touching new
    ones faults them in again: without the workspace, two rows' values cost 12x one row's).
    """
    shape = np.broadcast_shapes(*(y.shape for y in ys))
    size = int(np.prod(shape, dtype=np.int64))
    check = tie is not None
    t = np.empty(shape, dtype)
    hi, lowest = (np.empty(shape, dtype), np.empty(shape, dtype)) if check else (None, None)
    pieces: list[tuple] = [(Ellipsis,)]  # (a view, also of a 0-d grid)
    axis = None
    if size > _CHUNK_POINTS and rows.shape[0] > 1:  # one row: a single pass over each array anyway
        axis = int(np.argmax(shape))
        step = max(1, _CHUNK_POINTS * shape[axis] // size)
        pieces = [(slice(None),) * axis + (slice(start, start + step),) for start in range(0, shape[axis], step)]
    work = None
    for at in pieces:
        sub = tuple(y[at] if axis is not None and y.shape[axis] > 1 else y for y in ys)
        if work is None or work.shape != t[at].shape:
            work = _Work(rows.shape[0], t[at].shape, dtype, check)
        _running_max(rows, sub, dtype, work, t[at])
        if check:
            _near_span(rows, sub, t[at], *tie, dtype, work, hi[at], lowest[at])
    return t, hi, lowest


class _Work:
    """The arrays one piece of the grid is evaluated in (:func:`_values_in_chunks`): each row's
    value (all rows' where the tie check keeps them, :data:`_KEPT_BYTES`), a product, the tie
    band's floor and which points are near it."""

    def __init__(self, n_rows: int, shape: tuple[int, ...], dtype: np.dtype, check: bool):
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.shape = shape
        self.keeps = check and n_rows * size <= _KEPT_BYTES
        self.values = np.empty((n_rows if self.keeps else 1,) + shape, dtype)
        self.product = np.empty(shape, dtype)
        self.floor = np.empty(shape, dtype) if check else None
        self.near = np.empty(shape, dtype=bool) if check else None
        self.comm = np.empty(shape, dtype) if check else None

    def value(self, k: int) -> np.ndarray:
        """Where row ``k``'s value goes."""
        return self.values[k if self.keeps else 0]


#: Most bytes of row values the tie-checking form keeps from its first pass (:class:`_Work`; else it
#: sums each row again, the same bits).
_KEPT_BYTES = 1 << 26


def _running_max(rows: np.ndarray, ys: tuple[np.ndarray, ...], dtype: np.dtype, work: _Work, t: np.ndarray) -> None:
    """``t`` = the maximum of :func:`_dot` over ``rows (K, J)``, in order (NaN wins, as in
    ``np.maximum``); each row's value left in ``work``."""
    for k, row in enumerate(rows):
        value = _dot(row, ys, dtype, out=work.value(k) if k or work.keeps else t, scratch=work.product)
        if k:
            np.maximum(t, value, out=t)
        elif value is not t:
            t[...] = value


def _near_span(rows: np.ndarray, ys: tuple[np.ndarray, ...], top: np.ndarray, band: np.floating, comm_idx: tuple[int, ...],
               dtype: np.dtype, work: _Work, hi: np.ndarray, lo: np.ndarray) -> None:
    """``hi``, ``lo`` = the highest and lowest communication part of the ``rows`` within ``band`` of
    ``top`` (relative): ``top - band·|top|``, each operation rounded."""
    floor = work.floor
    np.abs(top, out=floor)
    np.multiply(band, floor, out=floor)
    np.subtract(top, floor, out=floor)
    hi.fill(-np.inf)
    lo.fill(np.inf)
    for k, row in enumerate(rows):
        value = work.values[k] if work.keeps else _dot(row, ys, dtype, out=work.value(k), scratch=work.product)
        np.greater_equal(value, floor, out=work.near)
        c = _dot(row, ys, dtype, comm_idx, out=work.comm, scratch=work.product)
        np.maximum(hi, c, out=hi, where=work.near)
        np.minimum(lo, c, out=lo, where=work.near)


def _dot(c: np.ndarray, ys: tuple[np.ndarray, ...], dtype: np.dtype, features: tuple[int, ...] | None = None,
         out: np.ndarray | None = None, scratch: np.ndarray | None = None) -> np.ndarray:
    """``c (J,)`` against the features ``ys`` (those in ``features``; None: all), summed left to
    right in feature order from 0, each product rounded on its own (no fused multiply-add: the
    envelope's evaluation rule, docs/contract.md), over the broadcast shape of the features summed
    (into ``out`` where given: a shape they broadcast to, ``scratch`` of that shape for products).
    Each partial sum is computed over the broadcast shape of the features it holds so far (its
    values repeat along the others), then in place once it has the whole shape."""
    chosen = range(len(ys)) if features is None else features
    if out is None:
        out = np.empty(np.broadcast_shapes((1,) * ys[0].ndim, *(ys[j].shape for j in chosen)), dtype)
    acc = np.zeros((1,) * ys[0].ndim, dtype)
    for j in chosen:
        y = ys[j]
        term = np.multiply(c[j], y, out=scratch) if scratch is not None and y.shape == out.shape else c[j] * y
        if np.broadcast_shapes(acc.shape, term.shape) == out.shape:  # (also where acc is out)
            np.add(acc, term, out=out)
            acc = out
        else:
            acc = acc + term
    if acc is not out:
        out[...] = acc  # the features summed vary along fewer axes than out
    return out
