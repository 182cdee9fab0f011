"""The PNG figure of each finding (``results/paper/<stem>.png``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ppsweep.paper.claims import PRIMARY_MODE as PRIMARY
from ppsweep.paper.claims import TABLE1
from ppsweep.paper.findings import Finding
from ppsweep.paper.systems import BY_LABEL, LABELS, MODES


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(out: Path, stem: str, fig) -> None:
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=90, bbox_inches="tight")
    _plt().close(fig)


def write_figure(out: Path, finding: Finding, spec) -> None:
    """Draw ``finding``'s figure into ``out/<stem>.png``.

    Args:
      out: output directory.
      finding: the output of one ``findingN``.
      spec: the ``paper`` SweepSpec (its p and schedules).
    """
    draw = {"f1_gpipe_vs_1f1b": _f1, "f2_chimera_vs_gpipe": _f2, "f3_bubbles": _f3,
            "f4_table1_hanayo_vs_chimera": _f4, "f5_asym_chimera": _f5}[finding.stem]
    _save(out, finding.stem, draw(finding.numbers, spec))


def _f1(n, spec):
    long, mem = n["long"], n["mem"]
    fig, axes = _plt().subplots(1, 4, figsize=(17, 3.8))
    for ax, mode in zip(axes[:3], MODES):
        for s in LABELS:
            sub = long[(long.comm == mode) & (long.system == s) & (long.p == 8)]
            ax.plot(sub.m, sub.diff_pct, label=s, **BY_LABEL[s].style())
        ax.set_xscale("log", base=2)
        ax.set_title(f"1F1B vs GPipe, p=8, {mode}")
        ax.set_xlabel("m")
        ax.set_ylabel("% step time (1F1B / GPipe − 1)")
        ax.axhline(0, color="k", lw=0.5)
    axes[0].legend(fontsize=6)
    for p, marker in ((4, "s"), (8, "o")):
        sub = mem[mem.p == p]
        for sched, colour in (("gpipe", "tab:blue"), ("1f1b", "tab:orange")):
            s2 = sub[sub.schedule == sched]
            axes[3].plot(s2.m, s2.peak_activation_bytes / 1e12, marker=marker, color=colour, label=f"{sched} p={p}")
    axes[3].set_xscale("log", base=2)
    axes[3].set_yscale("log")
    axes[3].set_title("activation peak (bottleneck worker)")
    axes[3].set_xlabel("m")
    axes[3].set_ylabel("TB")
    axes[3].legend(fontsize=7)
    return fig


def _f2(n, spec):
    prim, abw = n["prim"], n["abw"]
    fig, axes = _plt().subplots(2, 3, figsize=(15, 8), sharex=True)
    panels = [("as swept", 4), ("as swept", 8), ("no grad sync", 8), ("t_b = t_f", 8), ("G = 8", 8), ("G = 2048", 8)]
    for ax, (label, p) in zip(axes.flat, panels):
        src = prim[prim.p == p] if label == "as swept" else abw[(abw.variant == label) & (abw.p == p)]
        for s in LABELS:
            sub = src[src.system == s].sort_values("m")
            ax.plot(sub.m, sub.chimera_vs_gpipe_pct, label=s, **BY_LABEL[s].style())
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_title(f"Chimera vs GPipe, p={p}, {label}", fontsize=9)
        ax.set_ylabel("% step time")
        ax.set_xlabel("m")
    axes[0, 0].legend(fontsize=6)
    return fig


def _f3(n, spec):
    b = n["b"]
    fig, axes = _plt().subplots(1, 2, figsize=(11, 3.8), sharey=True)
    colours = {"gpipe": "tab:blue", "1f1b": "tab:orange", "chimera": "tab:green", "hanayo": "tab:red"}
    for ax, p in zip(axes, spec.p):
        for s in spec.schedules:
            sub = b[(b.schedule == s) & (b.p == p)]
            ax.plot(sub.m, 100 * sub.bubble_table, color=colours[s], marker="o", ms=3, label=f"{s} table")
            ax.plot(sub.m, 100 * sub.bubble_formula, color=colours[s], ls="--", label=f"{s} formula")
        ax.set_xscale("log", base=2)
        ax.set_title(f"bubble ratio, p={p}")
        ax.set_xlabel("m")
        ax.set_ylabel("%")
    axes[0].legend(fontsize=7)
    return fig


def _f4(n, spec):
    df = n["df"]
    fig, axes = _plt().subplots(1, 2, figsize=(14, 4))
    x = np.arange(len(LABELS))
    for k, (variant, colour) in enumerate((("hanayo W=1 (swept)", "tab:red"), ("hanayo W=2, as swept", "tab:purple"))):
        sub = df[(df.variant == variant) & (df["mode"] == PRIMARY)].set_index("system").reindex(LABELS)
        label = variant.replace(" (swept)", "").replace(", as swept", "")
        axes[0].bar(x + (k - 0.5) * 0.38, sub.diff_pct, 0.38, color=colour, label=label)
        axes[1].bar(x + (k - 0.5) * 0.38, 100 * sub.idle_hanayo, 0.38, color=colour, label=label)
    first_range = True
    for i, s in enumerate(LABELS):
        v = TABLE1[s]
        if isinstance(v, tuple):
            axes[0].plot([i - 0.4, i + 0.4], [sum(v) / 2] * 2, color="k", lw=2, label="paper" if first_range else None)
            first_range = False
        elif v is not None:
            axes[0].plot([i - 0.4, i + 0.4], [v] * 2, color="k", lw=2)
    sub = df[(df.variant == "hanayo W=1 (swept)") & (df["mode"] == PRIMARY)].set_index("system").reindex(LABELS)
    axes[1].plot(x, 100 * sub.idle_chimera, "ko", label="chimera")
    axes[1].axhline(35, color="grey", ls=":", lw=1)
    axes[1].axhline(25, color="grey", ls=":", lw=1)
    axes[0].axhline(0, color="k", lw=0.5)
    for ax, title in zip(axes, ("Hanayo vs Chimera, % step time (black: paper)", "idle_sim, % (dotted: paper's 35 % and 25 %)")):
        ax.set_xticks(x)
        ax.set_xticklabels(LABELS, rotation=40, ha="right", fontsize=8)
        ax.set_title(f"{title}; p=m=8, {PRIMARY}", fontsize=9)
        ax.legend(fontsize=7)
    return fig


def _f5(n, spec):
    prim, pw = n["prim"], n["pw"]
    fig, axes = _plt().subplots(1, 3, figsize=(16, 3.8))
    for ax, p in zip(axes[:2], spec.p):
        for s in LABELS:
            sub = prim[(prim.p == p) & (prim.system == s)]
            ax.plot(sub.m, sub.diff_pct, label=s, **BY_LABEL[s].style())
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_title(f"Chimera 1:2 vs 1:1, p={p}, {PRIMARY}")
        ax.set_xlabel("m")
        ax.set_ylabel("% step time")
    axes[0].legend(fontsize=6)
    for (p, split), grp in pw[pw.p == 8].groupby(["p", "split"]):
        axes[2].plot(grp.worker, grp.total_TB, marker="o", label=f"p={p} split {split}")
    axes[2].set_title("peak memory per worker, p=8, m=16")
    axes[2].set_xlabel("worker")
    axes[2].set_ylabel("TB")
    axes[2].legend(fontsize=7)
    return fig
