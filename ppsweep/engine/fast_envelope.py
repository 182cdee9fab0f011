"""The envelope's max-plus programme one wave at a time (array version of its per-lane loop).

:func:`ppsweep.engine.envelope.build_envelope` walks the table's waves and, within a wave, its lanes
one at a time, joining (pruning) small sets of path vectors at every lane: tens of thousands of
tiny numpy calls for a large table. :func:`run_waves_batched` does the same joins for every lane
of a wave at once: the sets are padded into one ``(lanes, K, J)`` array and pruned together with
the reference's arithmetic (the same sums, the same stable order, the same tolerances), so every
vector it keeps is the reference's, in the reference's order, to the bit. Where a join exceeds
the cap it raises the error the reference raises first (lane by lane, the start's join before the
link's).

Most tables keep one vector at every node of the cost model's features (1F1B and GPipe in
``overlap`` and ``blocking`` at every size), and many others do for their first waves: the loop
runs those waves with plain ``(n, J)`` arrays, each wave's lanes split in advance
(:func:`_run_single`), and hands over to the padded sets at the first join that keeps two.
"""

from __future__ import annotations

import numpy as np

from ppsweep.engine.envelope import _SAME, EnvelopeTooLarge, at_least
from ppsweep.engine.program import Program

#: Modes whose wave rules :func:`run_waves_batched` implements.
BATCHED_MODES = ("overlap", "blocking", "contention")

#: Fewest workers (lanes per wave) for which batching pays: with fewer, a wave's handful of
#: lanes cost less one by one than the batched wave's fixed number of array operations.
BATCHED_MIN_WORKERS = 8


