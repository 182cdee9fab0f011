"""The paper's claims as data: what is measured, the paper's value, the comparison, the tolerance.

Every verdict in ``results/paper/REPORT.md`` is computed by :func:`ppsweep.paper.verdict.verdicts`
from this table and the measured numbers of :mod:`ppsweep.paper.findings`; the report's Setup
prints the table. A claim is measured over several *cases* (systems, p, m, …); each case passes or
fails its comparison; how the cases make a verdict is written in :mod:`ppsweep.paper.verdict` only.

Comparisons (``x`` the measured value of a case, ``v`` the paper's, ``tol`` the tolerance):

- ``≈``: ``|x − v| ≤ tol``; with a range ``(lo, hi)``: ``lo − tol ≤ x ≤ hi + tol``;
- ``≤``: ``x ≤ v + tol``;  ``≥``: ``x ≥ v − tol``;
- ``<``: ``x < v − tol``;  ``>``: ``x > v + tol`` (the tolerance is a margin to clear).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

#: The comm mode the verdicts are stated in. It is the mode in which GPipe and 1F1B are
#: runtime-equivalent, as the paper reports (claim 1a); the report shows the verdicts in the
#: other modes beside it.
PRIMARY_MODE = "blocking"
#: Hanayo's wave count in the sweep (Table I is judged with it; two waves are the alternative).
PRIMARY_WAVES = 1
#: Factors applied to every tolerance for the report's "tolerance ×½" and "×2" columns.
TOLERANCE_FACTORS = (0.5, 2.0)

COMPARISONS = ("≈", "≤", "≥", "<", ">")

Value = Union[float, tuple[float, float]]


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, stated once.

    Attributes:
      id: short name, e.g. ``"2c-gain"``.
      finding: the report's finding number (1 … 5).
      statement: the paper's claim in words.
      quantity: what ppsweep measures for each case, with its unit.
      cases: which cases the quantity is measured over.
      comparison: one of ``COMPARISONS``.
      paper: the paper's value or ``(lo, hi)`` range; or, per case label, a value, a range or
        None (no paper value: the case is not judged).
      tolerance: in the quantity's unit, >= 0.
      depends_on: the choices the measurement depends on: ``""`` (none), ``"mode"`` (comm mode)
        or ``"mode, waves"`` (comm mode and Hanayo's wave count).
    """

    id: str
    finding: int
    statement: str
    quantity: str
    cases: str
    comparison: str
    paper: Union[Value, Mapping[str, Union[Value, None]]]
    tolerance: float
    depends_on: str = ""

    def __post_init__(self) -> None:
        if self.comparison not in COMPARISONS:
            raise ValueError(f"Claim.comparison: must be one of {', '.join(COMPARISONS)}, got {self.comparison!r}")
        if not self.tolerance >= 0:
            raise ValueError(f"Claim.tolerance: must be >= 0, got {self.tolerance!r}")
        if self.depends_on not in ("", "mode", "mode, waves"):
            raise ValueError(f"Claim.depends_on: must be '', 'mode' or 'mode, waves', got {self.depends_on!r}")


#: Table I of the paper (Hanayo vs Chimera at p = m = 8, % step time; negative: Hanayo faster), as
#: far as public: about 12–14 % faster on fast and mid networks; +12.3 % on fast cp / slow nw;
#: −2.3 % on mid cp / slow nw; no figure for slow cp / slow nw.
TABLE1 = {
    "slow cp / slow nw": None,
    "slow cp / mid nw": (-14.0, -12.0),
    "slow cp / fast nw": (-14.0, -12.0),
    "mid cp / slow nw": -2.3,
    "mid cp / mid nw": (-14.0, -12.0),
    "mid cp / fast nw": (-14.0, -12.0),
    "fast cp / slow nw": 12.3,
    "fast cp / mid nw": (-14.0, -12.0),
    "fast cp / fast nw": (-14.0, -12.0),
}

