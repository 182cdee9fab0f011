"""Print the zero-bubble paper's tables from its own inputs: ``python scripts/zero_bubble_paper.py``.

Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024, arXiv 2401.10241); the published numbers
are in ``ppsweep/data/zero_bubble_qi2024.yaml``, the runs in :mod:`ppsweep.paper.zero_bubble`.

Prints markdown tables (about 15 s of CPU):

1. Table 5's bubble rates, the paper's and ppsweep's (post-validated step: the longest worker
   span), for 1F1B, ZB-H1, ZB-H2, and beside them ZB-H2's isolated step (``t_sim``), ppsweep's
   former ZB-H2 order (``zb_h2@lag=1``) and 1F1B-I (interleaved 1F1B, one chunk per layer);
2. Table 4's measured throughput over 1F1B's for ZB-1p and ZB-2p, against ppsweep's step-time
   ratio for the schedule with the same activation memory (ZB-H1 for ZB-1p, ZB-H2 for ZB-2p) and
   against the ratio the paper's own Table 5 bubble rates give; then the same for 1F1B-I against
   ppsweep's interleaved 1F1B; error = predicted / measured - 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsweep.paper import zero_bubble  # noqa: E402


def bubble_table(c: zero_bubble.Comparison) -> list[str]:
    """Table 5, the paper's value beside ppsweep's for each column ppsweep has."""
    lines = [("| model | p | m | 1F1B paper | ppsweep | ZB-H1 paper | ppsweep | ZB-H2 paper | ppsweep "
              "| ZB-H2 isolated step | `zb_h2@lag=1` | 1F1B-I paper | ppsweep |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k, s in enumerate(zero_bubble.settings()):
        cells = [s.model, str(s.p), str(s.m)]
        for col in ("1f1b", "zb_h1", "zb_h2"):
            cells += [f"{s.bubble[col]:.4f}", f"{c.bubble[col][k]:.4f}"]
        cells += [f"{c.bubble_isolated['zb_h2'][k]:.4f}", f"{c.bubble['zb_h2@lag=1'][k]:.4f}",
                  f"{s.bubble['1f1b_i']:.4f}", f"{c.bubble['1f1b_i'][k]:.4f}"]
        lines.append("| " + " | ".join(cells) + " |")
    matched = sum(int(np.array_equal(np.round(c.bubble[col], 4), [s.bubble[col] for s in zero_bubble.settings()]))
                  for col in ("1f1b", "zb_h1", "zb_h2"))
    equal = sum(int(round(c.bubble[col][k], 4) == s.bubble[col]) for col in ("1f1b", "zb_h1", "zb_h2")
                for k, s in enumerate(zero_bubble.settings()))
    lines.append(f"\n{equal} of 36 values equal to 4 decimals ({matched} of 3 columns whole).")
    return lines


def ratio_table(c: zero_bubble.Comparison) -> list[str]:
    """Table 4's measured throughput ratios against ppsweep's and the paper's Table 5 predictions."""
    lines = [("| model | p | m | ZB-1p/1F1B measured | ZB-H1 predicted | error | Table 5 predicted | error "
              "| ZB-2p/1F1B measured | ZB-H2 predicted | error | Table 5 predicted | error |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    errors: dict[tuple[str, str], np.ndarray] = {}
    for x in c.ratio_measured:
        errors[x, "ppsweep"] = c.ratio_ppsweep[x] / c.ratio_measured[x] - 1
        errors[x, "paper"] = c.ratio_paper[x] / c.ratio_measured[x] - 1
    for k, s in enumerate(zero_bubble.settings()):
        cells = [s.model, str(s.p), str(s.m)]
        for x in zero_bubble.PROXIES:
            cells += [f"{c.ratio_measured[x][k]:.3f}", f"{c.ratio_ppsweep[x][k]:.3f}", f"{100 * errors[x, 'ppsweep'][k]:+.1f} %",
                      f"{c.ratio_paper[x][k]:.3f}", f"{100 * errors[x, 'paper'][k]:+.1f} %"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| model | p | m | 1F1B-I/1F1B measured | interleaved 1F1B predicted | error | Table 5 predicted | error |",
              "|---|---|---|---|---|---|---|---|"]
    for k, s in enumerate(zero_bubble.settings()):
        lines.append(f"| {s.model} | {s.p} | {s.m} | {c.ratio_measured['1f1b_i'][k]:.3f} | {c.ratio_ppsweep['1f1b_i'][k]:.3f} "
                     f"| {100 * errors['1f1b_i', 'ppsweep'][k]:+.1f} % | {c.ratio_paper['1f1b_i'][k]:.3f} "
                     f"| {100 * errors['1f1b_i', 'paper'][k]:+.1f} % |")
    lines.append("")
    proxies = {**zero_bubble.PROXIES, **zero_bubble.EXTRA_PROXIES}
    for (x, who), e in errors.items():
        proxy = ("interleaved_1f1b" if x == "1f1b_i" else proxies[x]) if who == "ppsweep" else "the paper's Table 5"
        lines.append(f"- {x}/1F1B predicted by {proxy}: median |error| {100 * np.median(np.abs(e)):.1f} %, "
                     f"worst {100 * e[np.argmax(np.abs(e))]:+.1f} %, mean {100 * e.mean():+.1f} %")
    return lines


def main() -> None:
    c = zero_bubble.compare(extra=True)
    print("## Table 5: bubble rates from Table 9's inputs\n")
    print("\n".join(bubble_table(c)))
    print("\n## Table 4: measured throughput over 1F1B's, against predicted step-time ratios\n")
    print("\n".join(ratio_table(c)))


if __name__ == "__main__":
    main()