class _Sets:
    """Sets of path vectors in one padded array: ``vals (n, K, J)``, the first ``count[i]`` rows valid."""

    def __init__(self, n: int, J: int) -> None:
        self.vals = np.zeros((n, 1, J))
        self.count = np.ones(n, dtype=np.int64)

    @classmethod
    def of_single(cls, vals: np.ndarray) -> "_Sets":
        """Sets of one vector each, ``vals (n, J)``."""
        sets = cls(vals.shape[0], vals.shape[1])
        sets.vals[:, 0] = vals
        return sets

    def width(self, K: int) -> None:
        """Make room for ``K`` rows per set."""
        if K > self.vals.shape[1]:
            pad = np.zeros((self.vals.shape[0], K - self.vals.shape[1], self.vals.shape[2]))
            self.vals = np.concatenate([self.vals, pad], axis=1)

    def put(self, index: np.ndarray, vals: np.ndarray, count: np.ndarray) -> None:
        """Replace the sets at ``index`` (distinct) with ``vals (k, K', J)``, ``count (k,)``."""
        self.width(vals.shape[1])
        self.vals[index, : vals.shape[1]] = vals
        self.count[index] = count

    def get(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(vals, count)`` of the sets at ``index``, as wide as their largest (a new array)."""
        count = self.count[index]
        return self.vals[index, : max(1, int(count.max(initial=1)))], count

    def as_list(self) -> list[np.ndarray]:
        """The sets as the reference keeps them: one ``(k_i, J)`` array each."""
        return [self.vals[i, :c].copy() for i, c in enumerate(self.count.tolist())]


def join_pairs(a: np.ndarray, na: np.ndarray, b: np.ndarray, nb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``prune(np.concatenate([A_i, B_i]))`` for every pair at once, without the cap check.

    :func:`ppsweep.engine.envelope.prune` with the same arithmetic: rows sorted by decreasing sum,
    stably (so ``A``'s rows before ``B``'s among equal sums), a row dropped where an earlier one
    is at least as large in every component within the rounding tolerance.

    Args:
      a, b: ``(k, Ka, J)`` and ``(k, Kb, J)`` padded sets; ``na``, ``nb``: valid rows of each.

    Returns:
      ``(vals (k, K, J), count (k,))``: the kept rows of each pair first, in the reference's order.
    """
    if a.shape[1] == 1 and b.shape[1] == 1:
        return _join_single(a[:, 0], b[:, 0])
    v = np.concatenate([a, b], axis=1)
    K = v.shape[1]
    index = np.arange(K)
    rows = np.concatenate([index[None, : a.shape[1]] < na[:, None], index[None, : b.shape[1]] < nb[:, None]], axis=1)
    keys = np.where(rows, -v.sum(axis=2), np.inf)  # padding sorts last
    order = np.argsort(keys, axis=1, kind="stable")
    pair = np.arange(v.shape[0])[:, None]
    v = v[pair, order]
    rows = rows[pair, order]
    tol = _SAME * np.where(rows[:, :, None], np.abs(v), 0.0).max(axis=1)  # (k, J)
    dom = at_least(v[:, :, None, :], v[:, None, :, :] - tol[:, None, None, :])  # dom[g, i, j]: i >= j
    dom &= rows[:, :, None]  # padding dominates nothing
    dom &= _upper(K)
    keep = rows & ~dom.any(axis=1)
    count = keep.sum(axis=1)
    width = max(1, int(count.max()))
    # Kept rows to the front, in order (dropped rows all land in the extra last row).
    dest = np.where(keep, np.cumsum(keep, axis=1) - 1, width)
    out = np.zeros((v.shape[0], width + 1, v.shape[2]))
    out[pair, dest] = v
    return out[:, :width], count


def _join_single(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`join_pairs` of one vector with one vector, ``a, b (k, J)``: the same steps, two rows each."""
    first, second, dropped = _order_pair(a, b)
    out = np.stack([first, second], axis=1)
    return out, np.where(dropped, 1, 2)


def _order_pair(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The prune of ``{a_i, b_i}`` for every pair, ``a, b (k, J)``: ``(first, second, dropped)``.

    The row with the larger sum comes first (``a`` on a tie); the second is dropped where the
    first is at least as large in every component within ``_SAME`` times the larger magnitude.
    """
    b_first = (b.sum(axis=1) > a.sum(axis=1))[:, None]
    first = np.where(b_first, b, a)
    second = np.where(b_first, a, b)
    tol = _SAME * np.maximum(np.abs(a), np.abs(b))
    dropped = at_least(first, second - tol)
    return first, second, dropped


_UPPER: dict[int, np.ndarray] = {}


def _upper(K: int) -> np.ndarray:
    """``(K, K)`` True strictly above the diagonal (row ``i`` before row ``j``)."""
    if K not in _UPPER:
        _UPPER[K] = np.triu(np.ones((K, K), dtype=bool), 1)
    return _UPPER[K]


def run_waves_batched(
    program: Program, mode: str, rows: np.ndarray, wire: np.ndarray, msg: np.ndarray, cap: int
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray], int]:
    """The wave loop of :func:`ppsweep.engine.envelope.build_envelope`, every lane of a wave at once.

    Args:
      program: the compiled table.
      mode: one of :data:`BATCHED_MODES`.
      rows: ``(4S, J)`` duration vector of each cost row.
      wire, msg: ``(J,)`` vectors of a message's wire time and of its whole time.
      cap: largest set kept at a node.

    Returns:
      ``(free, reg, resources, ready, largest)``: the sets after the last wave (as the
      reference's lists; ``resources`` as :mod:`ppsweep.engine.comm` numbers them: the links in
      ``contention``, none in ``overlap`` and ``blocking``) and the largest set kept by a join.

    Raises:
      EnvelopeTooLarge: the reference's error, where a join keeps more than ``cap`` vectors.
    """
    if mode not in BATCHED_MODES:
        raise ValueError(f"mode: batched waves handle {', '.join(BATCHED_MODES)}, got {mode!r}")
    waves = _WaveLanes(program, rows)
    first_wave, single = _run_single(program, mode, waves, wire, msg)
    free, reg, link, ready = (_Sets.of_single(a) for a in single)
    largest = 1
    contention, blocking = mode == "contention", mode == "blocking"
    for t in range(first_wave, program.n_waves):
        lanes, wait, send, sync = waves.lanes[t], waves.wait[t], waves.send[t], waves.sync[t]
        start, n_start = free.get(lanes)
        start_count = np.zeros(len(lanes), dtype=np.int64)
        if wait.size:
            joined, counts = join_pairs(start[wait], n_start[wait], *reg.get(waves.dep[t]))
            width = max(start.shape[1], joined.shape[1])
            start = _widen(start, width)
            start[wait] = _widen(joined, width)
            n_start = n_start.copy()
            n_start[wait] = counts
            start_count[wait] = counts
        end = start + waves.rows[t][:, None, :]
        go_count = np.zeros(len(lanes), dtype=np.int64)
        if contention and send.size:
            lk = waves.link[t]
            go, n_go = join_pairs(end[send], n_start[send], *link.get(lk))
            go_count[send] = n_go
        over = (start_count > cap) | (go_count > cap)
        if over.any():  # the reference's first error: lane by lane, the start's join before the link's
            i = int(np.flatnonzero(over)[0])
            count = start_count[i] if start_count[i] > cap else go_count[i]
            raise EnvelopeTooLarge(f"{int(count)} vectors at one node (cap {cap})")
        largest = max(largest, int(start_count.max(initial=0)), int(go_count.max(initial=0)))
        arrival = end + msg
        n_arrival = n_start
        if contention and send.size:
            link.put(lk, go + wire, n_go)
            arrival = _widen(arrival, go.shape[1])
            arrival[send] = _widen(go + msg, arrival.shape[1])
            n_arrival = n_start.copy()
            n_arrival[send] = n_go
        if send.size:
            reg.put(waves.out[t], arrival[send], n_arrival[send])
        if blocking and send.size:
            after = _widen(end, arrival.shape[1])
            after[send] = arrival[send]
            n_after = n_start.copy()
            n_after[send] = n_arrival[send]
            free.put(lanes, after, n_after)
        else:
            free.put(lanes, end, n_start)
        if sync.size:
            ready.put(waves.slot[t], end[sync], n_start[sync])
    resources = link.as_list()[: program.n_links] if contention else []  # ppsweep.engine.comm's resources of the mode
    return free.as_list(), reg.as_list(), resources, ready.as_list(), largest


class _WaveLanes:
    """Each wave's lanes and what they read and write, split by wave once (views per wave).

    Attributes (lists with one array per wave):
      lanes: the active workers; rows: their duration rows ``(n, J)``.
      wait, dep: positions (among the wave's lanes) of lanes that wait on a register, and it.
      send, out, link: positions of lanes that send a message, its register and its link.
      sync, slot: positions of lanes that end a synchronised stage's last backward, and its slot.
    """

    def __init__(self, program: Program, rows: np.ndarray):
        t, w = np.nonzero(program.active)  # wave-major, lanes in worker order (as np.flatnonzero)
        position = np.arange(t.size) - np.searchsorted(t, t)  # among the wave's lanes

        def split(mask: np.ndarray, values: np.ndarray) -> list[np.ndarray]:
            kept = values[mask]
            edges = np.searchsorted(t[mask], np.arange(program.n_waves + 1)).tolist()
            return [kept[a:b] for a, b in zip(edges[:-1], edges[1:])]

        dep, out = program.dep_reg[t, w], program.out_reg[t, w]
        link, slot = program.link[t, w], program.sync_slot[t, w]
        waits, sends, syncs = dep != program.zero_reg, out != program.trash_reg, slot != program.trash_sync
        every = np.ones(t.size, dtype=bool)
        self.lanes = split(every, w)
        self.rows = split(every, rows[program.cost_row[t, w]])
        self.wait, self.dep = split(waits, position), split(waits, dep)
        self.send, self.out, self.link = split(sends, position), split(sends, out), split(sends, link)
        self.sync, self.slot = split(syncs, position), split(syncs, slot)


def _run_single(
    program: Program, mode: str, waves: _WaveLanes, wire: np.ndarray, msg: np.ndarray
) -> tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The first waves of :func:`run_waves_batched`, while every set holds one vector.

    Most tables keep one vector at every node (and most others for many waves): their sets are
    then plain ``(n, J)`` arrays and a join is :func:`_order_pair` with the second row dropped,
    with none of the general loop's padding and counting, and each wave's lanes come split in
    advance (:class:`_WaveLanes`). Stops before the first wave where a join keeps two vectors,
    having written nothing of that wave.

    Returns:
      ``(wave, (free, reg, link, ready))``: the wave where the general loop takes over
      (``n_waves`` if none) and the vectors of each set before it.
    """
    J = wire.shape[0]
    free = np.zeros((program.p, J))
    reg = np.zeros((program.n_regs + 2, J))
    link = np.zeros((program.n_links + 1, J))
    ready = np.zeros((program.n_sync * program.p + 1, J))
    contention, blocking = mode == "contention", mode == "blocking"
    for t in range(program.n_waves):
        lanes, wait, send, sync = waves.lanes[t], waves.wait[t], waves.send[t], waves.sync[t]
        start = free[lanes]
        if wait.size:
            first, _, dropped = _order_pair(start[wait], reg[waves.dep[t]])
            if not dropped.all():
                return t, (free, reg, link, ready)
            start[wait] = first
        end = start + waves.rows[t]
        if send.size:
            if contention:
                lk = waves.link[t]
                go, _, dropped = _order_pair(end[send], link[lk])
                if not dropped.all():
                    return t, (free, reg, link, ready)
                link[lk] = go + wire
                arrival = go + msg
            else:
                arrival = end[send] + msg
            reg[waves.out[t]] = arrival
            if blocking:
                end_or_arrival = end.copy()
                end_or_arrival[send] = arrival
                free[lanes] = end_or_arrival
            else:
                free[lanes] = end
        else:
            free[lanes] = end
        if sync.size:
            ready[waves.slot[t]] = end[sync]
    return program.n_waves, (free, reg, link, ready)


def _widen(vals: np.ndarray, K: int) -> np.ndarray:
    """``vals (n, k, J)`` with at least ``K`` rows per set (zero rows added), as a new array."""
    if vals.shape[1] >= K:
        return vals.copy()
    return np.concatenate([vals, np.zeros((vals.shape[0], K - vals.shape[1], vals.shape[2]))], axis=1)
