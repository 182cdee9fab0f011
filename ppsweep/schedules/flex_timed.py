"""The timed fill of :mod:`ppsweep.schedules.flex` (``fill=timed``): orders built by playing the step at nominal costs.

The zero-bubble scheduler (Qi et al., ICLR 2024, section 3.1) places the weight-gradient passes W
where the pipeline would otherwise wait, knowing ``T_F``, ``T_B``, ``T_W`` and ``T_comm``. This is
the same idea as a list scheduler over the 1F1B phases, written for ppsweep:

- every worker runs its forwards and backwards (I, or B) in its 1F1B order: ``warmup`` forwards
  (at most), then one forward and one backward alternately, as :func:`ppsweep.schedules.flex.worker_order`;
- the worker whose clock is earliest decides next. Its next pass (the forward or the backward the
  alternation asks for) runs as soon as its inputs arrive; where it would wait at least
  ``gap``·``T_W`` (``gap`` in percent) and a W waits, the oldest W runs first — and a W runs
  regardless once more than ``lag`` wait, or before a forward that would pass the ``mem`` limit;
- an input not yet computed arrives no earlier than its producer's clock plus its duration and
  one message; where the next pass's input is not computed yet but the other kind's is, that one
  runs first (the alternation would otherwise wait on a neighbour its memory limit holds back);
  a worker that cannot tell yet waits for the next decision elsewhere;
- the W passes left close the order.

Times are nominal, per stage of a whole worker (``times = "F:I:W:C"``; chunks take ``1/v`` of
them, a message ``C`` between different workers); only the order is kept — the engine then
times it at the real costs. Where every worker waits for an input that nobody will compute, the
options deadlock: :class:`~ppsweep.tables.table.OrderDeadlockError`, one line.
"""

from __future__ import annotations

from collections import deque

from ppsweep.tables.ops import Kind, Op, dependencies


def parse_times(text: str) -> tuple[float, float, float, float]:
    """``(F, I, W, C)`` from ``"F:I:W:C"`` (non-negative numbers, F, I and W > 0).

    Raises:
      ValueError: naming the option ``times`` and the accepted form.
    """
    try:
        values = tuple(float(x) for x in str(text).split(":"))
    except ValueError:
        values = ()
    if len(values) != 4 or min(values) < 0 or min(values[:3]) <= 0:
        raise ValueError(f"flex: option times must be F:I:W:C (F, I, W > 0, C >= 0), got {text!r}")
    return values  # type: ignore[return-value]


