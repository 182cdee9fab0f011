#!/usr/bin/env python
"""Reproduce the seed paper's findings with ppsweep and say where they agree.

    python scripts/reproduce_paper.py            # run (or reuse) the sweeps, write results/paper/
    python scripts/reproduce_paper.py --fresh    # recompute the sweeps from scratch
    python scripts/reproduce_paper.py --override engine.compilation_cache=null   # Hydra overrides

Seed paper: "A Tabular Schedule Abstraction for Communication-Aware Evaluation of Pipeline-Parallel
LLM Training" (Barley, Leis, Klenk, Fröning, ISPDC 2026).

What it does:

1. Runs the study as two sweeps, ``conf/sweep/paper.yaml`` (GPipe, 1F1B, Chimera 1:1, Hanayo W=1)
   and ``conf/sweep/paper_asym.yaml`` (Chimera 1:2), into ``results/paper.zarr`` and
   ``results/paper_asym.zarr`` (git-ignored). A complete store is reused, not recomputed.
2. Picks the paper's nine systems out of the stores: compute {1e14, 1e15, 1e16} FLOP/s × the three
   networks on the diagonal of bandwidth × latency.
3. Runs single-assumption ablations through the Python API (``ppsweep.engine.simulate``): free
   communication, no gradient synchronisation (``grad_bytes = 0``), backward as long as forward
   (same total compute), other global batches, Hanayo with two waves.
4. Writes, per finding, a markdown table, a CSV and a PNG to ``results/paper/``, and
   ``results/paper/REPORT.md``, which states for each finding whether ppsweep agrees.

Primary communication mode: ``blocking``. It is the mode in which GPipe and 1F1B are
runtime-equivalent, as the paper reports (see finding 1); every CSV carries all three modes.
Percent differences are ``100 · (t_a / t_b − 1)``: negative means ``a`` is faster.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "results" / "paper"
STORES = ROOT / "results"

#: The nine systems: (label, compute level, network level, peak FLOP/s, bandwidth B/s, latency s).
LEVELS = ("slow", "mid", "fast")
PEAKS = {"slow": 1e14, "mid": 1e15, "fast": 1e16}
NETWORKS = {"slow": (5e9, 5e-6), "mid": (5e10, 5e-7), "fast": (5e11, 5e-8)}
SYSTEMS = [
    (f"{cp} cp / {nw} nw", cp, nw, PEAKS[cp], *NETWORKS[nw]) for cp in LEVELS for nw in LEVELS
]
SYSTEM_LABELS = [s[0] for s in SYSTEMS]
MODES = ("overlap", "blocking", "contention")
PRIMARY = "blocking"
#: Systems whose network is slower than their compute, relative to the baseline (network-limited).
NETWORK_LIMITED = [s[0] for s in SYSTEMS if LEVELS.index(s[1]) > LEVELS.index(s[2])]
#: Compute level minus network level: the step time depends on the system only through this ratio
#: class (compute and network scale together), -2 (network 100× "faster") … +2 (compute 100× faster).
RATIO_CLASS = {s[0]: LEVELS.index(s[1]) - LEVELS.index(s[2]) for s in SYSTEMS}
CLASS_WORDS = {-2: "compute 100× slower than the network (relative to the baseline)", -1: "compute 10× slower",
               0: "balanced", 1: "compute 10× faster than the network", 2: "compute 100× faster"}
REPRESENTATIVE = ["slow cp / fast nw", "mid cp / mid nw", "fast cp / mid nw", "fast cp / slow nw"]

#: Table I of the paper: Hanayo vs Chimera at p = m = 8, % difference of step time (negative:
#: Hanayo faster), as far as public. "fast and mid networks": about 12–14 % faster.
PAPER_TABLE1 = {
    "fast cp / slow nw": "+12.3",
    "mid cp / slow nw": "-2.3",
    "slow cp / slow nw": "n/a",
}
PAPER_TABLE1_DEFAULT = "-12 … -14"


# ---------------------------------------------------------------------------------------------
# Configs, sweeps and stores
# ---------------------------------------------------------------------------------------------
def compose(sweep: str, overrides: list[str]) -> tuple[dict, str]:
    """The resolved config of ``python -m ppsweep +sweep=<sweep> <overrides>``, and its YAML."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    from ppsweep.cli import find_conf_dir  # also registers the ${logspace:...} resolver

    with initialize_config_dir(config_dir=str(find_conf_dir()), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=[f"+sweep={sweep}", *overrides])
    return OmegaConf.to_container(cfg, resolve=True), OmegaConf.to_yaml(cfg, resolve=True)


def run_or_load(sweep: str, overrides: list[str], fresh: bool, log) -> tuple[Any, Any]:
    """Run ``sweep`` into ``results/<name>.zarr`` unless complete; return (dataset, SweepSpec)."""
    import xarray as xr

    from ppsweep.runner import configure_jax, run_sweep
    from ppsweep.sweep import SweepSpec

    container, yaml = compose(sweep, overrides)
    spec = SweepSpec.from_config(container)
    configure_jax(container.get("engine", {}).get("compilation_cache"))
    path = Path(str(container.get("results_dir", "results")))
    path = (path if path.is_absolute() else ROOT / path) / f"{spec.name}.zarr"
    report = run_sweep(spec, path, yaml, overwrite=fresh, progress=False)
    if report.units_run:
        log(f"sweep {sweep}: {report.points_run:,} points in {report.seconds:.1f} s -> {path}")
    else:
        log(f"sweep {sweep}: {path} already complete, reused")
    return xr.open_zarr(path).load(), spec


def diagonal(ds) -> Any:
    """The nine systems out of a store: a ``system`` dimension instead of compute × bw × latency."""
    import xarray as xr

    parts = [
        ds.sel(compute=peak, bandwidth=bw, latency=lat).drop_vars(["compute", "bandwidth", "latency"])
        for _, _, _, peak, bw, lat in SYSTEMS
    ]
    return xr.concat(parts, dim=pd.Index(SYSTEM_LABELS, name="system"))


# ---------------------------------------------------------------------------------------------
# Single-assumption runs through the Python API
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Variant:
    """One modelling assumption changed against the sweep's.

    Attributes:
      label: name in the tables.
      grad: synchronise replicated stages' gradients (False: ``grad_bytes = 0``).
      equal_fb: backward as long as forward, ``t_f = t_b = 1.5 t_f`` (same compute per microbatch).
      global_batch: override of ``model.global_batch`` (None: the model's).
      free_comm: latency 0 and infinite bandwidth.
    """

    label: str
    grad: bool = True
    equal_fb: bool = False
    global_batch: int | None = None
    free_comm: bool = False


BASE = Variant("as swept")


def simulate_variants(spec, name: str, p: int, m: int, mode: str, variants: list[Variant], **options) -> dict[str, np.ndarray]:
    """Step time and idle fraction of one schedule on the nine systems under several assumptions.

    All variants run in one engine call (one table, points = variants × systems).

    Returns:
      ``{"t_sim": (V, 9), "idle_sim": (V, 9)}``; NaN where the schedule cannot run.
    """
    from ppsweep.build import UnsupportedPointError, build_schedule
    from ppsweep.costs import stage_costs
    from ppsweep.engine import simulate

    shape = (len(variants), len(SYSTEMS))
    try:
        table = build_schedule(name, p, m, spec.f_slots, spec.b_slots, **options)
    except UnsupportedPointError:
        return {"t_sim": np.full(shape, np.nan), "idle_sim": np.full(shape, np.nan)}
    peaks = np.array([s[3] for s in SYSTEMS])
    t_f, t_b, grad, msg, alpha, beta = [], [], [], [], [], []
    for v in variants:
        model = spec.model if v.global_batch is None else dataclasses.replace(spec.model, global_batch=v.global_batch)
        costs = stage_costs(model, spec.system, table, peak_flops=peaks)  # (9, S)
        f, b = (1.5 * costs.t_f, 1.5 * costs.t_f) if v.equal_fb else (costs.t_f, costs.t_b)
        t_f.append(f)
        t_b.append(b)
        grad.append(np.broadcast_to(costs.grad_bytes * (1.0 if v.grad else 0.0), f.shape))
        msg.append(np.full(len(SYSTEMS), costs.msg_bytes))
        alpha.append(np.zeros(len(SYSTEMS)) if v.free_comm else np.array([s[5] for s in SYSTEMS]))
        beta.append(np.full(len(SYSTEMS), np.inf) if v.free_comm else np.array([s[4] for s in SYSTEMS]))
    t_f, t_b = np.stack(t_f), np.stack(t_b)
    result = simulate(
        table, t_f, t_b, np.stack(alpha), np.stack(beta), np.stack(msg), mode,
        t_i=t_b / 2, t_w=t_b / 2, grad_bytes=np.stack(grad), t_opt=spec.system.optimizer_time,
        dtype=spec.dtype, chunk=spec.chunk,
    )
    return {"t_sim": result.t_sim, "idle_sim": result.idle_fraction(table.p)}


