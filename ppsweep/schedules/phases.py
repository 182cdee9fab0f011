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

import numpy as np

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


# ---------------------------------------------------------------------------------------------
# The same building blocks as arrays, every worker at once (the generators' ``build_order``; the
# functions above stay the readable references the tests compare them with).


def round_robin_arrays(p: int, m: int, v: int, backward: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`round_robin` of every worker at once: ``(stage (p, v·m), micro (v·m,))``."""
    _, r = rounds_of(p, m)
    k = np.arange(v * m)
    chunk = (k // r) % v
    if backward:
        chunk = v - 1 - chunk
    micro = (k // (r * v)) * r + k % r
    return chunk[None, :] * p + np.arange(p)[:, None], micro


def one_f_one_b_positions(n: int, warmup: np.ndarray, weight_lag: np.ndarray | None = None) -> np.ndarray:
    """Where :func:`one_f_one_b` puts each pass, every worker at once.

    Worker ``w`` takes ``warmup[w]`` forwards, then steady blocks ``s = 0, 1, …``: the forward
    ``warmup + s`` (while forwards last), the backward ``s``, and, with a ``weight_lag`` ``L``, the
    weight pass ``s - L`` (once ``s >= L``); the last ``L`` weight passes close the order. Counting
    the passes before each one gives its position:

    - forward ``j < warmup``: ``j``; forward ``warmup + s``: ``warmup + 2s + max(0, s - L)``;
    - backward ``s``: ``warmup + min(s + 1, n - warmup) + s + max(0, s - L)``;
    - weight ``j < n - L``: right after the backward ``j + L``; weight ``j >= n - L``: ``2n + j``.

    Args:
      n: forwards (= backwards) per worker.
      warmup: ``(p,)`` forwards before the first backward (clipped to ``n``).
      weight_lag: ``(p,)`` lag ``L`` of each worker's weight passes, or None for full backwards.

    Returns:
      ``(p, k, n)`` position of the ``j``-th forward (``[:, 0]``), backward (``[:, 1]``) and, with a
      lag, weight pass (``[:, 2]``) in the worker's order.
    """
    warmup = np.minimum(np.asarray(warmup, dtype=np.int64), n)[:, None]
    lag = None if weight_lag is None else np.asarray(weight_lag, dtype=np.int64)[:, None]
    j = np.arange(n)[None, :]

    def weights_before(s: np.ndarray) -> np.ndarray:  # weight passes in the steady blocks before block s
        return 0 if lag is None else np.maximum(0, s - lag)

    s = j - warmup
    forward = np.where(j < warmup, j, warmup + 2 * s + weights_before(s))
    grad = warmup + np.minimum(j + 1, n - warmup) + j + weights_before(j)
    if lag is None:
        return np.stack([forward, grad], axis=1)
    trailing = np.take_along_axis(grad, np.minimum(j + lag, n - 1), axis=1) + 1
    weight = np.where(j < n - lag, trailing, 2 * n + j)
    return np.stack([forward, grad, weight], axis=1)


def place(positions: np.ndarray, *fields: np.ndarray) -> list[np.ndarray]:
    """Each field, ``(p, k, n)`` (broadcast), moved to its ``positions`` in its worker's row: ``(p, k·n)`` arrays."""
    p = positions.shape[0]
    rows = np.arange(p)[:, None]
    out = []
    for field in fields:
        grid = np.empty((p, positions[0].size), dtype=np.int64)
        grid[rows, positions.reshape(p, -1)] = np.broadcast_to(field, positions.shape).reshape(p, -1)
        out.append(grid)
    return out


def phase_tokens(patterns: Sequence[Sequence[int]], counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every worker's order as tokens: phase by phase, each phase's pattern repeated.

    Args:
      patterns: ``patterns[k]`` the tokens (small ints) of one repetition of phase ``k``.
      counts: ``(p, phases)`` repetitions of each phase on each worker (negative: none).

    Returns:
      ``(lengths (p,), token (sum(lengths),))``: worker 0's tokens first.
    """
    width = max(len(pattern) for pattern in patterns)
    table = np.full((len(patterns), width), -1, dtype=np.int64)
    for k, pattern in enumerate(patterns):
        table[k, : len(pattern)] = pattern
    size = np.array([len(pattern) for pattern in patterns], dtype=np.int64)
    segment = (np.maximum(np.asarray(counts, dtype=np.int64), 0) * size[None, :]).reshape(-1)  # (worker, phase)
    phase = np.tile(np.arange(len(patterns)), counts.shape[0])
    first = np.cumsum(segment) - segment
    within = np.arange(int(segment.sum())) - np.repeat(first, segment)
    phase_of = np.repeat(phase, segment)
    return segment.reshape(counts.shape).sum(axis=1), table[phase_of, within % size[phase_of]]


def running_count(lengths: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """For each position, how many earlier positions of the same worker are flagged.

    Args:
      lengths: ``(p,)`` positions of each worker (worker 0's first). flags: ``(sum(lengths),)`` bool.
    """
    before = np.cumsum(flags) - flags
    first = np.cumsum(lengths) - lengths
    start = np.concatenate([before, [0]])[first]  # the count at each worker's first position
    return before - np.repeat(start, lengths)
