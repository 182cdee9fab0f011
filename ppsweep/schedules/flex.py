"""``flex``: a parameterized family of 1F1B-like schedules, the space the schedule search explores (issue 28).

Every worker runs the **1F1B phases** (:func:`ppsweep.schedules.phases.one_f_one_b`'s: warm-up
forwards, then one forward and one backward, then the remaining backwards), with these options:

- ``warmup`` — forwards before a worker's first backward. An integer ``d >= 0``:
  worker ``w`` runs ``(v-1)·r + ceil(d·(p-1-w)/(p-1))`` (``r`` microbatches per round,
  :func:`~ppsweep.schedules.phases.rounds_of`), so ``d = p-1`` is 1F1B's (and ZB-H1's) depth and
  ``d = 2(p-1)`` ZB-H2's (``vee``: every worker ``(v-1)·r + d``, since its chunks' forwards flow
  both ways a depth that grows one way deadlocks); or ``p`` integers ``k0:k1:…`` >= 0, one per
  worker. Depths past ``v·m`` (all the forwards) count as ``v·m``.
  Default (None): ``p-1``.
- ``lag`` — W deferral: the weight-gradient pass W of a worker's ``n``-th input-gradient pass I
  runs once more than ``lag`` W passes wait (so it trails its I by ``lag`` backwards); the waiting
  W passes close the order. An integer ``L >= 0``: worker ``w`` defers
  ``ceil(L·w/(p-1))`` (``L = p-1``: ZB-H1's ``w``; 0: every W right after its I); or ``p``
  integers >= 0, one per worker (past ``v·m``: as ``v·m``, every W last). Default (None): ``p-1``. Ignored without ``split``.
- ``mem`` — per-worker activation limit, as the zero-bubble scheduler's ``mem_limit``: a worker
  never holds more than ``mem`` microbatches' activations of its stages (``mem·v`` chunk
  activations; an F stores one, its B frees it, or its I frees all but ``wshare`` percent — an
  integer in ``[0, 100]``, default 100 — and its W the rest: the zero-bubble paper's ``M_W/M_B``,
  its activations held from B to W). Before a forward that would pass the
  limit, the oldest waiting W passes run; where none waits, the forward waits for the next
  backward. Warm-up forwards stop at the limit. An integer in ``[1, m]``; 0 (default): no limit.
- ``split`` — backward split into I and W (True, default) or one B (False).
- ``fill`` — where the W passes go: ``lag`` (default: by ``lag`` and ``mem`` alone) or ``timed``:
  the list schedule of :mod:`ppsweep.schedules.flex_timed`, which plays the step at the nominal
  costs ``times = "F:I:W:C"`` (default ``1:1:1:0``) and runs a waiting W wherever the next pass
  would wait at least ``gap`` percent of ``T_W`` (an integer >= 0, default 100); ``warmup`` is then
  the most forwards before the first backward, ``lag`` and ``mem`` still force W passes.
- ``v`` — model chunks per worker, ``[1, 8]`` (default 1); ``shape`` — their placement for
  ``v >= 2``: ``loop`` (chunk ``c`` of worker ``w`` is stage ``c·p + w``, Megatron's) or ``vee``
  (odd chunks run back up the workers, stage ``c·p + p-1-w``: ZB-V's and DualPipeV's V for ``v = 2``).
  Forwards and backwards take the chunks round-robin as interleaved 1F1B does
  (:func:`~ppsweep.schedules.phases.round_robin`).

Special cases (tested equal, order for order): ``split=false@warmup=p-1`` is 1F1B;
``warmup=p-1@lag=p-1`` ZB-H1; ``warmup=2(p-1)@lag=2(p-1)`` ZB-H2 (the paper's parallelogram,
:mod:`ppsweep.schedules.zb_h2`) and ``warmup=2(p-1)@lag=p-1`` its trapezoid (``zb_h2@lag=1``); with
``v = 2``, ``split=false@warmup=2(p-1)`` interleaved 1F1B and ``warmup=p-1@lag=p-1`` interleaved
zero bubble.

**Operating range**: ``p >= 2``, ``m >= 1``, ``m`` a multiple of ``max(1, m // p)`` where ``v >= 2``
(the rule of interleaved 1F1B). An option outside its range is an unsupported point with a
one-line reason; an order that deadlocks (a worker waits for a backward whose forward its
neighbour has not yet run: e.g. a warm-up deeper on a later worker than on an earlier one) is
reported by the table builder (:class:`~ppsweep.tables.table.OrderDeadlockError`, one line).

**Formulas**: none (NaN); the tables give the bubble and the peak activations.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ppsweep.schedules.base import (
    Schedule,
    ScheduleOrder,
    no_formula,
    one_replica_layout,
)
from ppsweep.schedules.flex_timed import parse_times, timed_orders
from ppsweep.schedules.phases import looped_placement, round_robin, rounds_of
from ppsweep.tables.ops import Kind, Op

NAME = "flex"
#: Options and their defaults (None: the 1F1B/ZB-H1 values, see the module docstring).
DEFAULTS: dict[str, Any] = {"warmup": None, "lag": None, "mem": 0, "split": True, "v": 1, "shape": "loop",
                            "fill": "lag", "times": "1:1:1:0", "gap": 100, "wshare": 100}
SHAPES = ("loop", "vee")
FILLS = ("lag", "timed")
MAX_V = 8
#: Largest ``gap`` and ``wshare`` the config takes (percents; ``wshare`` is then checked to be at most 100).
MAX_PERCENT = 10_000


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"flex: option {name} must be an integer, got {value!r}")
    return int(value)


def _per_worker(name: str, value: Any, p: int, default: int, rule: Any) -> list[int] | str:
    """``p`` per-worker values of ``warmup``/``lag`` (an int through ``rule``, or ``k0:k1:…``), or the reason they are not."""
    if value is None:
        value = default
    if isinstance(value, str):
        parts = value.split(":")
        try:
            values = [int(x) for x in parts]
        except ValueError:
            raise ValueError(f"flex: option {name} must be an integer or {p} integers k0:k1:..., got {value!r}") from None
        if len(values) != p:
            return f"option {name} lists {len(values)} workers, p = {p}"
        return values
    d = _int(name, value)
    return [rule(d, w) for w in range(p)]


def resolve(p: int, m: int, **options: Any) -> dict[str, Any] | str:
    """The options made explicit (per-worker ``warmup`` and ``lag`` lists), or the one-line reason they cannot run.

    Raises:
      ValueError: an option of the wrong type or an unknown option, naming it and what it accepts.
    """
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"flex: unknown option {unknown[0]!r}; accepted: {', '.join(DEFAULTS)}")
    o = {**DEFAULTS, **options}
    v, mem = _int("v", o["v"]), _int("mem", o["mem"])
    if not isinstance(o["split"], bool):
        raise ValueError(f"flex: option split must be true or false, got {o['split']!r}")  # noqa: TRY004 - bad input is a ValueError here
    if o["shape"] not in SHAPES:
        raise ValueError(f"flex: option shape must be one of {', '.join(SHAPES)}, got {o['shape']!r}")
    if o["fill"] not in FILLS:
        raise ValueError(f"flex: option fill must be one of {', '.join(FILLS)}, got {o['fill']!r}")
    times, gap = parse_times(o["times"]), _int("gap", o["gap"])
    if not 1 <= v <= MAX_V:
        return f"option v must be in [1, {MAX_V}], got {v}"
    if not (mem == 0 or 1 <= mem <= m):
        return f"option mem must be 0 (no limit) or in [1, m={m}], got {mem}"
    rounds, r = rounds_of(p, m)
    if v > 1 and m % rounds:
        return f"m must be a multiple of its number of rounds max(1, m // p) = {rounds} where v >= 2, got {m}"
    base = (v - 1) * r
    # vee: chunk 0's forwards flow down the workers and chunk 1's back up, so no depth that grows one
    # way can be kept without a deadlock: every worker gets the same depth.
    slope = (lambda d, w: d) if o["shape"] == "vee" and v > 1 else (lambda d, w: -(-d * (p - 1 - w) // (p - 1)))
    warmup = _per_worker("warmup", o["warmup"], p, p - 1, lambda d, w: base + slope(d, w))
    lag = _per_worker("lag", o["lag"], p, p - 1, lambda d, w: -(-d * w // (p - 1)))
    for name, values in (("warmup", warmup), ("lag", lag)):
        if isinstance(values, str):
            return values
        bad = [x for x in values if x < 0]
        if bad:
            return f"option {name} must give every worker a value >= 0, got {bad[0]}"
    warmup, lag = ([min(x, v * m) for x in values] for values in (warmup, lag))  # v*m: all of them
    if gap < 0:
        return f"option gap must be >= 0 (percent of T_W), got {gap}"
    wshare = _int("wshare", o["wshare"])
    if not 0 <= wshare <= 100:
        return f"option wshare must be in [0, 100] (percent of an activation kept from I to W), got {wshare}"
    return {"warmup": warmup, "lag": lag, "mem": mem * v if mem else 0, "split": o["split"], "v": v, "shape": o["shape"],
            "fill": o["fill"], "times": times, "gap": gap / 100, "wshare": wshare / 100}


def why_unsupported(p: int, m: int, **options: Any) -> str | None:
    """None where the options can run at ``(p, m)``, else the one-line reason (bad types raise)."""
    resolved = resolve(p, m, **options)
    return resolved if isinstance(resolved, str) else None


def placement(p: int, v: int, shape: str) -> list[int]:
    """Worker of each of the ``v·p`` stages: looped, or a zigzag whose odd chunks run back up (``vee``)."""
    if shape == "loop":
        return looped_placement(p, v)
    return [s % p if (s // p) % 2 == 0 else p - 1 - s % p for s in range(v * p)]


def _stage(p: int, looped_stage: int, shape: str) -> int:
    """The stage the ``shape`` placement puts where the looped one has ``looped_stage`` (same chunk, same worker)."""
    chunk, w = divmod(looped_stage, p)
    return looped_stage if shape == "loop" or chunk % 2 == 0 else chunk * p + p - 1 - w


def worker_order(forwards: list[Op], grads: list[Op], warmup: int, lag: int, cap: int, wshare: float = 1.0) -> list[Op]:
    """One worker's order in the 1F1B phases with a W deferral and an activation limit.

    Args:
      forwards: the worker's forwards in order. grads: its backwards (B, or I where split) in order.
      warmup: forwards before the first backward. lag: most W passes left waiting after an I
        (ignored for full backwards). cap: most activations held (0: no limit). wshare: share of an
        activation held from an I to its W.

    Returns:
      The order: warm-up; then one forward (unless the limit holds it back) and one backward, each
      I followed by the oldest waiting W passes beyond ``lag``; the waiting W passes last.
    """
    order: list[Op] = []
    waiting: deque[Op] = deque()
    held, n_f = 0.0, 0
    limit = (cap or len(forwards) + 1) + 1e-9

    def forward() -> None:
        nonlocal held, n_f
        order.append(forwards[n_f])
        held, n_f = held + 1, n_f + 1

    def weight() -> None:
        nonlocal held
        order.append(waiting.popleft())
        held -= wshare

    while n_f < min(warmup, len(forwards)) and held + 1 <= limit:
        forward()
    for grad in grads:
        if n_f < len(forwards):
            while held + 1 > limit and waiting:
                weight()
            if held + 1 <= limit:
                forward()
        order.append(grad)
        if grad.kind == Kind.B:
            held -= 1
            continue
        held -= 1 - wshare
        waiting.append(Op(Kind.W, grad.micro, grad.stage))
        while len(waiting) > lag:
            weight()
    while waiting:
        weight()
    return order


def build_order(p: int, m: int, **options: Any) -> ScheduleOrder:
    """Per-worker orders of ``flex`` with ``options`` (module docstring).

    Raises:
      ValueError: options that cannot run (the one-line reason of :func:`why_unsupported`).
    """
    o = resolve(p, m, **options)
    if isinstance(o, str):
        raise ValueError(f"flex at p={p}, m={m}: {o}")  # noqa: TRY004 - o is the reason
    v, shape = o["v"], o["shape"]
    grad_kind = Kind.I if o["split"] else Kind.B
    forwards = [[Op(Kind.F, j, _stage(p, s, shape)) for s, j in round_robin(p, m, v, w, backward=False)] for w in range(p)]
    grads = [[Op(grad_kind, j, _stage(p, s, shape)) for s, j in round_robin(p, m, v, w, backward=True)] for w in range(p)]
    if o["fill"] == "timed":
        chunk_times = tuple(x / v for x in o["times"][:3]) + (o["times"][3],)
        orders = timed_orders(forwards, grads, o["warmup"], o["lag"], o["mem"], chunk_times, o["gap"], v * p,
                              o["split"], placement(p, v, shape), o["wshare"])
    else:
        orders = [worker_order(forwards[w], grads[w], o["warmup"][w], o["lag"][w], o["mem"], o["wshare"]) for w in range(p)]
    orders = tuple(tuple(row) for row in orders)
    layout = one_replica_layout(p, m, v * p, placement(p, v, shape))
    given = {key: value for key, value in options.items() if value != DEFAULTS[key]}
    return ScheduleOrder(NAME, p, m, v * p, orders, split_backward=o["split"], options=given, **layout)


SCHEDULE = Schedule(
    name=NAME,
    build_order=build_order,
    why_unsupported=why_unsupported,
    bubble_formula=no_formula,
    peak_activations_formula=no_formula,
    option_names=dict(DEFAULTS),
    description="1F1B family for schedule search: per-worker warm-up, W deferral, memory limit, chunks (loop/vee)",
    option_bounds={"gap": MAX_PERCENT, "wshare": MAX_PERCENT},  # percents: the table does not grow with them
)
