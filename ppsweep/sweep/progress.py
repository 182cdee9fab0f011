"""Progress of a sweep's units of work: a bar with ETA on a terminal, one line per unit otherwise.

On a terminal (the stream's ``isatty()``), a tqdm bar redrawn in place::

    sweep  40%|████████          | 4/10 units [00:03<00:05 ETA, p=8 m=12, 3,840 points/s]

Anywhere else (a log file, a SLURM job's output, a pipe), one line per finished unit, so that
logs stay readable::

    [4/10] p=8 m=12  5,120 points, 3,840 points/s, ETA 5 s

The ETA is the mean time per finished unit times the units left (units differ in cost, so it is
a rough guide).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def format_duration(seconds: float) -> str:
    """A duration for people: ``42 s``, ``3 min 20 s``, ``2 h 05 min``."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    """Reports finished units of a run: a tqdm bar on a terminal, else one line per unit.

    Args:
      total: units this run computes.
      points_per_unit: grid points in one unit (for the points/s figure).
      stream: where to write (default stderr).
      bar: force the bar (True) or lines (False); default: a bar when ``stream`` is a terminal.
    """

    def __init__(self, total: int, points_per_unit: int, stream: TextIO | None = None, bar: bool | None = None) -> None:
        self.total = int(total)
        self.points_per_unit = int(points_per_unit)
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.start = time.perf_counter()
        if bar is None:
            isatty = getattr(self.stream, "isatty", None)
            bar = bool(isatty and isatty())
        self._bar = None
        if bar:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total, unit="unit", file=self.stream, desc="sweep", dynamic_ncols=True,
                bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} units [{elapsed}<{remaining} ETA{postfix}]",
            )

    def advance(self, label: str) -> None:
        """One more unit finished; ``label`` names it (e.g. ``p=8 m=12``)."""
        self.done += 1
        elapsed = time.perf_counter() - self.start
        points = self.done * self.points_per_unit
        rate = points / elapsed if elapsed > 0 else float("inf")
        if self._bar is not None:
            self._bar.set_postfix_str(f"{label}, {rate:,.0f} points/s", refresh=False)
            self._bar.update(1)
            return
        eta = elapsed / self.done * (self.total - self.done)
        print(
            f"[{self.done}/{self.total}] {label}  {points:,} points, {rate:,.0f} points/s, ETA {format_duration(eta)}",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        """End the bar (a no-op for lines)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


__all__ = ["Progress", "format_duration"]