def ablation_frame(spec, name: str, ps, ms, modes, variants: list[Variant], **options) -> pd.DataFrame:
    """Long table: schedule, p, m, mode, variant, system, t_sim, idle_sim."""
    rows = []
    for p in ps:
        for m in ms:
            for mode in modes:
                out = simulate_variants(spec, name, p, m, mode, variants, **options)
                for i, v in enumerate(variants):
                    for j, system in enumerate(SYSTEM_LABELS):
                        rows.append(
                            dict(schedule=name, p=p, m=m, mode=mode, variant=v.label, system=system,
                                 t_sim=out["t_sim"][i, j], idle_sim=out["idle_sim"][i, j])
                        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Output helpers
# ---------------------------------------------------------------------------------------------
def pct(a, b):
    """``100 · (a / b − 1)``."""
    return 100.0 * (np.asarray(a, dtype=float) / np.asarray(b, dtype=float) - 1.0)


def markdown(df: pd.DataFrame, floatfmt: str = "{:.2f}", index: bool = True) -> str:
    """A pipe table (no tabulate dependency)."""
    frame = df.reset_index() if index else df
    cols = [str(c) for c in frame.columns]

    def cell(x):
        if isinstance(x, (float, np.floating)):
            return "—" if np.isnan(x) else floatfmt.format(x)
        return str(x)

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


class Writer:
    """Writes results/paper/<stem>.{md,csv,png} and remembers the markdown for REPORT.md."""

    def __init__(self, out: Path):
        self.out = out
        self.md: dict[str, str] = {}
        out.mkdir(parents=True, exist_ok=True)

    def table(self, stem: str, title: str, df_csv: pd.DataFrame, sections: list[tuple[str, str]]) -> None:
        df_csv.to_csv(self.out / f"{stem}.csv", index=False, float_format="%.6g")
        body = f"# {title}\n\nCSV: `{stem}.csv` (all modes and points). Figure: `{stem}.png`.\n\n"
        body += "\n".join(f"### {heading}\n\n{table}" for heading, table in sections)
        (self.out / f"{stem}.md").write_text(body)
        self.md[stem] = "\n".join(f"*{heading}*\n\n{table}" for heading, table in sections)

    def figure(self, stem: str, fig) -> None:
        fig.tight_layout()
        fig.savefig(self.out / f"{stem}.png", dpi=90, bbox_inches="tight")
        import matplotlib.pyplot as plt

        plt.close(fig)


def plt_module():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def system_style(label: str):
    """Colour by network, line style by compute."""
    cp, nw = label.split(" cp / ")[0], label.split(" cp / ")[1].split(" nw")[0]
    colour = {"slow": "tab:red", "mid": "tab:orange", "fast": "tab:green"}[nw]
    style = {"slow": ":", "mid": "--", "fast": "-"}[cp]
    return dict(color=colour, linestyle=style, marker="o", markersize=3)


# ---------------------------------------------------------------------------------------------
# The findings
# ---------------------------------------------------------------------------------------------
def finding1(ds, spec, w: Writer) -> dict:
    """GPipe vs 1F1B: step time per mode and system; free communication; activation peak."""
    d = diagonal(ds)
    g, f = d.t_sim.sel(schedule="gpipe"), d.t_sim.sel(schedule="1f1b")
    diff = pct(f, g)  # (p, m, comm, system)
    diff = d.t_sim.sel(schedule="gpipe").copy(data=diff)
    long = diff.to_dataframe(name="diff_pct").reset_index()[["p", "m", "comm", "system", "diff_pct"]]
    long = long.merge(g.to_dataframe(name="t_gpipe").reset_index()[["p", "m", "comm", "system", "t_gpipe"]])
    long = long.merge(f.to_dataframe(name="t_1f1b").reset_index()[["p", "m", "comm", "system", "t_1f1b"]])

    free = pd.concat(
        [ablation_frame(spec, s, spec.p, spec.m, ["overlap", "blocking", "contention"], [Variant("free comm", free_comm=True)])
         for s in ("gpipe", "1f1b")]
    )
    fp = free.pivot_table(index=["p", "m", "mode", "system"], columns="schedule", values="t_sim").reset_index()
    fp["diff_pct"] = pct(fp["1f1b"], fp["gpipe"])
    free_max = float(np.nanmax(np.abs(fp["diff_pct"])))

    # Per mode × system: the 1F1B − GPipe difference over all (p, m): min … max.
    span = long.groupby(["comm", "system"])["diff_pct"].agg(["min", "max"]).reset_index()
    span["range"] = [f"{a:+.2f} … {b:+.2f}" for a, b in zip(span["min"], span["max"])]
    span_table = span.pivot(index="comm", columns="system", values="range").reindex(index=list(MODES), columns=SYSTEM_LABELS)
    span_table.index.name = "mode"
    free_row = pd.DataFrame([["free comm (α = 0, β = ∞)"] + [f"{fp[fp.system == s]['diff_pct'].abs().max():.1e}" for s in SYSTEM_LABELS]],
                            columns=["mode"] + SYSTEM_LABELS).set_index("mode")
    span_table = pd.concat([span_table, free_row])
    span_table = span_table.T
    span_table.index.name = "system"

    at88 = long[(long.p == 8) & (long.m == 8)].pivot(index="system", columns="comm", values="diff_pct").reindex(index=SYSTEM_LABELS, columns=list(MODES))

    mem = ds[["peak_activation_bytes", "peak_memory_bytes"]].sel(schedule=["gpipe", "1f1b"]).to_dataframe().reset_index()
    mem = mem[["schedule", "p", "m", "peak_activation_bytes", "peak_memory_bytes"]]
    memp = mem.pivot(index=["p", "m"], columns="schedule", values="peak_activation_bytes")
    memp["1f1b / gpipe"] = memp["1f1b"] / memp["gpipe"]
    memp = memp[["gpipe", "1f1b", "1f1b / gpipe"]]
    memp[["gpipe", "1f1b"]] = memp[["gpipe", "1f1b"]] / 1e12
    memp.columns = ["GPipe act. peak (TB)", "1F1B act. peak (TB)", "1F1B / GPipe"]

    csv = pd.concat([long.rename(columns={"comm": "mode"}).assign(kind="swept"),
                     fp.rename(columns={"gpipe": "t_gpipe", "1f1b": "t_1f1b"}).assign(kind="free comm")])
    w.table(
        "f1_gpipe_vs_1f1b",
        "Finding 1: GPipe vs 1F1B",
        csv,
        [
            ("1F1B step time vs GPipe, % (min … max over p ∈ {4, 8}, m ∈ {8 … 256}); last column: free communication", markdown(span_table)),
            ("1F1B vs GPipe at p = 8, m = 8, % per mode", markdown(at88)),
            ("Activation peak of the bottleneck worker (no recomputation; global batch 256 × 4096 tokens)", markdown(memp, "{:.3g}")),
        ],
    )
    mem.to_csv(w.out / "f1_activation_memory.csv", index=False, float_format="%.6g")

    plt = plt_module()
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for ax, mode in zip(axes[:3], MODES):
        for s in SYSTEM_LABELS:
            sub = long[(long.comm == mode) & (long.system == s) & (long.p == 8)]
            ax.plot(sub.m, sub.diff_pct, label=s, **system_style(s))
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
    w.figure("f1_gpipe_vs_1f1b", fig)

    by_mode = long.groupby("comm")["diff_pct"].agg(lambda x: float(np.nanmax(np.abs(x))))
    worst = long.loc[long.groupby("comm")["diff_pct"].apply(lambda x: x.abs().idxmax())]
    act = memp["1F1B / GPipe"]
    long["ratio_class"] = [RATIO_CLASS[x] for x in long.system]
    by_class = {
        (mode, k): (float(g.diff_pct.min()), float(g.diff_pct.max()))
        for (mode, k), g in long.groupby(["comm", "ratio_class"])
    }
    return dict(
        by_class=by_class,
        free_max=free_max,
        max_abs=by_mode.to_dict(),
        worst={r.comm: (r.system, int(r.p), int(r.m), float(r.diff_pct)) for r in worst.itertuples()},
        act_ratio_min=float(act.min()),
        act_ratio_max=float(act.max()),
        act_equal_at=[(int(p), int(m)) for (p, m), v in act.items() if np.isclose(v, 1.0)],
        span=span_table,
    )


def finding2(ds, spec, w: Writer) -> dict:
    """Chimera vs GPipe/1F1B over m and systems; ablations that change one assumption."""
    d = diagonal(ds)
    t = d.t_sim.sel(schedule=["gpipe", "1f1b", "chimera", "hanayo"])
    long = t.to_dataframe(name="t_sim").reset_index()[["schedule", "p", "m", "comm", "system", "t_sim"]]
    wide = long.pivot_table(index=["p", "m", "comm", "system"], columns="schedule", values="t_sim").reset_index()
    wide["chimera_vs_gpipe_pct"] = pct(wide.chimera, wide.gpipe)
    wide["chimera_vs_best_other_pct"] = pct(wide.chimera, wide[["gpipe", "1f1b"]].min(axis=1))
    three = wide[["gpipe", "1f1b", "chimera"]]
    wide["fastest3"] = three.idxmin(axis=1)
    wide["slowest3"] = three.idxmax(axis=1)
    wide["spread3_pct"] = pct(three.max(axis=1), three.min(axis=1))
    wide["fastest4"] = wide[["gpipe", "1f1b", "chimera", "hanayo"]].idxmin(axis=1)
    wide["slowest4"] = wide[["gpipe", "1f1b", "chimera", "hanayo"]].idxmax(axis=1)

    prim = wide[wide.comm == PRIMARY]
    tables = []
    for p in spec.p:
        tab = prim[prim.p == p].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(SYSTEM_LABELS)
        tables.append((f"Chimera vs GPipe, % step time, p = {p}, {PRIMARY} (negative: Chimera faster)", markdown(tab, "{:+.1f}")))
    slow = prim.pivot_table(index=["system"], columns="m", values="slowest3", aggfunc="first").reindex(SYSTEM_LABELS)
    tables.append((f"Slowest of GPipe, 1F1B, Chimera at p = 8, {PRIMARY}", markdown(prim[prim.p == 8].pivot(index="system", columns="m", values="slowest3").reindex(SYSTEM_LABELS))))
    tables.append((f"Spread of GPipe, 1F1B, Chimera (slowest / fastest − 1, %) at p = 8, {PRIMARY}", markdown(prim[prim.p == 8].pivot(index="system", columns="m", values="spread3_pct").reindex(SYSTEM_LABELS), "{:.1f}")))

    # Chimera's step time against m: t(m) / t(m=64) on every system, every mode, p = 8.
    ch = wide[["p", "m", "comm", "system", "chimera"]].copy()
    ref = ch[ch.m == 64].set_index(["p", "comm", "system"]).chimera
    ch["rel_to_m64"] = ch.chimera.values / ref.loc[list(zip(ch.p, ch.comm, ch.system))].values
    rise = ch[(ch.m == 256)].pivot_table(index="system", columns=["comm", "p"], values="rel_to_m64").reindex(SYSTEM_LABELS)
    rise = 100 * (rise - 1)
    rise.columns = [f"{c} p={p}" for c, p in rise.columns]
    tables.append(("Chimera's step time from m = 64 to m = 256, % (positive: rises with m)", markdown(rise, "{:+.2f}")))

    # Ablations (one assumption each), p in {4, 8}, every m, primary mode.
    variants = [BASE, Variant("no grad sync", grad=False), Variant("t_b = t_f", equal_fb=True),
                Variant("G = 8", global_batch=8), Variant("G = 2048", global_batch=2048)]
    ab = pd.concat([ablation_frame(spec, s, spec.p, spec.m, [PRIMARY], variants) for s in ("gpipe", "chimera")])
    abw = ab.pivot_table(index=["p", "m", "mode", "variant", "system"], columns="schedule", values="t_sim").reset_index()
    abw["chimera_vs_gpipe_pct"] = pct(abw.chimera, abw.gpipe)
    for label in ("no grad sync", "t_b = t_f", "G = 8"):
        tab = abw[(abw.variant == label) & (abw.p == 8)].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(SYSTEM_LABELS)
        tables.append((f"Ablation '{label}': Chimera vs GPipe, %, p = 8, {PRIMARY}", markdown(tab, "{:+.1f}")))
    # Step time against m with a small global batch (G = 8: b = 1 … 1/32 sequences).
    g8 = ab[(ab.variant == "G = 8") & (ab.p == 8)]
    g8r = g8.pivot_table(index="system", columns=["schedule", "m"], values="t_sim")
    g8rise = pd.DataFrame({s: 100 * (g8r[(s, 256)] / g8r[(s, 64)] - 1) for s in ("gpipe", "chimera")}).reindex(SYSTEM_LABELS)
    g8rise.columns = [f"{s}: t(256)/t(64) − 1, %" for s in g8rise.columns]
    tables.append((f"Ablation 'G = 8': step time from m = 64 to m = 256, p = 8, {PRIMARY}", markdown(g8rise, "{:+.1f}")))

    csv = pd.concat([wide.assign(variant="as swept").rename(columns={"comm": "mode"}), abw[abw.variant != "as swept"]])
    w.table("f2_chimera_vs_gpipe", "Finding 2: Chimera against GPipe and 1F1B", csv, tables)

    plt = plt_module()
    fig, axes = plt.subplots(2, 3, figsize=(15, 8), sharex=True)
    panels = [("as swept", 4), ("as swept", 8), ("no grad sync", 8), ("t_b = t_f", 8), ("G = 8", 8), ("G = 2048", 8)]
    for ax, (label, p) in zip(axes.flat, panels):
        src = prim[prim.p == p] if label == "as swept" else abw[(abw.variant == label) & (abw.p == p)]
        for s in SYSTEM_LABELS:
            sub = src[src.system == s].sort_values("m")
            ax.plot(sub.m, sub.chimera_vs_gpipe_pct, label=s, **system_style(s))
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_title(f"Chimera vs GPipe, p={p}, {label}", fontsize=9)
        ax.set_ylabel("% step time")
        ax.set_xlabel("m")
    axes[0, 0].legend(fontsize=6)
    w.figure("f2_chimera_vs_gpipe", fig)

    # Summary numbers for the report.
    out: dict[str, Any] = {}
    p8 = prim[prim.p == 8]
    out["gain_m8"] = p8[p8.m == 8].set_index("system").chimera_vs_gpipe_pct.reindex(SYSTEM_LABELS)
    wins = prim[prim.chimera_vs_gpipe_pct < 0]
    out["max_gain"] = float(-prim.chimera_vs_gpipe_pct.min())
    out["max_win_m"] = {p: int(wins[wins.p == p].m.max()) if len(wins[wins.p == p]) else None for p in spec.p}
    out["win_m_by_system"] = {
        (p, s): (int(wins[(wins.p == p) & (wins.system == s)].m.max()) if len(wins[(wins.p == p) & (wins.system == s)]) else None)
        for p in spec.p for s in SYSTEM_LABELS
    }
    big = prim[prim.m >= 64]
    out["loss_large_m"] = (float(big.chimera_vs_gpipe_pct.min()), float(big.chimera_vs_gpipe_pct.max()))
    out["spread_m256"] = (float(prim[prim.m == 256].spread3_pct.min()), float(prim[prim.m == 256].spread3_pct.max()))
    nl = prim[prim.system.isin(NETWORK_LIMITED)]
    out["nl_slowest"] = nl.groupby(["p", "m"]).slowest3.apply(lambda x: (x == "chimera").mean()).to_dict()
    out["nl_slowest_frac"] = float((nl.slowest3 == "chimera").mean())
    out["all_slowest_frac"] = float((prim.slowest3 == "chimera").mean())
    out["rise"] = rise
    abp = abw[abw.p == 8]
    for label in ("no grad sync", "t_b = t_f", "G = 8", "G = 2048", "as swept"):
        sub = abp[abp.variant == label]
        out[f"abl:{label}:m256"] = (float(sub[sub.m == 256].chimera_vs_gpipe_pct.min()), float(sub[sub.m == 256].chimera_vs_gpipe_pct.max()))
        out[f"abl:{label}:m8"] = sub[sub.m == 8].set_index("system").chimera_vs_gpipe_pct.reindex(SYSTEM_LABELS)
        out[f"abl:{label}:table"] = sub.pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(SYSTEM_LABELS)
    out["g8rise"] = g8rise
    rows = []
    for label in ("as swept", "no grad sync", "t_b = t_f", "G = 8", "G = 2048"):
        tab = abp[abp.variant == label].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct")
        rows.append([label] + [tab.loc[sys_, m] for sys_ in REPRESENTATIVE for m in (8, 32, 256)])
    out["abl_rep"] = pd.DataFrame(rows, columns=["variant"] + [f"{s_.replace(' cp / ', '/').replace(' nw', '')} m={m}" for s_ in REPRESENTATIVE for m in (8, 32, 256)])
    out["win_systems_m8"] = {p: [s_ for s_ in SYSTEM_LABELS if prim[(prim.p == p) & (prim.m == 8) & (prim.system == s_)].chimera_vs_gpipe_pct.iloc[0] < 0] for p in spec.p}
    out["first_slowest_by_system"] = {
        s_: min((int(m) for m in prim[(prim.p == 8) & (prim.system == s_)].m
                 if (prim[(prim.p == 8) & (prim.system == s_) & (prim.m >= m)].slowest3 == "chimera").all()), default=None)
        for s_ in SYSTEM_LABELS
    }
    out["nl_slowest_by_m"] = nl[nl.p == 8].groupby("m").slowest3.apply(lambda x: float((x == "chimera").mean())).to_dict()
    out["other_slowest_by_m"] = prim[(prim.p == 8) & ~prim.system.isin(NETWORK_LIMITED)].groupby("m").slowest3.apply(lambda x: float((x == "chimera").mean())).to_dict()
    out["ref_table_p8"] = p8.pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(SYSTEM_LABELS)
    out["ref_table_p4"] = prim[prim.p == 4].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(SYSTEM_LABELS)
    return out


def finding3(ds, spec, w: Writer) -> dict:
    """Bubbles by formula and table; Chimera at p = 8, m = 16."""
    from ppsweep import build_schedule

    b = ds[["bubble_formula", "bubble_table", "length_table"]].to_dataframe().reset_index()
    b = b[["schedule", "p", "m", "bubble_formula", "bubble_table", "length_table"]]
    equal = []
    for p in spec.p:
        for m in spec.m:
            for name, opts in (("chimera", {"split": "1:1"}), ("hanayo", {"waves": 1}), ("hanayo", {"waves": 2}), ("gpipe", {})):
                try:
                    t1 = build_schedule(name, p, m, 1, 1, **opts)
                    t2 = build_schedule(name, p, m, 1, 2, **opts) if opts.get("waves") == 2 else None
                except Exception:
                    continue
                equal.append(dict(schedule=name + (" W=2" if opts.get("waves") == 2 else ""), p=p, m=m,
                                  bubble_table_equal_slots=t1.bubble_ratio(),
                                  bubble_table_w2=(t2.bubble_ratio() if t2 is not None else np.nan)))
    eq = pd.DataFrame(equal)
    b = b.merge(eq[~eq.schedule.str.contains("W=2")], on=["schedule", "p", "m"], how="left").drop(columns="bubble_table_w2")
    w2 = eq[eq.schedule.str.contains("W=2")].rename(columns={"bubble_table_w2": "bubble_table"})
    csv = pd.concat([b, w2])
    form = b.pivot(index=["schedule", "p"], columns="m", values="bubble_formula") * 100
    tabl = b.pivot(index=["schedule", "p"], columns="m", values="bubble_table") * 100
    def argmins(col):
        rows = []
        for (p, m), g in b.groupby(["p", "m"]):
            best = g[col].min()
            rows.append(dict(p=p, m=m, schedule=" = ".join(g[np.isclose(g[col], best, rtol=1e-12, atol=0)].schedule)))
        return pd.DataFrame(rows)

    smallest = argmins("bubble_formula").merge(argmins("bubble_table"), on=["p", "m"], suffixes=(" (formula)", " (table)"))
    c = b[(b.schedule == "chimera") & (b.p == 8) & (b.m == 16)].iloc[0]
    point = pd.DataFrame(
        [["formula (p−2)/(2m+p−2)", 100 * c.bubble_formula, "≈ 16"],
         ["table, F = 1 slot, B = 2 slots", 100 * c.bubble_table, "≈ 26"],
         ["table, F = B = 1 slot", 100 * c.bubble_table_equal_slots, "—"]],
        columns=["Chimera, p = 8, m = 16", "ppsweep, %", "paper, %"],
    )
    w.table(
        "f3_bubbles",
        "Finding 3: bubble ratios by formula and by table",
        csv,
        [
            ("Chimera at p = 8, m = 16", markdown(point, index=False)),
            ("Bubble by formula, %", markdown(form, "{:.1f}")),
            ("Bubble by table (F = 1, B = 2 slots), %", markdown(tabl, "{:.1f}")),
            ("Schedule with the smallest bubble", markdown(smallest, index=False)),
        ],
    )
    plt = plt_module()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
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
    w.figure("f3_bubbles", fig)
    return dict(formula=float(c.bubble_formula), table=float(c.bubble_table), equal=float(c.bubble_table_equal_slots),
                smallest=smallest)


def finding4(ds, spec, w: Writer) -> dict:
    """Table I: Hanayo vs Chimera at p = m = 8 on the nine systems."""
    d = diagonal(ds).sel(p=8, m=8)
    rows = []
    for mode in MODES:
        for s in SYSTEM_LABELS:
            tc = float(d.t_sim.sel(schedule="chimera", comm=mode, system=s))
            th = float(d.t_sim.sel(schedule="hanayo", comm=mode, system=s))
            rows.append(dict(mode=mode, system=s, variant="hanayo W=1 (swept)", t_chimera=tc, t_hanayo=th,
                             idle_chimera=float(d.idle_sim.sel(schedule="chimera", comm=mode, system=s)),
                             idle_hanayo=float(d.idle_sim.sel(schedule="hanayo", comm=mode, system=s))))
    variants = [BASE, Variant("no grad sync", grad=False), Variant("t_b = t_f", equal_fb=True)]
    ch = ablation_frame(spec, "chimera", [8], [8], list(MODES), variants, split="1:1")
    for waves in (1, 2):
        ha = ablation_frame(spec, "hanayo", [8], [8], list(MODES), variants, waves=waves)
        for (v, mode, s), grp in ha.groupby(["variant", "mode", "system"]):
            if waves == 1 and v == "as swept":
                continue
            c = ch[(ch.variant == v) & (ch["mode"] == mode) & (ch.system == s)].iloc[0]
            rows.append(dict(mode=mode, system=s, variant=f"hanayo W={waves}, {v}", t_chimera=c.t_sim, t_hanayo=grp.t_sim.iloc[0],
                             idle_chimera=c.idle_sim, idle_hanayo=grp.idle_sim.iloc[0]))
    df = pd.DataFrame(rows)
    df["diff_pct"] = pct(df.t_hanayo, df.t_chimera)
    df["paper_diff_pct"] = [PAPER_TABLE1.get(s, PAPER_TABLE1_DEFAULT) for s in df.system]

    def view(variant, mode):
        sub = df[(df.variant == variant) & (df["mode"] == mode)].set_index("system").reindex(SYSTEM_LABELS)
        out = pd.DataFrame({
            "t Chimera (s)": sub.t_chimera, "t Hanayo (s)": sub.t_hanayo,
            "idle Chimera %": 100 * sub.idle_chimera, "idle Hanayo %": 100 * sub.idle_hanayo,
            "Hanayo vs Chimera %": sub.diff_pct, "paper %": sub.paper_diff_pct,
        })
        return out

    sections = [
        (f"Table I counterpart, Hanayo W = 1 (the sweep), {PRIMARY}", markdown(view("hanayo W=1 (swept)", PRIMARY), "{:.2f}")),
        (f"Hanayo W = 2 (two waves), {PRIMARY}", markdown(view("hanayo W=2, as swept", PRIMARY), "{:.2f}")),
    ]
    comp = df[df.system.isin(SYSTEM_LABELS)].pivot_table(index="system", columns=["variant", "mode"], values="diff_pct").reindex(SYSTEM_LABELS)
    keep = [("hanayo W=1 (swept)", m) for m in MODES] + [("hanayo W=2, as swept", m) for m in MODES] + \
           [("hanayo W=1, no grad sync", PRIMARY), ("hanayo W=1, t_b = t_f", PRIMARY)]
    comp = comp[keep]
    comp.columns = [f"{v.replace('hanayo ', '').replace(' (swept)', '').replace(', as swept', '')}, {m}" for v, m in comp.columns]
    comp["paper"] = [PAPER_TABLE1.get(s, PAPER_TABLE1_DEFAULT) for s in comp.index]
    sections.append(("Hanayo vs Chimera, % step time, every mode and ablation", markdown(comp, "{:+.1f}")))
    w.table("f4_table1_hanayo_vs_chimera", "Finding 4 (Table I): Hanayo vs Chimera at p = m = 8", df, sections)

    plt = plt_module()
    fig, axes = plt.subplots(1, 2, figsize=(14, 4))
    x = np.arange(len(SYSTEM_LABELS))
    for k, (variant, colour) in enumerate((("hanayo W=1 (swept)", "tab:red"), ("hanayo W=2, as swept", "tab:purple"))):
        sub = df[(df.variant == variant) & (df["mode"] == PRIMARY)].set_index("system").reindex(SYSTEM_LABELS)
        axes[0].bar(x + (k - 0.5) * 0.38, sub.diff_pct, 0.38, color=colour, label=variant.replace(" (swept)", "").replace(", as swept", ""))
        axes[1].bar(x + (k - 0.5) * 0.38, 100 * sub.idle_hanayo, 0.38, color=colour, label=variant.replace(" (swept)", "").replace(", as swept", ""))
    paper = [PAPER_TABLE1.get(s, PAPER_TABLE1_DEFAULT) for s in SYSTEM_LABELS]
    for i, v in enumerate(paper):
        if v == PAPER_TABLE1_DEFAULT:
            axes[0].plot([i - 0.4, i + 0.4], [-13, -13], color="k", lw=2, label="paper" if i == 1 else None)
        elif v != "n/a":
            axes[0].plot([i - 0.4, i + 0.4], [float(v)] * 2, color="k", lw=2)
    sub = df[(df.variant == "hanayo W=1 (swept)") & (df["mode"] == PRIMARY)].set_index("system").reindex(SYSTEM_LABELS)
    axes[1].plot(x, 100 * sub.idle_chimera, "ko", label="chimera")
    axes[1].axhline(35, color="grey", ls=":", lw=1)
    axes[1].axhline(25, color="grey", ls=":", lw=1)
    axes[0].axhline(0, color="k", lw=0.5)
    for ax, title in zip(axes, ("Hanayo vs Chimera, % step time (black: paper)", "idle_sim, % (dotted: paper's 35 % and 25 %)")):
        ax.set_xticks(x)
        ax.set_xticklabels(SYSTEM_LABELS, rotation=40, ha="right", fontsize=8)
        ax.set_title(f"{title}; p=m=8, {PRIMARY}", fontsize=9)
        ax.legend(fontsize=7)
    w.figure("f4_table1_hanayo_vs_chimera", fig)
    return dict(df=df)


def finding5(ds, asym, spec, w: Writer) -> dict:
    """Asymmetric Chimera (1:2) against symmetric (1:1): memory and step time."""
    from ppsweep.build import build_schedule
    from ppsweep.costs import persistent_bytes_per_worker, stage_layers

    d1, d2 = diagonal(ds).sel(schedule="chimera"), diagonal(asym).sel(schedule="chimera")
    diff = pct(d2.t_sim, d1.t_sim)
    diff = d1.t_sim.copy(data=diff).to_dataframe(name="diff_pct").reset_index()[["p", "m", "comm", "system", "diff_pct"]]
    mem = pd.DataFrame({
        "peak memory 1:1 (TB)": ds.peak_memory_bytes.sel(schedule="chimera").to_series() / 1e12,
        "peak memory 1:2 (TB)": asym.peak_memory_bytes.sel(schedule="chimera").to_series() / 1e12,
        "peak activations 1:1 (TB)": ds.peak_activation_bytes.sel(schedule="chimera").to_series() / 1e12,
        "peak activations 1:2 (TB)": asym.peak_activation_bytes.sel(schedule="chimera").to_series() / 1e12,
    })
    mem["1:2 / 1:1"] = mem["peak memory 1:2 (TB)"] / mem["peak memory 1:1 (TB)"]
    # Per worker: the split moves activations between workers without lowering the bottleneck.
    per_worker = []
    for p in spec.p:
        m = 2 * p
        for split in ("1:1", "1:2"):
            table = build_schedule("chimera", p, m, spec.f_slots, spec.b_slots, split=split)
            b = spec.model.microbatch_size(m)
            act = table.peak_activations_per_worker(stage_layers(spec.model, table) * spec.model.layer_activation_bytes(b))
            tot = act + persistent_bytes_per_worker(spec.model, table)
            per_worker += [dict(p=p, m=m, split=split, worker=k, activation_TB=a / 1e12, total_TB=t / 1e12) for k, (a, t) in enumerate(zip(act, tot))]
    pw = pd.DataFrame(per_worker)
    variants = [BASE, Variant("no grad sync", grad=False)]
    abl = pd.concat([
        ablation_frame(spec, "chimera", spec.p, [8, 16, 32], [PRIMARY], variants, split=s).assign(split=s) for s in ("1:1", "1:2")
    ])
    ablw = abl.pivot_table(index=["p", "m", "mode", "variant", "system"], columns="split", values="t_sim").reset_index()
    ablw["diff_pct"] = pct(ablw["1:2"], ablw["1:1"])
    prim = diff[diff.comm == PRIMARY]
    sections = []
    for p in spec.p:
        tab = prim[prim.p == p].pivot(index="system", columns="m", values="diff_pct").reindex(SYSTEM_LABELS)
        sections.append((f"Chimera 1:2 vs 1:1, % step time, p = {p}, {PRIMARY} (negative: 1:2 faster)", markdown(tab, "{:+.2f}")))
    tab = ablw[ablw.variant == "no grad sync"].pivot_table(index="system", columns=["p", "m"], values="diff_pct").reindex(SYSTEM_LABELS)
    tab.columns = [f"p={p} m={m}" for p, m in tab.columns]
    sections.append((f"Ablation 'no grad sync': Chimera 1:2 vs 1:1, %, {PRIMARY}", markdown(tab, "{:+.2f}")))
    sections.append(("Bottleneck worker's peak memory (no memory cap; global batch 256; the same on every system)", markdown(mem, "{:.4g}")))
    pwt = pw.pivot_table(index=["p", "split"], columns="worker", values="total_TB")
    sections.append(("Peak memory per worker at m = 2p, TB (persistent + activations)", markdown(pwt, "{:.3g}")))
    csv = pd.concat([diff.rename(columns={"comm": "mode"}).assign(variant="as swept"), ablw[ablw.variant != "as swept"]])
    w.table("f5_asym_chimera", "Finding 5: asymmetric Chimera (1:2)", csv, sections)
    pw.to_csv(w.out / "f5_asym_memory_per_worker.csv", index=False, float_format="%.6g")

    plt = plt_module()
    fig, axes = plt.subplots(1, 3, figsize=(16, 3.8))
    for ax, p in zip(axes[:2], spec.p):
        for s in SYSTEM_LABELS:
            sub = prim[(prim.p == p) & (prim.system == s)]
            ax.plot(sub.m, sub.diff_pct, label=s, **system_style(s))
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
    w.figure("f5_asym_chimera", fig)
    return dict(
        mem_ratio=(float(mem["1:2 / 1:1"].min()), float(mem["1:2 / 1:1"].max())),
        prim=prim, ablw=ablw, pw=pw,
    )


# ---------------------------------------------------------------------------------------------
# REPORT.md
# ---------------------------------------------------------------------------------------------
def fmt_range(values, unit: str = " %") -> str:
    v = np.asarray(list(values), dtype=float)
    return f"{np.nanmin(v):+.1f} … {np.nanmax(v):+.1f}{unit}"


def verdict(ok: bool, yes: str = "agrees", no: str = "does not agree") -> str:
    return f"**{yes}**" if ok else f"**{no}**"


def write_report(w: Writer, r1, r2, r3, r4, r5, sizes: dict) -> None:
    """results/paper/REPORT.md: finding by finding, ppsweep's numbers and the verdict (all recomputed)."""
    df4 = r4["df"]
    t1 = df4[(df4.variant == "hanayo W=1 (swept)") & (df4["mode"] == PRIMARY)].set_index("system").reindex(SYSTEM_LABELS)
    t2 = df4[(df4.variant == "hanayo W=2, as swept") & (df4["mode"] == PRIMARY)].set_index("system").reindex(SYSTEM_LABELS)
    tfb = df4[(df4.variant == "hanayo W=1, t_b = t_f") & (df4["mode"] == PRIMARY)].set_index("system").reindex(SYSTEM_LABELS)
    tng = df4[(df4.variant == "hanayo W=1, no grad sync") & (df4["mode"] == PRIMARY)].set_index("system").reindex(SYSTEM_LABELS)
    not_nl = [s for s in SYSTEM_LABELS if RATIO_CLASS[s] <= 0]
    prim5 = r5["prim"]
    a4 = prim5[(prim5.p == 4) & prim5.system.str.endswith("fast nw")]
    a8 = prim5[(prim5.p == 8) & (prim5.m <= 16)]
    ng5 = r5["ablw"][(r5["ablw"].variant == "no grad sync") & (r5["ablw"].p == 8) & (r5["ablw"].m <= 16)]
    span, free, worst, mx = r1["span"], r1["free_max"], r1["worst"], r1["max_abs"]
    smallest = r3["smallest"]
    chim_formula_all = bool(smallest["schedule (formula)"].str.contains("chimera").all())
    chim_table = smallest[smallest["schedule (table)"].str.contains("chimera")]
    chim_table_pts = ", ".join(f"p = {p}, m = {m}" for p, m in zip(chim_table.p, chim_table.m))
    rise = r2["rise"]
    slow_cols = rise.loc[[s for s in SYSTEM_LABELS if s.endswith("slow nw")]]
    rising = [(s, c, float(v)) for s, row in slow_cols.iterrows() for c, v in row.items() if v > 0]
    wins8 = r2["max_win_m"][8]
    win_all = {p: len(v) for p, v in r2["win_systems_m8"].items()}
    lost8 = {p: [s for s in SYSTEM_LABELS if s not in v] for p, v in r2["win_systems_m8"].items()}
    as256 = r2["abl:as swept:m256"]
    nl_by_m, other_by_m = r2["nl_slowest_by_m"], r2["other_slowest_by_m"]
    first_slowest_nl = min((m for m, f in nl_by_m.items() if f == 1.0), default=None)
    first_slowest_other = min((m for m, f in other_by_m.items() if f == 1.0), default=None)

    ok1a = mx["blocking"] < 3.0 and free < 1e-6
    ok1b = r1["act_ratio_max"] <= 1 + 1e-9
    ok2c = wins8 in (16, 32)
    ok2d = r2["spread_m256"][1] < 5.0
    ok2e = len(rising) > 0 and max(v for *_, v in rising) > 1.0
    ok3 = abs(100 * r3["formula"] - 16) < 1 and abs(100 * r3["table"] - 26) < 2
    paper_sign = {s: (-1 if PAPER_TABLE1.get(s, PAPER_TABLE1_DEFAULT).startswith("-") else 1) for s in SYSTEM_LABELS if PAPER_TABLE1.get(s) != "n/a"}
    ok4_w1 = all(np.sign(t1.loc[s, "diff_pct"]) == v for s, v in paper_sign.items())
    ok4_w2 = all(np.sign(t2.loc[s, "diff_pct"]) == v for s, v in paper_sign.items())
    w2_good = [s for s in not_nl]
    ok5_mem = r5["mem_ratio"][0] > 0.999
    ok5_time = float(a4.diff_pct.min()) < -3 and float(a8.diff_pct.max()) > 0

    L: list[str] = []
    add = L.append
    add("# Reproducing the seed paper with ppsweep\n")
    add("Seed paper: *A Tabular Schedule Abstraction for Communication-Aware Evaluation of Pipeline-Parallel "
        "LLM Training* (Barley, Leis, Klenk, Fröning, ISPDC 2026). Generated by `python scripts/reproduce_paper.py` "
        "from the sweeps `conf/sweep/paper.yaml` and `conf/sweep/paper_asym.yaml` plus single-assumption runs through "
        "`ppsweep.engine.simulate`; every number is recomputed on each run. Per-finding tables (markdown and CSV, all "
        "modes) and figures sit beside this file.\n")
    add("## Setup\n")
    add("- Model `megatron_128l`: 128 layers, hidden 4096, 32 heads, sequence 4096, vocabulary 51200, **global batch "
        "G = 256 sequences** (fixed; microbatch b = G/m = 32 … 1), bf16, no activation recomputation.")
    add("- Schedules: GPipe, 1F1B, Chimera (split 1:1; 1:2 in `paper_asym`), Hanayo (1 wave; 2 waves as an ablation). "
        "p ∈ {4, 8}, m ∈ {8, 16, 32, 64, 128, 256}; comm modes `overlap`, `blocking`, `contention`.")
    add("- Nine systems: peak compute {1e14, 1e15, 1e16} FLOP/s (memory bandwidth scaled with it, 3.35e11 … 3.35e13 B/s) "
        "× networks slow (5 GB/s, 5 µs), mid (50 GB/s, 500 ns), fast (500 GB/s, 50 ns). The sweep covers the 3 × 3 "
        "bandwidth × latency grid and the analysis takes its diagonal. Labels: `<compute> cp / <network> nw`.")
    add(f"- {sizes['points']:,} + {sizes['points_asym']:,} swept points.")
    add(f"- **Primary comm mode: `{PRIMARY}`** — the only mode in which GPipe and 1F1B are runtime-equivalent, as the "
        "paper reports (finding 1). Percentages are `100·(t_a/t_b − 1)`; negative means `a` is faster.\n")
    add("Three properties of the cost model shape everything below:")
    add("- **Only the compute/network ratio matters.** Compute and network are scaled together (latency with "
        "1/bandwidth) and every layer is compute-bound at b ≥ 1 (per layer 1.9e12·b FLOPs against (0.4 + 3.3·b) GB "
        "moved, with 3.35e-3 bytes per FLOP of memory bandwidth), so relative results depend only on the ratio class: "
        "slow/slow ≡ mid/mid ≡ fast/fast, slow cp/mid nw ≡ mid cp/fast nw, mid cp/slow nw ≡ fast cp/mid nw. Five classes, "
        "not nine systems. The compute/memory roofline explains none of the differences at G = 256.")
    add("- **Messages are large.** One message carries b·s·h·2 bytes: 1.07 GB at m = 8, 34 MB at m = 256. On the slow "
        "network that is 0.21 s against 3.1 ms of forward compute per stage (p = 8, fast compute). Bandwidth, not "
        "latency, dominates every network cost.")
    add("- **Chimera's gradient sync is large and per step.** At p = 8 a stage holds 16 layers = 6.4 GB of bf16 "
        "gradients; its ring all-reduce over 2 replicas takes 1.3 s on the slow network, whatever m or G.\n")

    # ---------------- summary -----------------------------------------------------------------
    add("## Summary\n")
    rows = [
        ("1a GPipe and 1F1B have the same step time",
         f"free comm: ≤ {free:.0e} %; `blocking` ≤ {mx['blocking']:.1f} %; `overlap` ≤ {mx['overlap']:.0f} %; `contention` ≤ {mx['contention']:.0f} %",
         verdict(ok1a, "agrees in `blocking`") + " (and exactly without communication); not in `overlap`/`contention`"),
        ("1b 1F1B has the lower activation peak",
         f"1F1B / GPipe = {r1['act_ratio_min']:.3f} … {r1['act_ratio_max']:.2f} (equal at m = p)",
         verdict(ok1b) + " (equal, not lower, at m = p)"),
        ("2a Chimera has the smallest bubble by formula and by table",
         f"formula: {'every' if chim_formula_all else 'not every'} (p, m); table: only {chim_table_pts}",
         "**agrees by formula**; by table only at m ≤ 2p"),
        ("2b On network-limited systems Chimera is the slowest",
         f"slowest of GPipe/1F1B/Chimera at p = 8 from m = {first_slowest_nl} on network-limited systems, from m = {first_slowest_other} on the others",
         "**partly**: slowest at large m on every system"),
        ("2c Chimera wins only at m ≲ 16–32, on fast networks, by up to ~15 % over GPipe",
         f"wins at m ≤ {r2['max_win_m'][8]} (p = 8), m ≤ {r2['max_win_m'][4]} (p = 4), by up to {r2['max_gain']:.1f} %; at m = 8 on {win_all[8]}/9 systems (p = 8), {win_all[4]}/9 (p = 4)",
         verdict(ok2c, "crossover agrees") + "; gain larger and not limited to fast networks"),
        ("2d Above m ≈ 64 the schedules converge",
         f"GPipe/1F1B/Chimera spread at m = 256: {r2['spread_m256'][0]:.0f} … {r2['spread_m256'][1]:.0f} %",
         verdict(ok2d) + "; converges with backward = forward (t_b = t_f)"),
        ("2e On slow networks Chimera's step time rises with m",
         f"t(256)/t(64) − 1 on slow-network systems: {fmt_range(slow_cols.values.ravel())}",
         verdict(ok2e) + " at G = 256; rises for every schedule at G = 8"),
        ("3 Chimera at p = 8, m = 16: bubble ~16 % by formula, ~26 % by table",
         f"{100 * r3['formula']:.1f} % (6/38), {100 * r3['table']:.1f} %", verdict(ok3)),
        ("4 Table I: Hanayo 12–14 % faster than Chimera on fast/mid networks, idle 35 → 25 %; +12.3 % fast cp/slow nw; −2.3 % mid cp/slow nw",
         f"Hanayo W = 1: {fmt_range(t1.diff_pct)}, idle {100 * t1.idle_chimera.min():.0f} → {100 * t1.idle_hanayo.min():.0f} % (best); W = 2: {fmt_range(t2.loc[not_nl].diff_pct)} where the network is not the bottleneck, idle {100 * t2.loc[not_nl].idle_chimera.min():.0f} → {100 * t2.loc[not_nl].idle_hanayo.min():.0f}–{100 * t2.loc[not_nl].idle_hanayo.max():.0f} %",
         verdict(ok4_w1) + " with W = 1; W = 2 agrees where the network is not the bottleneck, not on network-limited systems"),
        ("5 Asymmetric Chimera (1:2): peak memory not lower; ~5 % faster at p = 4 on a fast network; slower at p = 8 with few microbatches",
         f"peak memory ratio {r5['mem_ratio'][0]:.3f} … {r5['mem_ratio'][1]:.3f}; p = 4, fast nw: {fmt_range(a4.diff_pct)}; p = 8, m ≤ 16: {fmt_range(a8.diff_pct)}",
         verdict(ok5_mem, "memory agrees", "memory does not agree") + "; " + verdict(ok5_time, "step time agrees", "step time does not")),
    ]
    add(markdown(pd.DataFrame(rows, columns=["paper finding", "ppsweep", "verdict"]), index=False))

    # ---------------- finding 1 ---------------------------------------------------------------
    add("\n## Finding 1: GPipe vs 1F1B\n")
    add("**Paper.** GPipe and 1F1B have the same simulated step time on every system; 1F1B has the lower "
        "activation-memory peak.\n")
    add(f"**Step time.** With free communication (α = 0, β = ∞, through the Python API) the two are equal to "
        f"{free:.0e} % at every p, m, compute level and mode: with equal stages both take (m + p − 1)(t_f + t_b) "
        "(also checked by `tests/test_paper.py`). With communication, 1F1B vs GPipe in % (min … max over p and m):\n")
    add(markdown(span, index=True))
    add("Largest differences: " + "; ".join(f"`{mode}` {v[3]:+.1f} % ({v[0]}, p = {v[1]}, m = {v[2]})" for mode, v in sorted(worst.items())) + ".\n")
    bc = r1["by_class"]
    add("**Why.** In 1F1B's steady state each worker alternates one forward and one backward, so a message round trip "
        "between neighbouring stages sits between consecutive operations and cannot be hidden. GPipe runs all forwards, "
        "then all backwards, back to back, so in `overlap` its messages pipeline behind compute; `contention` behaves "
        "the same until links saturate (only on fast cp / slow nw). In `blocking` the sender is busy while its message "
        "is on the wire, so GPipe pays every message on its workers too and the two cost the same (1F1B a hair less). "
        "In `overlap` the gap grows with the network's share of the step: "
        + "; ".join(f"{CLASS_WORDS[k]}: {bc[('overlap', k)][0]:+.2f} … {bc[('overlap', k)][1]:+.2f} %" for k in sorted(CLASS_WORDS))
        + f". **The paper's \"runtime-equivalent\" is `blocking`** (within {mx['blocking']:.1f} %), so `blocking` is this "
        "report's primary mode.\n")
    add(f"**Memory.** 1F1B's activation peak on the bottleneck worker is {r1['act_ratio_min']:.3f} … "
        f"{r1['act_ratio_max']:.2f} × GPipe's, equal where m = p ({', '.join(f'p = {p}, m = {m}' for p, m in r1['act_equal_at'])}), "
        "where 1F1B also holds every microbatch. GPipe holds the whole batch's activations whatever m (26.7 TB at "
        "p = 4: G = 256 × 4096 tokens without recomputation; absolute sizes are unrealistic, ratios are not). "
        + "Verdict: " + verdict(ok1b) + ", with equality at m = p.\n")
    add("![finding 1](f1_gpipe_vs_1f1b.png)\n\nTables: [f1_gpipe_vs_1f1b.md](f1_gpipe_vs_1f1b.md).\n")

    # ---------------- finding 2 ---------------------------------------------------------------
    add("## Finding 2: Chimera against GPipe and 1F1B\n")
    add("**Paper.** Chimera has the smallest bubble by formula and table, but on network-limited systems it is the "
        "slowest; it wins only at low microbatch counts (m ≤ 16–32) on fast networks, by up to about 15 % over GPipe; "
        "above m ≈ 64 the schedules converge; on slow networks its step time rises with m.\n")
    add(f"**ppsweep**, Chimera vs GPipe in %, `{PRIMARY}`, p = 8:\n")
    add(markdown(r2["ref_table_p8"], "{:+.1f}"))
    add("p = 4:\n")
    add(markdown(r2["ref_table_p4"], "{:+.1f}"))
    add(f"- *Smallest bubble.* By formula at {'every' if chim_formula_all else 'not every'} (p, m); by table (F = 1, "
        f"B = 2 slots) only at {chim_table_pts}, i.e. m ≤ 2p (finding 3). **Partly agrees.**")
    add(f"- *Wins at low m.* Chimera beats GPipe at m ≤ {r2['max_win_m'][8]} (p = 8) and m ≤ {r2['max_win_m'][4]} "
        f"(p = 4), by up to {r2['max_gain']:.1f} %: the crossover between m = 16 and 32 at p = 8 {verdict(ok2c)}. "
        f"But at m = 8 it wins on {win_all[8]} of 9 systems at p = 8 and {win_all[4]} of 9 at p = 4"
        + (f" (it loses only on {', '.join(lost8[4])} at p = 4)" if lost8[4] else "")
        + f", by up to {r2['max_gain']:.0f} % rather than 15 %: **not limited to fast networks.**")
    add(f"- *Slowest on network-limited systems* ({', '.join(NETWORK_LIMITED)}). At p = 8 Chimera is the slowest of "
        f"the three from m = {first_slowest_nl} there ({', '.join(f'{s}: m ≥ {m}' for s, m in r2['first_slowest_by_system'].items() if s in NETWORK_LIMITED)}), "
        f"and from m = {first_slowest_other} on the other systems "
        "(Hanayo, when included, is slower still). The ranking agrees at large m, but in ppsweep large m, not the "
        "network, is what makes Chimera slowest. **Partly agrees.**")
    add(f"- *Convergence above m ≈ 64.* Verdict: {verdict(ok2d)}: at m = 256 Chimera is still {as256[0]:+.1f} … {as256[1]:+.1f} % "
        f"behind GPipe; the spread of the three is {r2['spread_m256'][0]:.0f} … {r2['spread_m256'][1]:.0f} %.")
    rising_txt = ", ".join(f"{s} {c} {v:+.2f} %" for s, c, v in rising) or "none"
    add(f"- *Step time rising with m on slow networks.* Verdict: {verdict(ok2e)} at G = 256. Chimera's t(256)/t(64) − 1, %:\n")
    add(markdown(rise, "{:+.2f}"))
    add(f"  Rising entries on slow-network systems: {rising_txt}. Everywhere else Chimera's step time keeps falling "
        "with m (fixed global batch: more, smaller microbatches fill the pipeline better).\n")
    add(f"**Which assumption explains the differences.** Each row changes one assumption (Python API, p = 8, "
        f"`{PRIMARY}`, Chimera vs GPipe in %; columns: system and m):\n")
    add(markdown(r2["abl_rep"], "{:+.1f}", index=False))
    nog, tbf, g8, g2k = (r2[f"abl:{k}:table"] for k in ("no grad sync", "t_b = t_f", "G = 8", "G = 2048"))
    asw = r2["ref_table_p8"]
    add(f"- **Backward twice forward, with Chimera's units concatenated (its table).** Chimera's per-worker order is "
        "read off the paper's equal-slot diagram, one unit of p microbatches after another. With B = 2F the two "
        "directions no longer mesh: every unit leaves p − 2 more idle slots per worker, so the table's bubble tends to "
        "(p − 2)/(4p − 2) = 20 % at p = 8 instead of 0 (finding 3). With t_b = t_f (same compute per microbatch) "
        f"Chimera converges with GPipe at m = 256 ({tbf.loc['mid cp / mid nw', 256]:+.1f} % on mid/mid, "
        f"{tbf.loc['slow cp / fast nw', 256]:+.1f} % on slow cp / fast nw). This assumption explains the missing "
        "convergence and the large-m losses on every system.")
    add(f"- **Gradient synchronisation.** Without it (grad_bytes = 0) Chimera does *best* relative to GPipe where the "
        f"network is slow (fast cp / slow nw: {nog.loc['fast cp / slow nw', 8]:+.1f} % at m = 8 instead of "
        f"{asw.loc['fast cp / slow nw', 8]:+.1f} %, {nog.loc['fast cp / slow nw', 256]:+.1f} % instead of "
        f"{asw.loc['fast cp / slow nw', 256]:+.1f} % at m = 256). In ppsweep what makes Chimera lose on slow networks is "
        "its once-per-step all-reduce, not its pipeline messages (it sends fewer per microbatch on the critical path "
        "than GPipe pays in `blocking`).")
    add(f"- **Global batch.** The sync does not shrink with G, the compute does. G = 2048 therefore looks like no sync "
        f"(fast cp / slow nw, m = 8: {g2k.loc['fast cp / slow nw', 8]:+.1f} %), and G = 8 makes the sync dominate "
        f"({g8.loc['fast cp / slow nw', 8]:+.0f} %). G = 8 also makes the layers memory-bound at large m (b = 1/32: the "
        "weights are read once per microbatch-stage), so step times *rise* with m from m = 64, for every schedule on "
        "every system (t(256)/t(64) − 1 below, p = 8): that reproduces \"rises with m\", but not its restriction to "
        "Chimera on slow networks.\n")
    add(markdown(r2["g8rise"], "{:+.1f}"))
    add("\n![finding 2](f2_chimera_vs_gpipe.png)\n\nTables: [f2_chimera_vs_gpipe.md](f2_chimera_vs_gpipe.md).\n")

    # ---------------- finding 3 ---------------------------------------------------------------
    add("## Finding 3: Chimera's bubble at p = 8, m = 16\n")
    add(f"**Paper.** About 16 % by formula and about 26 % by its table. **ppsweep.** Formula (p − 2)/(2m + p − 2) = 6/38 "
        f"= {100 * r3['formula']:.1f} %; table with F = 1, B = 2 slots: {100 * r3['table']:.1f} % (closed form "
        f"(p − 2)(m + p)/((p − 2)(m + p) + 3mp) = 144/528); with F = B = 1 slot the table equals the formula "
        f"({100 * r3['equal']:.1f} %). Verdict: {verdict(ok3)} ({100 * r3['table']:.1f} % against ~26 %). The gap between formula and table is the "
        "B = 2F effect of finding 2; the formula counts equal F and B slots. (Hanayo's `bubble_formula` in ppsweep is "
        "the closed form of its F = 1, B = 2 table, so its formula and table coincide; its equal-slot figure "
        "(p − 1)/(2Wm + p − 1) is the `bubble_table_equal_slots` column of `f3_bubbles.csv`.) Smallest bubble per (p, m):\n")
    add(markdown(smallest, index=False))
    add("![finding 3](f3_bubbles.png)\n\nTables: [f3_bubbles.md](f3_bubbles.md).\n")

    # ---------------- finding 4 ---------------------------------------------------------------
    add("## Finding 4 (Table I): Hanayo vs Chimera at p = m = 8\n")
    add("**Paper.** Hanayo about 12–14 % faster on fast and mid networks (idle ratio about 35 % → 25 %); 12.3 % slower "
        "on the slow network with fast compute; only 2.3 % faster on the slow network with mid compute.\n")

    def t_view(t):
        return pd.DataFrame({"t Chimera (s)": t.t_chimera, "t Hanayo (s)": t.t_hanayo, "idle Chimera %": 100 * t.idle_chimera,
                             "idle Hanayo %": 100 * t.idle_hanayo, "Hanayo vs Chimera %": t.diff_pct, "paper %": t.paper_diff_pct})

    add(f"**ppsweep, Hanayo with one wave (the sweep), `{PRIMARY}`:**\n")
    add(markdown(t_view(t1), "{:.2f}"))
    add(f"Verdict: {verdict(ok4_w1)}: with one wave Hanayo is slower than Chimera on every system ({fmt_range(t1.diff_pct)}). "
        f"Chimera's idle ratio ({100 * t1.idle_chimera.min():.0f} % where the network is fast) matches the paper's 35 %; "
        f"Hanayo's ({100 * t1.idle_hanayo.min():.0f} % at best) is far from 25 %: its one-wave table (F = 1, B = 2) "
        "already has more bubble than Chimera's (36.8 % against 33.3 %).\n")
    add("**Hanayo with two waves** (one assumption changed: `waves = 2`):\n")
    add(markdown(t_view(t2), "{:.2f}"))
    add(f"Where the network is not the bottleneck ({', '.join(not_nl)}) two waves give {fmt_range(t2.loc[not_nl].diff_pct)} "
        f"and idle {100 * t2.loc[not_nl].idle_chimera.min():.0f} → {100 * t2.loc[not_nl].idle_hanayo.min():.0f}–"
        f"{100 * t2.loc[not_nl].idle_hanayo.max():.0f} %: the paper's 12–14 % and 35 → 25 %. So the paper's Hanayo "
        "behaves like ppsweep's two-wave Hanayo (ppsweep cannot tell which wave count the paper used). On the "
        "network-limited systems ppsweep penalises Hanayo much more than the paper does (fast cp / mid nw "
        f"{t2.loc['fast cp / mid nw', 'diff_pct']:+.1f} % against ≈ −13 %; mid cp / slow nw "
        f"{t2.loc['mid cp / slow nw', 'diff_pct']:+.1f} % against −2.3 %; fast cp / slow nw "
        f"{t2.loc['fast cp / slow nw', 'diff_pct']:+.0f} % against +12.3 %): a two-wave microbatch crosses "
        "4(p − 1) = 28 worker boundaries each way instead of Chimera's 7, each with a 1.07 GB message at m = 8. "
        f"Neither other assumption closes the gap: without Chimera's gradient sync Hanayo (W = 1) looks worse still "
        f"({fmt_range(tng.diff_pct)}), and t_b = t_f moves the comparison by at most "
        f"{float(np.max(np.abs(tfb.diff_pct - t1.diff_pct))):.1f} points. The paper's numbers are consistent with about "
        "10× less communication than ppsweep's b·s·h-byte messages (its +12.3 % on fast cp / slow nw is ppsweep's "
        f"{t2.loc['fast cp / mid nw', 'diff_pct']:+.1f} % one network step faster), which this report cannot pin to "
        "one assumption. All modes and ablations, Hanayo vs Chimera in %:\n")
    add(w.md["f4_table1_hanayo_vs_chimera"].split("*Hanayo vs Chimera, % step time, every mode and ablation*")[1].strip() + "\n")
    add("\n![finding 4](f4_table1_hanayo_vs_chimera.png)\n\nTables: [f4_table1_hanayo_vs_chimera.md](f4_table1_hanayo_vs_chimera.md).\n")

    # ---------------- finding 5 ---------------------------------------------------------------
    add("## Finding 5: asymmetric Chimera (1:2 split)\n")
    add("**Paper.** The 1:2 split does not lower the global peak memory; it gains about 5 % at p = 4 on a fast network "
        "and loses at p = 8 with few microbatches.\n")
    add(f"**Memory: {'agrees' if ok5_mem else 'does not agree'}.** The bottleneck worker's peak memory with 1:2 is "
        f"{r5['mem_ratio'][0]:.3f} … {r5['mem_ratio'][1]:.3f} × that with 1:1. The split lowers the edge workers, but "
        "workers p/2 − 1 and p/2 hold p/2 activations of a first-half and p/2 of a second-half stage at once: p "
        "stage-activations of 1/p of the model for any split. Peak memory per worker at m = 2p, TB:\n")
    add(markdown(r5["pw"].pivot_table(index=["p", "split"], columns="worker", values="total_TB"), "{:.3g}"))
    a8s = a8[a8.system.str.endswith("slow nw")]
    add(f"**Step time: {'agrees' if ok5_time else 'does not agree'}.** At p = 4 on fast networks 1:2 changes the step "
        f"time by {fmt_range(a4.diff_pct, ' %')} (not −5 %); at p = 8 with m ≤ 16 by {fmt_range(a8.diff_pct)}, "
        f"and on slow networks it *gains* ({fmt_range(a8s.diff_pct)}) instead of losing. Every worker holds 2/p of the "
        "layers under any split, so compute per worker does not change; what changes is the size of the stages whose "
        "gradients are all-reduced (under 1:2 a first-half stage carries 1/3 of a worker's layers, a second-half stage "
        "2/3) and so when each synchronisation ends; on slow networks that moves the step time either way (see the "
        f"tables: from {prim5.diff_pct.min():+.1f} % to {prim5.diff_pct.max():+.1f} %). Without gradient sync (grad_bytes = 0) the effect at p = 8, m ≤ 16 "
        f"shrinks to {fmt_range(ng5.diff_pct)}. Nothing in ppsweep's model lets 1:2 gain 5 % at p = 4 on a fast "
        "network: with equal compute per worker and cheap communication only the fill and drain through unequal "
        "stages change, by about 0.1 %.\n")
    add(w.md["f5_asym_chimera"].split("*Bottleneck worker's peak memory")[0])
    add("![finding 5](f5_asym_chimera.png)\n\nTables: [f5_asym_chimera.md](f5_asym_chimera.md).\n")

    # ---------------- conclusion --------------------------------------------------------------
    add("## What reproduces and what does not\n")
    add(f"- **Reproduces:** GPipe ≡ 1F1B in step time (exactly without communication, within {mx['blocking']:.1f} % in "
        "`blocking`); 1F1B's lower activation peak (equal at m = p); Chimera's smallest bubble by formula; its "
        f"{100 * r3['formula']:.0f} % / {100 * r3['table']:.0f} % bubble at p = 8, m = 16; its win at low m with the "
        "crossover between m = 16 and 32 (p = 8); its being slowest at large m; the 1:2 split's unchanged peak memory; "
        "Table I's Hanayo advantage and idle ratios where the network is not the bottleneck — **if Hanayo runs two "
        "waves**.")
    add(f"- **Does not reproduce:** GPipe ≡ 1F1B in `overlap` and `contention` (1F1B up to {mx['overlap']:.0f} % "
        "slower); Chimera's smallest bubble by table beyond m = 2p; Chimera's win being limited to fast networks and "
        f"to ~15 % (ppsweep: up to {r2['max_gain']:.0f} %, on almost every system at m = 8); convergence above m = 64 "
        f"(Chimera stays {as256[0]:.0f}–{as256[1]:.0f} % behind); Chimera's step time rising with m on slow networks "
        "(only with a small global batch, and then for every schedule); Table I with one-wave Hanayo, and its "
        "network-limited rows with either wave count; the 1:2 split's 5 % gain at p = 4 and its loss at p = 8.")
    add("- **Assumptions that explain the differences:** the comm mode (`blocking` is the paper's, finding 1); "
        "backward twice forward in Chimera's concatenated units (no convergence, finding 2); Chimera's per-step "
        "gradient sync and, through it, the global batch (the slow-network behaviour, findings 2 and 5); Hanayo's wave "
        "count (finding 4). The compute/memory roofline is compute-bound everywhere at G = 256 and explains nothing; "
        "it matters only for small global batches (G = 8).")
    (w.out / "REPORT.md").write_text("\n".join(L) + "\n")


# ---------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="recompute the sweeps' stores from scratch")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="Hydra override for both sweeps (repeatable), e.g. engine.compilation_cache=null")
    parser.add_argument("--out", type=Path, default=OUT, help="output directory (default results/paper)")
    args = parser.parse_args(argv)
    start = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    ds, spec = run_or_load("paper", args.override, args.fresh, log)
    asym, spec_asym = run_or_load("paper_asym", args.override, args.fresh, log)
    t_sweeps = time.perf_counter() - start
    w = Writer(args.out)
    r1 = finding1(ds, spec, w)
    log("finding 1 written")
    r2 = finding2(ds, spec, w)
    log("finding 2 written")
    r3 = finding3(ds, spec, w)
    log("finding 3 written")
    r4 = finding4(ds, spec, w)
    log("finding 4 written")
    r5 = finding5(ds, asym, spec, w)
    log("finding 5 written")
    write_report(w, r1, r2, r3, r4, r5, dict(points=spec.n_points, points_asym=spec_asym.n_points))
    log(f"done: {args.out} (sweeps {t_sweeps:.0f} s, total {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
