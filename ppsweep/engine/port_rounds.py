"""``ports``: the order in which each port takes its messages, as one compiled walk over a program's sends.

The rule is :func:`ppsweep.engine.comm.route`'s (README "Timing rules", ``ports``): within a wave
the scan takes its messages by (end slot, sender); a receiver's ingress port takes the messages of
one wave in that order, so a message's round is the number of messages of its wave before it that
go to the same receiver; and the scan can follow the table's send order only where every port
takes its messages in non-decreasing end slot. Sorting every message by (wave, end, sender) and
then by port took the largest tables of the design sweep about 90 ms each; a wave holds at most
one message per worker, so this walk sorts each wave on its own (a few dozen messages, nearly in
order already) and counts as it goes.
"""

from __future__ import annotations

import numba
import numpy as np

from ppsweep.small_inputs import compiled_unless_small


@numba.njit(cache=True, nogil=True)
def _walk(wave, end, egress, ingress, rounds):
    """:func:`port_rounds`' loop: fills ``rounds`` and returns ``(bad, before)`` (``-1, -1``: no
    port takes a message before an earlier-ending one)."""
    n = wave.shape[0]
    n_ports = 1  # the highest port, by a loop: numba compiles an array's max() in 0.4 s
    for i in range(n):
        n_ports = max(n_ports, egress[i] + 1, ingress[i] + 1)
    last_end = np.zeros((2, n_ports), dtype=np.int64)
    last_message = np.full((2, n_ports), -1, dtype=np.int64)
    count = np.zeros(n_ports, dtype=np.int64)
    counted_in = np.full(n_ports, -1, dtype=np.int64)  # the wave each ingress port's count is for
    order = np.empty(n, dtype=np.int64)
    lo = 0
    while lo < n:
        hi = lo
        while hi < n and wave[hi] == wave[lo]:
            hi += 1
        # the wave's messages by end slot, stably (they arrive by sender): insertion sort
        for i in range(lo, hi):
            j = i
            while j > lo and end[order[j - 1]] > end[i]:
                order[j] = order[j - 1]
                j -= 1
            order[j] = i
        for q in range(lo, hi):
            i = order[q]
            for side in range(2):
                port = egress[i] if side == 0 else ingress[i]
                if last_message[side, port] >= 0 and end[i] < last_end[side, port]:
                    return i, last_message[side, port]
                last_end[side, port] = end[i]
                last_message[side, port] = i
            port = ingress[i]
            if counted_in[port] != wave[i]:
                counted_in[port] = wave[i]
                count[port] = 0
            rounds[i] = count[port]
            count[port] += 1
        lo = hi
    return -1, -1


def port_rounds(wave: np.ndarray, end: np.ndarray, egress: np.ndarray, ingress: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Each message's round at its receiver's ingress port, and the first message a port would take
    out of end-slot order.

    Args:
      wave, end: ``(k,)`` int64, each message's wave and its producer's end slot, the messages by
        wave and then sender (``np.nonzero`` order of the program's lanes).
      egress, ingress: ``(k,)`` int64, the sender's egress port and the receiver's ingress port.

    Returns:
      ``(rounds, bad, before)``: ``rounds[i]``, the number of messages of ``i``'s wave before it in
      (end slot, sender) order that go to the same receiver; ``bad``, the first message in the
      scan's order (wave, end slot, sender) that a port (its egress first, then its ingress) takes
      after one that ends later, ``before``, that one (``-1, -1``: none).
    """
    rounds = np.empty(wave.shape[0], dtype=np.int64)
    if wave.shape[0] == 0:
        return rounds, -1, -1
    walk = compiled_unless_small(_walk, wave.shape[0])
    bad, before = walk(*(np.ascontiguousarray(a, dtype=np.int64) for a in (wave, end, egress, ingress)), rounds)
    return rounds, int(bad), int(before)
