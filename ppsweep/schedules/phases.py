"""Building blocks shared by the multi-chunk and zero-bubble schedules.

Each schedule module describes its own phases (warm-up, steady state, cool-down, …); the pieces
here are the parts several of them say in the same words:

- the two placements of ``v`` model chunks per worker: *looped* (Megatron, PyTorch
  ``style="loop"``: stage ``c·p + w`` on worker ``w``) and *V-shaped* (ZB-V, DualPipeV: stages
  ``w`` and ``2p-1-w`` on worker ``w``);
- the *round-robin over chunks* in which interleaved schedules take their forwards (chunk
  ``0, 1, …, v-1``, a round of ``r`` microbatches each) and their backwards (chunk ``v-1 … 0``);
- the *1F1B phases* (``warm-up`` forwards, then a forward and a backward at a time, then the
  remaining backwards), with the weight-gradient passes of a split backward trailing their
  input-gradient passes by a fixed lag (zero-bubble schedules).
"""

from __future__ import annotations

from typing import Any, Sequence

from ppsweep.tables.ops import Kind, Op


def check_int_option(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int, or a ValueError naming the option and what it accepts."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return int(value)


def looped_placement(p: int, v: int) -> list[int]:
    """Worker of each of the ``v·p`` stages when chunk ``c`` of worker ``w`` is stage ``c·p + w``."""
    return [s % p for s in range(v * p)]


def v_placement(p: int) -> list[int]:
    """Worker of each of the ``2p`` stages of a V: down workers ``0 … p-1``, then back up ``p-1 … 0``."""
    return [s if s < p else 2 * p - 1 - s for s in range(2 * p)]


def rounds_of(p: int, m: int) -> tuple[int, int]:
    """``(rounds, r)``: ``max(1, m // p)`` rounds of ``r = m // rounds`` microbatches each.

    This is PyTorch's relaxation of Megatron's ``m % p == 0``: a round has at least ``p``
    microbatches (or all of them when ``m < p``); it requires ``m % rounds == 0``.
    """
    rounds = max(1, m // p)
    return rounds, m // rounds


def round_robin(p: int, m: int, v: int, w: int, backward: bool) -> list[tuple[int, int]]:
    """``(stage, micro)`` of the ``k``-th forward (or backward) pass of worker ``w``, for all ``k``.

    Passes go round by round (``r`` microbatches each); within a round, the forwards visit the
    worker's chunks ``0 … v-1`` and the backwards ``v-1 … 0``, all ``r`` microbatches of a chunk
    before the next chunk.

    Args:
      p: workers. m: microbatches (a multiple of the number of rounds). v: chunks per worker.
      w: the worker. backward: the backward sequence instead of the forward one.

    Returns:
      ``v·m`` pairs ``(stage, micro)`` with the looped placement's stage numbers.
    """
    _, r = rounds_of(p, m)
    sequence = []
    for k in range(v * m):
        block, i = divmod(k, r)
        chunk = block % v
        if backward:
            chunk = v - 1 - chunk
        sequence.append((chunk * p + w, (k // (r * v)) * r + i))
    return sequence


def one_f_one_b(
    forwards: Sequence[Op], grads: Sequence[Op], warmup: int, weight_lag: int | None = None
) -> list[Op]:
    """A worker's order in the 1F1B phases.

    - **warm-up**: the first ``warmup`` forwards;
    - **steady state**: the next forward, then the next backward, until the forwards run out;
    - **cool-down**: the remaining backwards.

    With ``weight_lag`` set, ``grads`` are input-gradient passes (I) and the weight-gradient pass
    W of the ``n``-th one runs right after the ``(n + weight_lag)``-th I; the last ``weight_lag``
    W passes close the order.

    Args:
      forwards: the worker's forward passes in the order it takes them.
      grads: its backward (B or I) passes in order, as many as ``forwards``.
      warmup: forwards before the first backward (at most ``len(forwards)``).
      weight_lag: None for a full backward; else how many I passes each W trails by.

    Returns:
      The worker's order.
    """
    warmup = min(warmup, len(forwards))
    order = list(forwards[:warmup])
    pending_w: list[Op] = []

    def backward(n: int) -> None:
        order.append(grads[n])
        if weight_lag is None:
            return
        pending_w.append(Op(Kind.W, grads[n].micro, grads[n].stage))
        if n >= weight_lag:
            order.append(pending_w.pop(0))

    for n in range(len(grads)):
        if warmup + n < len(forwards):  # steady state: one forward, one backward
            order.append(forwards[warmup + n])
        backward(n)  # cool-down once the forwards are done
    order += pending_w
    return order
