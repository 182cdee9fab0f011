"""Every verdict of the paper report, computed from the claims table and the measured numbers.

:func:`verdicts` is the only place where a verdict is decided; :func:`conclusion` only sorts its
output into the report's closing lists. No other module writes verdict words.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ppsweep.paper.claims import PRIMARY_MODE, TOLERANCE_FACTORS, Claim

AGREES = "agrees"
PARTLY = "partly agrees"
DISAGREES = "does not agree"
#: The rule, in words, for the report.
RULE = (f"a claim **{AGREES}** where every case passes, **{PARTLY}** where some do (the count is shown), "
        f"and **{DISAGREES}** where none does.")


def verdicts(
    claims: Sequence[Claim],
    measured: Mapping[str, Mapping[str, pd.Series]],
    primary: str = PRIMARY_MODE,
    factors: Sequence[float] = TOLERANCE_FACTORS,
) -> pd.DataFrame:
    """The verdict of every claim, under the primary choice and under each alternative.

    A case passes where its measured value satisfies the claim's comparison with the paper's value
    within the tolerance (``ppsweep.paper.claims``); NaN never passes. The claim agrees where
    every case passes, partly agrees where some do, and does not agree where none does.

    Args:
      claims: the claims table.
      measured: per claim id, per choice key, the measured value of each case (a Series indexed by
        case label). The choice key is ``""`` for a claim that depends on no choice, the comm mode
        for one that depends on the mode, and ``"<mode>"`` or ``"<mode>, W = <waves>"`` (waves
        other than the sweep's) for one that also depends on Hanayo's wave count.
      primary: the choice key the verdict is stated in (the primary comm mode).
      factors: tolerance factors for the alternative columns ``tolerance ×<factor>``.

    Returns:
      One row per claim, indexed by claim id: ``finding``, ``statement``, ``choice`` (the key
      judged), ``measured`` (min … max of the cases), ``passed``, ``cases``, ``verdict``,
      ``failing`` (labels of the failing cases), then one column per alternative choice key and
      one per tolerance factor (the verdict there, with its count where partial; "—" where the
      claim does not depend on that choice).

    Raises:
      ValueError: a claim without measured numbers, or without its primary choice.
    """
    rows = []
    for claim in claims:
        by_choice = measured.get(claim.id)
        if not by_choice:
            raise ValueError(f"measured[{claim.id!r}]: missing; every claim needs measured numbers")
        key = primary if claim.depends_on else ""
        if key not in by_choice:
            raise ValueError(f"measured[{claim.id!r}]: no numbers for the choice {key!r}; has {sorted(by_choice)}")
        values = by_choice[key]
        ok = _passes(claim, values, 1.0)
        row = {
            "id": claim.id,
            "finding": claim.finding,
            "statement": claim.statement,
            "choice": key or "—",
            "measured": _span(values),
            "passed": int(ok.sum()),
            "cases": int(ok.size),
            "verdict": _word(ok),
            "failing": "; ".join(str(label) for label in values.index[~ok]),
        }
        for other, other_values in by_choice.items():
            if other != key:
                row[other] = _word(_passes(claim, other_values, 1.0), count=True)
        for factor in factors:
            row[f"tolerance ×{factor:g}"] = _word(_passes(claim, values, factor), count=True) if claim.tolerance > 0 else "—"
        rows.append(row)
    return pd.DataFrame(rows).set_index("id").fillna("—")


def conclusion(table: pd.DataFrame) -> str:
    """The report's closing lists: the claims that agree, partly agree and do not agree.

    Args:
      table: the output of :func:`verdicts`.

    Returns:
      Markdown, three bullets.
    """
    lines = []
    for word, title in ((AGREES, "Reproduces (agrees)"), (PARTLY, "Partly reproduces (partly agrees)"),
                        (DISAGREES, "Does not reproduce (does not agree)")):
        sub = table[table.verdict == word]
        items = "; ".join(
            f"{row.statement} [{cid}"
            + (f", {row.passed} of {row.cases} cases" if word == PARTLY else "")
            + (f", in `{row.choice}`" if row.choice != "—" else "")
            + "]"
            for cid, row in sub.iterrows()
        )
        lines.append(f"- **{title}:** {items or 'none'}.")
    return "\n".join(lines)


def _passes(claim: Claim, values: pd.Series, factor: float) -> np.ndarray:
    """Boolean per case: does the measured value satisfy the claim (tolerance × factor)?"""
    tol = claim.tolerance * factor
    ok = np.zeros(len(values), dtype=bool)
    for i, (label, x) in enumerate(values.items()):
        paper = claim.paper[label] if isinstance(claim.paper, Mapping) else claim.paper
        lo, hi = paper if isinstance(paper, tuple) else (paper, paper)
        x = float(x)
        if np.isnan(x):
            continue
        ok[i] = {
            "≈": lo - tol <= x <= hi + tol,
            "≤": x <= hi + tol,
            "≥": x >= lo - tol,
            "<": x < lo - tol,
            ">": x > hi + tol,
        }[claim.comparison]
    return ok


def _word(ok: np.ndarray, count: bool = False) -> str:
    """``agrees`` (every case passes), ``partly agrees`` (some) or ``does not agree`` (none)."""
    if ok.size and ok.all():
        return AGREES
    if ok.any():
        return f"{PARTLY} ({int(ok.sum())} of {ok.size})" if count else PARTLY
    return DISAGREES


def _span(values: pd.Series) -> str:
    """``min … max`` of the measured values (4 significant digits)."""
    v = np.asarray(values, dtype=float)
    lo, hi = np.nanmin(v), np.nanmax(v)
    return f"{lo:.4g}" if lo == hi else f"{lo:.4g} … {hi:.4g}"