def timed_orders(
    forwards: list[list[Op]],
    grads: list[list[Op]],
    warmup: list[int],
    lag: list[int],
    cap: int,
    times: tuple[float, float, float, float],
    gap: float,
    n_stages: int,
    split: bool,
    worker_of: list[int],
    wshare: float = 1.0,
) -> list[list[Op]]:
    """Every worker's order by the list schedule of the module docstring.

    Args:
      forwards, grads: each worker's forwards and backwards (I or B) in 1F1B order.
      warmup: most forwards before each worker's first backward. lag: most W left waiting per worker.
      cap: most activations a worker holds (0: none). times: nominal ``(F, I, W, C)`` of one pass of
        one stage. gap: the shortest wait, in ``T_W``, that a W fills. n_stages: stages ``S``.
      split: backwards split into I and W. worker_of: worker of each stage. wshare: share of an
        activation held from an I to its W (the rest is freed by the I).

    Returns:
      The orders.

    Raises:
      OrderDeadlockError: when every worker waits for an input nobody computes.
    """
    p = len(forwards)
    t_f, t_i, t_w, t_c = times
    duration = {Kind.F: t_f, Kind.I: t_i, Kind.W: t_w, Kind.B: t_i + t_w}
    finish: dict[Op, float] = {}
    clock = [0.0] * p
    n_f, n_g, held = [0] * p, [0] * p, [0.0] * p
    want_forward = [True] * p
    waiting: list[deque[Op]] = [deque() for _ in range(p)]
    orders: list[list[Op]] = [[] for _ in range(p)]
    limit = (cap or 1 << 30) + 1e-9
    blocked = [False] * p

    def arrival(op: Op, w: int) -> tuple[float, bool]:
        """When ``op``'s inputs are all at worker ``w`` (known), or a lower bound (not known)."""
        when, known = 0.0, True
        for dep in dependencies(op, n_stages, split):
            hop = t_c if worker_of[dep.stage] != w else 0.0
            if dep in finish:
                when = max(when, finish[dep] + hop)
            else:
                producer = worker_of[dep.stage]
                when, known = max(when, clock[producer] + duration[dep.kind] + hop), False
        return when, known

    def run(w: int, op: Op, start: float) -> None:
        clock[w] = start + duration[op.kind]
        finish[op] = clock[w]
        orders[w].append(op)
        if op.kind == Kind.F:
            held[w] += 1
            n_f[w] += 1
        elif op.kind == Kind.W:
            held[w] -= wshare
        else:
            n_g[w] += 1
            if op.kind == Kind.I:
                waiting[w].append(Op(Kind.W, op.micro, op.stage))
                held[w] -= 1 - wshare
            else:
                held[w] -= 1

    def next_f_allowed(w: int) -> bool:
        return n_f[w] < len(forwards[w]) and held[w] + 1 <= limit

    def next_pass(w: int) -> Op | None:
        """The forward or backward worker ``w``'s 1F1B order asks for now (None: only W left)."""
        can_f = next_f_allowed(w)
        can_g = n_g[w] < len(grads[w])
        if n_g[w] == 0 and n_f[w] < warmup[w] and can_f:
            return forwards[w][n_f[w]]
        if can_f and (want_forward[w] or not can_g):
            return forwards[w][n_f[w]]
        return grads[w][n_g[w]] if can_g else None

    remaining = sum(len(f) + len(g) for f, g in zip(forwards, grads))
    while remaining or any(waiting):
        free = [w for w in range(p) if not blocked[w] and (n_f[w] + n_g[w] < len(forwards[w]) + len(grads[w]) or waiting[w])]
        if not free:
            from ppsweep.tables.table import (
                OrderDeadlockError,  # here: tables import the schedules
            )

            stuck = "; ".join(f"worker {w} waits at {next_pass(w)}" for w in range(p) if blocked[w])
            raise OrderDeadlockError(f"schedule 'flex' (fill=timed) deadlocks: {stuck}")
        w = min(free, key=lambda x: (clock[x], x))
        t = clock[w]
        op = next_pass(w)
        must_w = waiting[w] and (len(waiting[w]) > lag[w] or op is None
                                 or (op.kind == Kind.F and held[w] + 1 > limit))
        if op is not None and op.kind == Kind.F and held[w] + 1 > limit and not waiting[w]:
            op = grads[w][n_g[w]] if n_g[w] < len(grads[w]) else None
        if must_w:
            run(w, waiting[w].popleft(), t)
        else:
            when, known = arrival(op, w)
            if known and when <= t:
                start = t
            elif waiting[w] and when - t >= gap * t_w:
                run(w, waiting[w].popleft(), t)
                blocked = [False] * p
                continue
            elif known:
                start = when
            else:
                # its input is not computed yet: the other pass, if its inputs are known (1F1B's
                # alternation would otherwise wait on a neighbour held back by its memory limit)
                if op.kind == Kind.F:
                    other = grads[w][n_g[w]] if n_g[w] < len(grads[w]) else None
                else:
                    other = forwards[w][n_f[w]] if next_f_allowed(w) else None
                when, known = arrival(other, w) if other is not None and other != op else (0.0, False)
                if not known:
                    blocked[w] = True
                    continue
                op, start = other, max(t, when)
            run(w, op, start)
            remaining -= 1
            if n_g[w] > 0 or n_f[w] > warmup[w]:  # past the warm-up: the passes alternate
                want_forward[w] = op.kind != Kind.F
        blocked = [False] * p
    return orders
