"""The verdict function on small synthetic claims and measurements."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ppsweep.paper.claims import CLAIMS, Claim
from ppsweep.paper.verdict import conclusion, verdicts


def claim(cid="c", comparison="≈", paper=10.0, tolerance=1.0, depends_on=""):
    return Claim(cid, 1, f"statement {cid}", "x, %", "cases", comparison, paper, tolerance, depends_on)


def cases(*values):
    return pd.Series(values, index=[f"case {i}" for i in range(len(values))], dtype=float)


def test_agree_partly_and_disagree():
    c = [claim("a"), claim("b"), claim("c")]
    measured = {"a": {"": cases(9.0, 10.5, 11.0)},  # all within 10 ± 1 (boundaries included)
                "b": {"": cases(9.5, 12.0, 7.0)},   # one of three
                "c": {"": cases(8.9, 11.2)}}        # none
    table = verdicts(c, measured)
    assert table.verdict.tolist() == ["agrees", "partly agrees", "does not agree"]
    assert table.loc["b", "passed"] == 1 and table.loc["b", "cases"] == 3
    assert table.loc["b", "failing"] == "case 1; case 2"
    assert table.loc["a", "measured"] == "9 … 11"


@pytest.mark.parametrize(
    "comparison, paper, tolerance, values, passes",
    [
        ("≈", (16.0, 32.0), 0.0, (16.0, 32.0, 15.9, 33.0), [True, True, False, False]),
        ("≈", (16.0, 32.0), 1.0, (15.0, 33.0, 14.9), [True, True, False]),
        ("≤", 0.0, 5.0, (5.0, 5.1, -100.0), [True, False, True]),
        ("≥", 1.0, 1e-3, (0.999, 0.998, 2.0), [True, False, True]),
        ("<", 1.0, 0.0, (0.5, 1.0), [True, False]),
        (">", 0.0, 1.0, (1.0, 1.01, -3.0), [False, True, False]),
        ("≈", 0.0, 3.0, (np.nan, 0.0), [False, True]),  # NaN never passes
    ],
)
def test_each_comparison_at_its_boundary(comparison, paper, tolerance, values, passes):
    table = verdicts([claim(comparison=comparison, paper=paper, tolerance=tolerance)], {"c": {"": cases(*values)}})
    assert table.loc["c", "passed"] == sum(passes)
    failing = [f"case {i}" for i, ok in enumerate(passes) if not ok]
    assert table.loc["c", "failing"] == "; ".join(failing)


def test_per_case_paper_values():
    c = claim(paper={"x": -2.3, "y": (-14.0, -12.0), "z": 12.3}, tolerance=2.0)
    values = pd.Series({"x": -0.5, "y": -10.5, "z": 20.0})  # x: within 2 of −2.3; y: inside −16 … −10; z: not
    table = verdicts([c], {"c": {"": values}})
    assert table.loc["c", "passed"] == 2 and table.loc["c", "failing"] == "z"


def test_primary_mode_and_alternatives():
    c = claim(depends_on="mode", paper=0.0, tolerance=3.0)
    measured = {"c": {"overlap": cases(0.0, 50.0), "blocking": cases(1.0, -2.0), "contention": cases(10.0, 20.0),
                      "blocking, W = 2": cases(0.0, 4.0)}}
    table = verdicts([c], measured)
    assert table.loc["c", "choice"] == "blocking" and table.loc["c", "verdict"] == "agrees"
    assert table.loc["c", "overlap"] == "partly agrees (1 of 2)"
    assert table.loc["c", "contention"] == "does not agree"
    assert table.loc["c", "blocking, W = 2"] == "partly agrees (1 of 2)"
    # The same numbers judged in another primary mode.
    assert verdicts([c], measured, primary="overlap").loc["c", "verdict"] == "partly agrees"
    # Tolerance halved (1.5) and doubled (6): −2 fails at ½, and both pass at ×2.
    assert table.loc["c", "tolerance ×0.5"] == "partly agrees (1 of 2)"
    assert table.loc["c", "tolerance ×2"] == "agrees"


def test_missing_measurements_are_an_error():
    with pytest.raises(ValueError, match=r"measured\['c'\]: missing"):
        verdicts([claim()], {})
    with pytest.raises(ValueError, match="no numbers for the choice 'blocking'"):
        verdicts([claim(depends_on="mode")], {"c": {"overlap": cases(1.0)}})


def test_bad_claims_are_refused():
    with pytest.raises(ValueError, match="Claim.comparison"):
        claim(comparison="=")
    with pytest.raises(ValueError, match="Claim.tolerance"):
        claim(tolerance=-1.0)
    with pytest.raises(ValueError, match="Claim.depends_on"):
        claim(depends_on="waves")


def test_conclusion_lists_every_claim_once_under_its_verdict():
    c = [claim("a"), claim("b"), claim("c")]
    table = verdicts(c, {"a": {"": cases(10.0)}, "b": {"": cases(10.0, 0.0)}, "c": {"": cases(0.0)}})
    text = conclusion(table)
    lines = text.splitlines()
    assert len(lines) == 3
    assert "statement a [a]" in lines[0] and "statement b [b, 1 of 2 cases]" in lines[1] and "statement c [c]" in lines[2]


def test_the_paper_claims_are_unique_and_well_formed():
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    assert {c.finding for c in CLAIMS} == {1, 2, 3, 4, 5}


def test_no_verdict_words_outside_the_verdict_module():
    """Every verdict in REPORT.md comes from ``verdict.py``: the report code and template hold none."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    files = [*sorted((root / "ppsweep" / "paper").glob("*.py")), root / "ppsweep" / "paper" / "report.md.tmpl",
             root / "scripts" / "reproduce_paper.py"]
    offenders = [
        f"{path.name}:{n}" for path in files if path.name != "verdict.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if any(word in line.lower() for word in ("agree", "partly", "reproduces"))
    ]
    assert offenders == []