CLAIMS: tuple[Claim, ...] = (
    Claim("1a", 1, "GPipe and 1F1B have the same step time on every system",
          "1F1B vs GPipe step time, %", "every system, p, m", "≈", 0.0, 3.0, "mode"),
    Claim("1b", 1, "1F1B has the lower activation-memory peak",
          "1F1B / GPipe activation peak of the bottleneck worker", "every p, m", "<", 1.0, 0.0),
    Claim("2a-formula", 2, "Chimera has the smallest bubble by formula",
          "Chimera's bubble by formula minus the smallest other schedule's, percentage points",
          "every p, m", "≤", 0.0, 1e-9),
    Claim("2a-table", 2, "Chimera has the smallest bubble by table",
          "Chimera's bubble by table (F = 1, B = 2 slots) minus the smallest other schedule's, percentage points",
          "every p, m", "≤", 0.0, 1e-9),
    Claim("2b", 2, "On network-limited systems Chimera is the slowest",
          "Chimera vs the slower of GPipe and 1F1B, % step time", "network-limited systems, every p, m",
          "≥", 0.0, 0.0, "mode"),
    Claim("2c-crossover", 2, "Chimera beats GPipe only at low microbatch counts, m ≲ 16–32",
          "largest m at which Chimera beats GPipe on some system", "each p", "≈", (16.0, 32.0), 0.0, "mode"),
    Claim("2c-fast", 2, "Chimera's win at low m is limited to fast networks",
          "Chimera vs GPipe at the smallest m, % step time (a case passes where Chimera does not win)",
          "systems without a fast network, each p", "≥", 0.0, 0.0, "mode"),
    Claim("2c-gain", 2, "Chimera's gain over GPipe is up to about 15 %",
          "largest gain of Chimera over GPipe, % step time", "each p", "≈", 15.0, 3.0, "mode"),
    Claim("2d", 2, "Above m ≈ 64 the schedules converge",
          "spread of GPipe, 1F1B, Chimera at m = 256 (slowest / fastest − 1), %", "every system, p",
          "≤", 0.0, 5.0, "mode"),
    Claim("2d-joined", 2, "Above m ≈ 64 the schedules converge (Chimera joining its units by doubled forwards)",
          "spread of GPipe, 1F1B and Chimera with the faster of forward doubling and backward halving at m = 256, %",
          "every system, p", "≤", 0.0, 5.0, "mode"),
    Claim("2e", 2, "On slow networks Chimera's step time rises with m",
          "Chimera's t(largest m) / t(m = 64) − 1, %", "slow-network systems, each p", ">", 0.0, 1.0, "mode"),
    Claim("3-formula", 3, "Chimera's bubble at p = 8, m = 16 is about 16 % by formula",
          "bubble by formula, %", "p = 8, m = 16", "≈", 16.0, 1.0),
    Claim("3-table", 3, "Chimera's bubble at p = 8, m = 16 is about 26 % by its table",
          "bubble by table (F = 1, B = 2 slots), %", "p = 8, m = 16", "≈", 26.0, 2.0),
    Claim("4-time", 4, "Table I: Hanayo vs Chimera at p = m = 8 (−12 … −14 % on fast/mid networks, "
          "+12.3 % fast cp / slow nw, −2.3 % mid cp / slow nw)",
          "Hanayo vs Chimera, % step time", "every system with a paper value", "≈", TABLE1, 2.0, "mode, waves"),
    Claim("4-idle-chimera", 4, "Table I: Chimera's idle ratio is about 35 % on fast and mid networks",
          "Chimera's idle_sim at p = m = 8, %", "systems with a fast or mid network", "≈", 35.0, 3.0, "mode, waves"),
    Claim("4-idle-hanayo", 4, "Table I: Hanayo's idle ratio is about 25 % on fast and mid networks",
          "Hanayo's idle_sim at p = m = 8, %", "systems with a fast or mid network", "≈", 25.0, 3.0, "mode, waves"),
    Claim("5-memory", 5, "Asymmetric Chimera (1:2) does not lower the peak memory",
          "bottleneck worker's peak memory, 1:2 / 1:1", "every p, m", "≥", 1.0, 1e-3),
    Claim("5-gain", 5, "Asymmetric Chimera (1:2) is about 5 % faster at p = 4 on a fast network",
          "Chimera 1:2 vs 1:1, % step time", "p = 4, fast-network systems, every m", "≈", -5.0, 2.0, "mode"),
    Claim("5-loss", 5, "Asymmetric Chimera (1:2) is slower at p = 8 with few microbatches",
          "Chimera 1:2 vs 1:1, % step time", "p = 8, m ≤ 16, every system", ">", 0.0, 0.0, "mode"),
)

BY_ID: dict[str, Claim] = {c.id: c for c in CLAIMS}
