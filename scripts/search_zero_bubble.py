"""The schedule search against the zero-bubble scheduler: the paper's 1.5B row (Table 9: p=8, m=24).

    PYTHONPATH=$PWD python scripts/search_zero_bubble.py [--figure docs/search_zb_1p5b.png] [--space a]

For each memory cap (p and 2p microbatches' activations, ``M_B``) and memory rule (the paper's:
a microbatch keeps ``M_W/M_B`` of its activations from B to W; ppsweep's table rule: all of them
until W), the search over the space minimizes the paper's bubble rate; prints the winner, the
best hand-made schedule within the cap and the paper's ZB-1p / ZB-2p (Table 5), and times each
search. With --figure, the Gantt chart of the 2p winner next to the best hand-made schedule.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ppsweep.paper import zero_bubble
from ppsweep.search.driver import search
from ppsweep.search.region import Region

#: Table 1 of the paper: M_B = sb(34h + 5as), M_W = 32sbh per layer; Table 3's 1.5B: h=2304, a=24, s=1024.
W_SHARE = 32 * 2304 / (34 * 2304 + 5 * 24 * 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default="a")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--figure", help="PNG: the 2p winner (paper's memory rule) next to the best hand-made schedule")
    args = parser.parse_args()
    s = zero_bubble.settings()[0]
    print(f"{s.model} p={s.p} m={s.m}: T_F={s.t_f} T_B={s.t_b} T_W={s.t_w} T_comm={s.t_comm} (Table 9); "
          f"paper ZB-1p {s.bubble['zb_1p']}, ZB-2p {s.bubble['zb_2p']} (Table 5)")
    figure = None
    for share, rule in ((W_SHARE, f"paper's M_W/M_B = {W_SHARE:.3f}"), (1.0, "table rule (all until W)")):
        region = Region.of(s.t_f, s.t_b, s.t_w, latency=s.t_comm, w_share=share)
        for cap, column in ((s.p, "zb_1p"), (2 * s.p, "zb_2p")):
            start = time.perf_counter()
            result = search(args.space, s.p, s.m, region, cap=cap, objective="bubble", budget=args.budget, progress=False)
            seconds = time.perf_counter() - start
            best, hand = result.best[0], result.incumbents[0]
            print(f"cap {cap} M_B, {rule}: searched bubble {float(np.mean(best.figures.bubble)):.4f} "
                  f"(peak {best.figures.peak:.2f}) vs paper {column} {s.bubble[column]:.4f}; best hand-made "
                  f"{hand.label} {float(np.mean(hand.figures.bubble)):.4f}; {result.evaluated} candidates, "
                  f"{seconds:.1f} s; winner {best.label}")
            if share == W_SHARE and cap == 2 * s.p:
                figure = (best.label, hand.label, region)
    if args.figure and figure:
        from ppsweep.search.figure import plot_searched_vs_hand_made

        label, hand_label, region = figure
        path = plot_searched_vs_hand_made(label, hand_label, s.p, s.m, region, args.figure,
                                          titles=(f"searched (cap 2p M_B): {label.split('@times')[0]}",
                                                  f"best hand-made within the cap: {hand_label}"))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
