"""An opt-in tally of where the compiled scan spends its waves (``scripts/scan_profile.py``).

Inside :func:`tallied`, every run of the compiled scan (:func:`ppsweep.engine.core._run_native`)
adds its figures under its table's schedule, ``p`` and mode: how many waves × points its table has,
how many the loop computed (the periodic scan steps over the rest), how many steps over a run its
points took, and the loop's seconds. Outside it, a scan pays one check of a module variable.
Nothing here changes a result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from dataclasses import dataclass
from typing import Iterator

import numpy as np


@dataclass
class ScanTally:
    """One key's figures, summed over its scans.

    Attributes:
      scans: runs of the compiled scan (a table × mode × grid).
      seconds: wall seconds in the compiled loop, summed over the threads that ran it.
      wave_points: the table's waves × the points scanned.
      scanned: the waves × points the loop computed (``native_scan.WAVE_POINTS``).
      points: the points scanned.
      stepped: steps over a run, one a point and run (``native_scan.STEPPED``; a table with two runs
        counts a point that steps over both twice).
    """

    scans: int = 0
    seconds: float = 0.0
    wave_points: int = 0
    scanned: int = 0
    points: int = 0
    stepped: int = 0

    def add(self, other: "ScanTally") -> None:
        """Add ``other``'s figures to these, field by field."""
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


_LOCK = threading.Lock()
_ACTIVE: dict[tuple[str, int, str], ScanTally] | None = None


@contextlib.contextmanager
def tallied() -> Iterator[dict[tuple[str, int, str], ScanTally]]:
    """Tally every compiled scan of this process while the block runs, by ``(schedule, p, mode)``.

    Yields:
      The tally, filled as scans run (read it after the block).
    """
    global _ACTIVE
    with _LOCK:
        if _ACTIVE is not None:
            raise RuntimeError("scan_tally.tallied() is already active in this process")
        _ACTIVE = {}
        tally = _ACTIVE
    try:
        yield tally
    finally:
        with _LOCK:
            _ACTIVE = None


def active() -> bool:
    """Whether a :func:`tallied` block is running."""
    return _ACTIVE is not None


def record(key: tuple[str, int, str], seconds: float, n_waves: int, points: int, counts: np.ndarray) -> None:
    """Add one run of the compiled scan over ``points`` points of a table of ``n_waves`` waves
    (``counts``: the sum of :func:`ppsweep.engine.native_scan.run_points`'s over its ranges) under
    ``key``; nothing outside :func:`tallied`."""
    from ppsweep.engine.native_scan import STEPPED, WAVE_POINTS

    scan = ScanTally(1, seconds, n_waves * points, int(counts[WAVE_POINTS]), points, int(counts[STEPPED]))
    with _LOCK:
        if _ACTIVE is not None:
            _ACTIVE.setdefault(key, ScanTally()).add(scan)
