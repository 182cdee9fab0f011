"""One function per finding of the paper: its tables, its measured numbers and the report's numbers.

Each ``findingN`` returns a :class:`Finding`: the long CSV table, the markdown sections of
``<stem>.md``, extra CSVs, ``measured`` (per claim id and choice key, the value of each case, for
:func:`ppsweep.paper.verdict.verdicts`) and ``numbers`` (what the report's prose and the figures
quote). No function here decides a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ppsweep.paper.claims import PRIMARY_MODE as PRIMARY
from ppsweep.paper.claims import BY_ID, PRIMARY_WAVES, TABLE1
from ppsweep.paper.output import markdown, pct
from ppsweep.paper.sweeps import BASE, EQUAL_FB, FREE, NO_GRAD, Variant, ablation_frame, diagonal
from ppsweep.paper.systems import BY_LABEL, LABELS, MODES, NETWORK_LIMITED, REPRESENTATIVE, SYSTEMS


@dataclass
class Finding:
    """What one finding computes.

    Attributes:
      stem: file stem in results/paper/.
      title: title of ``<stem>.md``.
      csv: the long table (every mode and point).
      sections: ``(heading, markdown table)`` of ``<stem>.md``.
      extra_csv: further CSVs, by file stem.
      measured: per claim id, per choice key (comm mode, ``"<mode>, W = 2"``, or ``""``), the
        measured value of each case (a Series indexed by case label).
      numbers: values the report and the figures quote.
    """

    stem: str
    title: str
    csv: pd.DataFrame
    sections: list[tuple[str, str]]
    extra_csv: dict[str, pd.DataFrame] = field(default_factory=dict)
    measured: dict[str, dict[str, pd.Series]] = field(default_factory=dict)
    numbers: dict[str, Any] = field(default_factory=dict)

    def section(self, heading_start: str) -> str:
        """The markdown table of the first section whose heading starts with ``heading_start``."""
        for heading, table in self.sections:
            if heading.startswith(heading_start):
                return table
        raise KeyError(f"{self.stem}: no section starting {heading_start!r}")


def _cases(df: pd.DataFrame, value: str, keys: list[str]) -> pd.Series:
    """A Series of ``df[value]`` labelled ``"k1 = v1, k2 = v2"`` (system labels bare)."""
    labels = [", ".join(str(v) if k == "system" else f"{k} = {v}" for k, v in zip(keys, row)) for row in df[keys].itertuples(index=False)]
    return pd.Series(df[value].to_numpy(dtype=float), index=labels)


def _by_mode(df: pd.DataFrame, value: str, keys: list[str], mode_col: str = "comm") -> dict[str, pd.Series]:
    """``{mode: _cases(rows of that mode)}`` for every mode in ``df``."""
    return {mode: _cases(df[df[mode_col] == mode], value, keys) for mode in MODES if (df[mode_col] == mode).any()}


def check_spec(spec) -> None:
    """Raise ValueError unless the sweep has what every finding reads: the primary mode, p = 8 and
    m ∈ {8, 16} (Table I at p = m = 8, Chimera's bubble at p = 8, m = 16)."""
    if PRIMARY not in spec.comm:
        raise ValueError(f"comm.mode: must include {PRIMARY!r} (the primary mode), got {list(spec.comm)}")
    if 8 not in spec.p:
        raise ValueError(f"p: must include 8, got {list(spec.p)}")
    if not {8, 16} <= set(spec.m):
        raise ValueError(f"m: must include 8 and 16, got {list(spec.m)}")


def finding1(ds, spec) -> Finding:
    """GPipe vs 1F1B: step time per mode and system; free communication; activation peak.

    Args:
      ds: the ``paper`` store (loaded).
      spec: its SweepSpec.
    """
    d = diagonal(ds)
    g, f = d.t_sim.sel(schedule="gpipe"), d.t_sim.sel(schedule="1f1b")
    diff = pct(f, g)  # (p, m, comm, system)
    diff = d.t_sim.sel(schedule="gpipe").copy(data=diff)
    long = diff.to_dataframe(name="diff_pct").reset_index()[["p", "m", "comm", "system", "diff_pct"]]
    long = long.merge(g.to_dataframe(name="t_gpipe").reset_index()[["p", "m", "comm", "system", "t_gpipe"]])
    long = long.merge(f.to_dataframe(name="t_1f1b").reset_index()[["p", "m", "comm", "system", "t_1f1b"]])

    free = pd.concat([ablation_frame(spec, s, spec.p, spec.m, list(spec.comm), [FREE]) for s in ("gpipe", "1f1b")])
    fp = free.pivot_table(index=["p", "m", "mode", "system"], columns="schedule", values="t_sim").reset_index()
    fp["diff_pct"] = pct(fp["1f1b"], fp["gpipe"])
    free_max = float(np.nanmax(np.abs(fp["diff_pct"])))

    # Per mode × system: the 1F1B − GPipe difference over all (p, m): min … max.
    span = long.groupby(["comm", "system"])["diff_pct"].agg(["min", "max"]).reset_index()
    span["range"] = [f"{a:+.2f} … {b:+.2f}" for a, b in zip(span["min"], span["max"])]
    span_table = span.pivot(index="comm", columns="system", values="range").reindex(index=list(spec.comm), columns=LABELS)
    span_table.index.name = "mode"
    free_row = pd.DataFrame([["free comm (α = 0, β = ∞)"] + [f"{fp[fp.system == s]['diff_pct'].abs().max():.1e}" for s in LABELS]],
                            columns=["mode"] + LABELS).set_index("mode")
    span_table = pd.concat([span_table, free_row]).T
    span_table.index.name = "system"

    at88 = long[(long.p == 8) & (long.m == 8)].pivot(index="system", columns="comm", values="diff_pct").reindex(index=LABELS, columns=list(spec.comm))

    mem = ds[["peak_activation_bytes", "peak_memory_bytes"]].sel(schedule=["gpipe", "1f1b"]).to_dataframe().reset_index()
    mem = mem[["schedule", "p", "m", "peak_activation_bytes", "peak_memory_bytes"]]
    memp = mem.pivot(index=["p", "m"], columns="schedule", values="peak_activation_bytes")
    memp["1f1b / gpipe"] = memp["1f1b"] / memp["gpipe"]
    memp = memp[["gpipe", "1f1b", "1f1b / gpipe"]]
    memp[["gpipe", "1f1b"]] = memp[["gpipe", "1f1b"]] / 1e12
    memp.columns = ["GPipe act. peak (TB)", "1F1B act. peak (TB)", "1F1B / GPipe"]

    csv = pd.concat([long.rename(columns={"comm": "mode"}).assign(kind="swept"),
                     fp.rename(columns={"gpipe": "t_gpipe", "1f1b": "t_1f1b"}).assign(kind="free comm")])
    sections = [
        ("1F1B step time vs GPipe, % (min … max over p ∈ {4, 8}, m ∈ {8 … 256}); last column: free communication", markdown(span_table)),
        ("1F1B vs GPipe at p = 8, m = 8, % per mode", markdown(at88)),
        ("Activation peak of the bottleneck worker (no recomputation; global batch 256 × 4096 tokens)", markdown(memp, "{:.3g}")),
    ]

    by_mode = long.groupby("comm")["diff_pct"].agg(lambda x: float(np.nanmax(np.abs(x))))
    worst = long.loc[long.groupby("comm")["diff_pct"].apply(lambda x: x.abs().idxmax())]
    act = memp["1F1B / GPipe"]
    ratio_class = np.array([BY_LABEL[x].ratio_class for x in long.system])
    by_class = {
        (mode, k): (float(grp.diff_pct.min()), float(grp.diff_pct.max()))
        for (mode, k), grp in long.assign(ratio_class=ratio_class).groupby(["comm", "ratio_class"])
    }
    act_frame = act.reset_index()
    measured = {
        "1a": _by_mode(long, "diff_pct", ["system", "p", "m"]),
        "1b": {"": _cases(act_frame, "1F1B / GPipe", ["p", "m"])},
    }
    numbers = dict(
        by_class=by_class,
        free_max=free_max,
        max_abs=by_mode.to_dict(),
        worst={r.comm: (r.system, int(r.p), int(r.m), float(r.diff_pct)) for r in worst.itertuples()},
        act_ratio_min=float(act.min()),
        act_ratio_max=float(act.max()),
        act_equal_at=[(int(p), int(m)) for (p, m), v in act.items() if np.isclose(v, 1.0)],
        gpipe_act_tb={int(p): float(v) for (p, _), v in memp["GPipe act. peak (TB)"].items()},
        span=span_table,
        long=long,
        mem=mem,
    )
    return Finding("f1_gpipe_vs_1f1b", "Finding 1: GPipe vs 1F1B", csv, sections,
                   extra_csv={"f1_activation_memory": mem}, measured=measured, numbers=numbers)


def finding2(ds, spec) -> Finding:
    """Chimera vs GPipe/1F1B over m and systems; ablations that change one assumption.

    Args:
      ds: the ``paper`` store (loaded).
      spec: its SweepSpec.
    """
    wide = _chimera_comparison(diagonal(ds))
    prim = wide[wide.comm == PRIMARY]
    m_top, m_from = rise_span(spec.m)
    rise, rise_long = _chimera_rise(wide, m_top, m_from)
    ab, abw = _chimera_ablations(spec)
    g8rise = _small_batch_rise(ab, m_top, m_from)
    jw = _joined_comparison(wide, spec)
    jp = jw[jw.comm == PRIMARY]
    sections = (_chimera_sections(prim, spec) + [_rise_section(rise, m_top, m_from)]
                + _ablation_sections(abw, g8rise, m_top, m_from) + _joined_sections(jp, spec))
    csv = pd.concat([wide.assign(variant="as swept").rename(columns={"comm": "mode"}), abw[abw.variant != "as swept"]])
    measured = _finding2_measured(wide, jw, rise_long, spec)
    numbers = {
        **_chimera_gain_numbers(prim, spec, m_top, m_from),
        "rise": rise,
        **_joined_numbers(jp, m_top),
        **_ablation_numbers(abw, g8rise, m_top, spec),
        **_chimera_rank_numbers(prim, spec),
        "abw": abw,
    }
    return Finding("f2_chimera_vs_gpipe", "Finding 2: Chimera against GPipe and 1F1B", csv, sections, measured=measured, numbers=numbers)


#: Finding 2's single-assumption variants of the sweep (Chimera and GPipe, primary mode).
ABLATIONS = (BASE, NO_GRAD, EQUAL_FB, Variant("G = 8", global_batch=8), Variant("G = 2048", global_batch=2048))


def _chimera_comparison(d) -> pd.DataFrame:
    """Per ``(p, m, comm, system)``: each schedule's step time, Chimera against GPipe and against
    the faster of GPipe and 1F1B (%), and the fastest, slowest and spread of GPipe, 1F1B and
    Chimera (``…3``) and of the four schedules with Hanayo (``…4``)."""
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
    return wide


def _chimera_rise(wide: pd.DataFrame, m_top: int, m_from: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Chimera's step time against m, t(m_top) / t(m_from), on every system and mode: the table
    (% per system × ``"<mode> p=<p>"``) and the long rows at ``m_top`` (with ``rise_pct``)."""
    ch = wide[["p", "m", "comm", "system", "chimera"]].copy()
    ref = ch[ch.m == m_from].set_index(["p", "comm", "system"]).chimera
    ch["rel_to_m64"] = ch.chimera.values / ref.loc[list(zip(ch.p, ch.comm, ch.system))].values
    rise_long = ch[ch.m == m_top].assign(rise_pct=lambda x: 100 * (x.rel_to_m64 - 1))
    rise = ch[(ch.m == m_top)].pivot_table(index="system", columns=["comm", "p"], values="rel_to_m64").reindex(LABELS)
    rise = 100 * (rise - 1)
    rise.columns = [f"{c} p={p}" for c, p in rise.columns]
    return rise, rise_long


def _chimera_ablations(spec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """GPipe's and Chimera's step times under each of :data:`ABLATIONS`, every p and m, primary
    mode: the long rows, and one row per point with Chimera vs GPipe (%)."""
    ab = pd.concat([ablation_frame(spec, s, spec.p, spec.m, [PRIMARY], list(ABLATIONS)) for s in ("gpipe", "chimera")])
    abw = ab.pivot_table(index=["p", "m", "mode", "variant", "system"], columns="schedule", values="t_sim").reset_index()
    abw["chimera_vs_gpipe_pct"] = pct(abw.chimera, abw.gpipe)
    return ab, abw


def _small_batch_rise(ab: pd.DataFrame, m_top: int, m_from: int) -> pd.DataFrame:
    """GPipe's and Chimera's step time from m_from to m_top (%) with a small global batch
    (G = 8: b = 1 … 1/32 sequences), p = 8."""
    g8 = ab[(ab.variant == "G = 8") & (ab.p == 8)]
    g8r = g8.pivot_table(index="system", columns=["schedule", "m"], values="t_sim")
    g8rise = pd.DataFrame({s: 100 * (g8r[(s, m_top)] / g8r[(s, m_from)] - 1) for s in ("gpipe", "chimera")}).reindex(LABELS)
    g8rise.columns = [f"{s}: t({m_top})/t({m_from}) − 1, %" for s in g8rise.columns]
    return g8rise


def _joined_comparison(wide: pd.DataFrame, spec) -> pd.DataFrame:
    """Claim 2d again with Chimera's units joined by forward doubling / backward halving (the
    faster): ``wide``'s rows at the largest m (every mode) and at 64 <= m below it (the primary
    mode, for the tables), with the spread and the comparison to GPipe of the joined Chimera."""
    m_max = max(spec.m)
    below = [m for m in spec.m if 64 <= m < m_max]
    joined = pd.concat([joined_chimera(spec, [m_max], list(spec.comm))]
                       + ([joined_chimera(spec, below, [PRIMARY])] if below else []))
    jw = wide.merge(joined, on=["p", "m", "comm", "system"])
    with_joined = jw[["gpipe", "1f1b", "chimera_joined"]]
    jw["spread_joined_pct"] = pct(with_joined.max(axis=1, skipna=False), with_joined.min(axis=1, skipna=False))
    jw["joined_vs_gpipe_pct"] = pct(jw.chimera_joined, jw.gpipe)
    jw["joined_no_sync_vs_gpipe_pct"] = pct(jw.chimera_joined_no_sync, jw.gpipe)
    return jw


def _chimera_sections(prim: pd.DataFrame, spec) -> list[tuple[str, str]]:
    """Chimera vs GPipe per p, and the slowest and the spread of the three at p = 8 (primary mode)."""
    sections = []
    for p in spec.p:
        tab = prim[prim.p == p].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(LABELS)
        sections.append((f"Chimera vs GPipe, % step time, p = {p}, {PRIMARY} (negative: Chimera faster)", markdown(tab, "{:+.1f}")))
    sections.append((f"Slowest of GPipe, 1F1B, Chimera at p = 8, {PRIMARY}", markdown(prim[prim.p == 8].pivot(index="system", columns="m", values="slowest3").reindex(LABELS))))
    sections.append((f"Spread of GPipe, 1F1B, Chimera (slowest / fastest − 1, %) at p = 8, {PRIMARY}", markdown(prim[prim.p == 8].pivot(index="system", columns="m", values="spread3_pct").reindex(LABELS), "{:.1f}")))
    return sections


def _rise_section(rise: pd.DataFrame, m_top: int, m_from: int) -> tuple[str, str]:
    """The table of :func:`_chimera_rise`."""
    return (f"Chimera's step time from m = {m_from} to m = {m_top}, % (positive: rises with m)", markdown(rise, "{:+.2f}"))


def _ablation_sections(abw: pd.DataFrame, g8rise: pd.DataFrame, m_top: int, m_from: int) -> list[tuple[str, str]]:
    """Chimera vs GPipe at p = 8 under three ablations, and the rise with m at G = 8."""
    sections = []
    for label in ("no grad sync", "t_b = t_f", "G = 8"):
        tab = abw[(abw.variant == label) & (abw.p == 8)].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(LABELS)
        sections.append((f"Ablation '{label}': Chimera vs GPipe, %, p = 8, {PRIMARY}", markdown(tab, "{:+.1f}")))
    sections.append((f"Ablation 'G = 8': step time from m = {m_from} to m = {m_top}, p = 8, {PRIMARY}", markdown(g8rise, "{:+.1f}")))
    return sections


def _joined_sections(jp: pd.DataFrame, spec) -> list[tuple[str, str]]:
    """Per p with joined rows (primary mode): the spread with the joined Chimera, and the joined
    Chimera vs GPipe with and without the gradient sync."""
    sections = []
    for p in spec.p:
        sub = jp[jp.p == p]
        if len(sub):
            sections.append((f"Spread of GPipe, 1F1B and Chimera with doubled forwards (the faster of forward doubling and backward halving), %, p = {p}, {PRIMARY}",
                             markdown(sub.pivot(index="system", columns="m", values="spread_joined_pct").reindex(LABELS), "{:.1f}")))
            sections.append((f"Chimera with doubled forwards vs GPipe, % step time (without the gradient sync in brackets), p = {p}, {PRIMARY}",
                             markdown(sub.assign(cell=[f"{a:+.1f} ({b:+.1f})" for a, b in zip(sub.joined_vs_gpipe_pct, sub.joined_no_sync_vs_gpipe_pct)])
                                      .pivot(index="system", columns="m", values="cell").reindex(LABELS))))
    return sections


def _finding2_measured(wide: pd.DataFrame, jw: pd.DataFrame, rise_long: pd.DataFrame, spec) -> dict[str, dict[str, pd.Series]]:
    """The measured numbers of claims 2b … 2e, in every mode."""
    wide = wide.assign(chimera_vs_slower_pct=pct(wide.chimera, wide[["gpipe", "1f1b"]].max(axis=1)))
    m_min, m_max = min(spec.m), max(spec.m)
    not_fast = [s.label for s in SYSTEMS if s.network != "fast"]
    slow_nw = [s.label for s in SYSTEMS if s.network == "slow"]
    crossover, gain = {}, {}
    for mode in spec.comm:
        sub = wide[wide.comm == mode]
        if not len(sub):
            continue
        won = sub[sub.chimera_vs_gpipe_pct < 0]
        crossover[mode] = pd.Series({f"p = {p}": float(won[won.p == p].m.max()) if (won.p == p).any() else np.nan for p in spec.p})
        gain[mode] = pd.Series({f"p = {p}": float(-sub[sub.p == p].chimera_vs_gpipe_pct.min()) for p in spec.p})
    return {
        "2b": _by_mode(wide[wide.system.isin(NETWORK_LIMITED)], "chimera_vs_slower_pct", ["system", "p", "m"]),
        "2c-crossover": crossover,
        "2c-fast": _by_mode(wide[wide.system.isin(not_fast) & (wide.m == m_min)], "chimera_vs_gpipe_pct", ["system", "p", "m"]),
        "2c-gain": gain,
        "2d": _by_mode(wide[wide.m == m_max], "spread3_pct", ["system", "p", "m"]),
        "2d-joined": _by_mode(jw[jw.m == m_max], "spread_joined_pct", ["system", "p", "m"]),
        "2e": _by_mode(rise_long[rise_long.system.isin(slow_nw)], "rise_pct", ["system", "p"]),
    }


def _chimera_gain_numbers(prim: pd.DataFrame, spec, m_top: int, m_from: int) -> dict[str, Any]:
    """Chimera's largest gain over GPipe, the largest m where it wins per p, and the spread of the
    three at m_top (primary mode)."""
    wins = prim[prim.chimera_vs_gpipe_pct < 0]
    return {
        "max_gain": float(-prim.chimera_vs_gpipe_pct.min()),
        "max_win_m": {p: int(wins[wins.p == p].m.max()) if len(wins[wins.p == p]) else None for p in spec.p},
        "m_top": m_top,
        "m_from": m_from,
        "spread_m256": (float(prim[prim.m == m_top].spread3_pct.min()), float(prim[prim.m == m_top].spread3_pct.max())),
    }


def _joined_numbers(jp: pd.DataFrame, m_top: int) -> dict[str, Any]:
    """The joined Chimera at m_top (primary mode): its spread and its comparison to GPipe (ranges),
    the cases past the claim's tolerance, and which join was the faster."""
    jtop = jp[jp.m == m_top]
    apart = jtop[jtop.spread_joined_pct > BY_ID["2d-joined"].tolerance]
    return {
        "joined_spread": (float(jtop.spread_joined_pct.min()), float(jtop.spread_joined_pct.max())),
        "joined_vs_gpipe": (float(jtop.joined_vs_gpipe_pct.min()), float(jtop.joined_vs_gpipe_pct.max())),
        "joined_apart": [(s, int(p), float(v), float(ns)) for s, p, v, ns in
                         zip(apart.system, apart.p, apart.joined_vs_gpipe_pct, apart.joined_no_sync_vs_gpipe_pct)],
        "joined_method": jtop.joined.value_counts().to_dict(),
        "joined_cases": len(jtop),
    }


def _ablation_numbers(abw: pd.DataFrame, g8rise: pd.DataFrame, m_top: int, spec) -> dict[str, Any]:
    """Chimera vs GPipe at p = 8 under each ablation: the range at m_top as swept, each ablation's
    table, the rise at G = 8, and the representative systems' values at m ∈ {8, 32, 256}."""
    abp = abw[abw.p == 8]
    swept_top = abp[(abp.variant == "as swept") & (abp.m == m_top)].chimera_vs_gpipe_pct
    out: dict[str, Any] = {"abl:as swept:m256": (float(swept_top.min()), float(swept_top.max()))}
    for label in ("no grad sync", "t_b = t_f", "G = 8", "G = 2048"):
        out[f"abl:{label}:table"] = abp[abp.variant == label].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(LABELS)
    out["g8rise"] = g8rise
    rep_ms = [m for m in (8, 32, 256) if m in spec.m]
    rows = []
    for label in ("as swept", "no grad sync", "t_b = t_f", "G = 8", "G = 2048"):
        tab = abp[abp.variant == label].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct")
        rows.append([label] + [tab.loc[s.label, m] for s in REPRESENTATIVE for m in rep_ms])
    out["abl_rep"] = pd.DataFrame(rows, columns=["variant"] + [f"{s.short} m={m}" for s in REPRESENTATIVE for m in rep_ms])
    return out


def _chimera_rank_numbers(prim: pd.DataFrame, spec) -> dict[str, Any]:
    """Where Chimera wins at m = 8 and where it is the slowest of the three (primary mode), and
    the reference tables at p = 8 and p = 4."""
    nl = prim[prim.system.isin(NETWORK_LIMITED)]
    return {
        "win_systems_m8": {p: [s for s in LABELS if prim[(prim.p == p) & (prim.m == 8) & (prim.system == s)].chimera_vs_gpipe_pct.iloc[0] < 0] for p in spec.p},
        "first_slowest_by_system": {
            s: min((int(m) for m in prim[(prim.p == 8) & (prim.system == s)].m
                    if (prim[(prim.p == 8) & (prim.system == s) & (prim.m >= m)].slowest3 == "chimera").all()), default=None)
            for s in LABELS
        },
        "nl_slowest_by_m": nl[nl.p == 8].groupby("m").slowest3.apply(lambda x: float((x == "chimera").mean())).to_dict(),
        "other_slowest_by_m": prim[(prim.p == 8) & ~prim.system.isin(NETWORK_LIMITED)].groupby("m").slowest3.apply(lambda x: float((x == "chimera").mean())).to_dict(),
        "ref_table_p8": prim[prim.p == 8].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(LABELS),
        "ref_table_p4": prim[prim.p == 4].pivot(index="system", columns="m", values="chimera_vs_gpipe_pct").reindex(LABELS),
        "prim": prim,
    }


#: Chimera's ways to join its units by doubled forwards (``chimera@concat=…``), beside the swept direct one.
JOINS = ("forward_doubling", "backward_halving")


def joined_chimera(spec, ms, modes) -> pd.DataFrame:
    """Chimera's step time with its units joined by forward doubling and by backward halving.

    The sweep (``conf/sweep/paper.yaml``) runs Chimera with the direct concatenation; these runs
    go through the Python API on the same systems (:func:`ppsweep.paper.sweeps.ablation_frame`),
    with and without the gradient synchronisation.

    Args:
      spec: the sweep's spec. ms: microbatch counts. modes: comm modes.

    Returns:
      One row per ``(p, m, comm, system)``: the step time of each method (columns :data:`JOINS`,
      ``… no sync`` without the gradient synchronisation), the faster method (``joined``) and its
      step time (``chimera_joined``, ``chimera_joined_no_sync``); NaN where a method cannot run.
    """
    frames = [ablation_frame(spec, "chimera", spec.p, ms, modes, [BASE, NO_GRAD], split="1:1", concat=c).assign(concat=c)
              for c in JOINS]
    long = pd.concat(frames)
    long["column"] = long.concat + np.where(long.variant == NO_GRAD.label, " no sync", "")
    out = long.pivot_table(index=["p", "m", "mode", "system"], columns="column", values="t_sim", dropna=False).reset_index()
    out = out.rename(columns={"mode": "comm"})
    out["joined"] = out[list(JOINS)].idxmin(axis=1)
    out["chimera_joined"] = out[list(JOINS)].min(axis=1)
    out["chimera_joined_no_sync"] = out[[f"{c} no sync" for c in JOINS]].min(axis=1)
    return out


def rise_span(ms) -> tuple[int, int]:
    """``(m_top, m_from)`` of "step time rising with m": the largest m, and m = 64 (the paper's
    "m ≈ 64") where the sweep has it below the largest, else the second largest m."""
    m_top = max(ms)
    return m_top, (64 if 64 in ms and 64 < m_top else sorted(ms)[-2])


def finding3(ds, spec) -> Finding:
    """Bubbles by formula and table; Chimera at p = 8, m = 16 (also measures claim 2a).

    Args:
      ds: the ``paper`` store (loaded).
      spec: its SweepSpec.
    """
    from ppsweep.tables.build import UnsupportedPointError, build_schedule

    b = ds[["bubble_formula", "bubble_table", "length_table"]].to_dataframe().reset_index()
    b = b[["schedule", "p", "m", "bubble_formula", "bubble_table", "length_table"]]
    equal = []
    for p in spec.p:
        for m in spec.m:
            for name, opts in (("chimera", {"split": "1:1"}), ("hanayo", {"waves": 1}), ("hanayo", {"waves": 2}), ("gpipe", {})):
                try:
                    t1 = build_schedule(name, p, m, 1, 1, **opts)
                    t2 = build_schedule(name, p, m, 1, 2, **opts) if opts.get("waves") == 2 else None
                except UnsupportedPointError:
                    continue  # e.g. Chimera with odd p: no row, as in the store (valid = False)
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
        for (p, m), grp in b.groupby(["p", "m"]):
            best = grp[col].min()
            rows.append(dict(p=p, m=m, schedule=" = ".join(grp[np.isclose(grp[col], best, rtol=1e-12, atol=0)].schedule)))
        return pd.DataFrame(rows)

    smallest = argmins("bubble_formula").merge(argmins("bubble_table"), on=["p", "m"], suffixes=(" (formula)", " (table)"))
    c = b[(b.schedule == "chimera") & (b.p == 8) & (b.m == 16)].iloc[0]
    point = pd.DataFrame(
        [["formula (p−2)/(2m+p−2)", 100 * c.bubble_formula, "≈ 16"],
         ["table, F = 1 slot, B = 2 slots", 100 * c.bubble_table, "≈ 26"],
         ["table, F = B = 1 slot", 100 * c.bubble_table_equal_slots, "—"]],
        columns=["Chimera, p = 8, m = 16", "ppsweep, %", "paper, %"],
    )
    sections = [
        ("Chimera at p = 8, m = 16", markdown(point, index=False)),
        ("Bubble by formula, %", markdown(form, "{:.1f}")),
        ("Bubble by table (F = 1, B = 2 slots), %", markdown(tabl, "{:.1f}")),
        ("Schedule with the smallest bubble", markdown(smallest, index=False)),
    ]

    def margin(col):
        """Chimera's bubble minus the smallest other schedule's, percentage points, per (p, m)."""
        rows = []
        for (p, m), grp in b.groupby(["p", "m"]):
            chim = grp[grp.schedule == "chimera"][col]
            others = grp[grp.schedule != "chimera"][col]
            rows.append(dict(p=p, m=m, margin=100 * (float(chim.iloc[0]) - float(others.min())) if len(chim) else np.nan))
        return _cases(pd.DataFrame(rows), "margin", ["p", "m"])

    measured = {
        "2a-formula": {"": margin("bubble_formula")},
        "2a-table": {"": margin("bubble_table")},
        "3-formula": {"": pd.Series({"p = 8, m = 16": 100 * float(c.bubble_formula)})},
        "3-table": {"": pd.Series({"p = 8, m = 16": 100 * float(c.bubble_table)})},
    }
    at88 = b[(b.p == 8) & (b.m == 8)].set_index("schedule")
    numbers = dict(formula=float(c.bubble_formula), table=float(c.bubble_table), equal=float(c.bubble_table_equal_slots),
                   smallest=smallest, b=b,
                   table_p8m8={s: float(at88.loc[s, "bubble_table"]) for s in at88.index})
    return Finding("f3_bubbles", "Finding 3: bubble ratios by formula and by table", csv, sections, measured=measured, numbers=numbers)


def finding4(ds, spec) -> Finding:
    """Table I: Hanayo vs Chimera at p = m = 8 on the nine systems, one and two waves.

    Args:
      ds: the ``paper`` store (loaded).
      spec: its SweepSpec.
    """
    d = diagonal(ds).sel(p=8, m=8)
    swept, two = f"hanayo W={PRIMARY_WAVES} (swept)", "hanayo W=2, as swept"
    rows = []
    for mode in spec.comm:
        for s in LABELS:
            tc = float(d.t_sim.sel(schedule="chimera", comm=mode, system=s))
            th = float(d.t_sim.sel(schedule="hanayo", comm=mode, system=s))
            rows.append(dict(mode=mode, system=s, variant=swept, t_chimera=tc, t_hanayo=th,
                             idle_chimera=float(d.idle_sim.sel(schedule="chimera", comm=mode, system=s)),
                             idle_hanayo=float(d.idle_sim.sel(schedule="hanayo", comm=mode, system=s))))
    variants = [BASE, NO_GRAD, EQUAL_FB]
    ch = ablation_frame(spec, "chimera", [8], [8], list(spec.comm), variants, split="1:1")
    for waves in (1, 2):
        ha = ablation_frame(spec, "hanayo", [8], [8], list(spec.comm), variants, waves=waves)
        for (v, mode, s), grp in ha.groupby(["variant", "mode", "system"]):
            if waves == 1 and v == "as swept":
                continue
            c = ch[(ch.variant == v) & (ch["mode"] == mode) & (ch.system == s)].iloc[0]
            rows.append(dict(mode=mode, system=s, variant=f"hanayo W={waves}, {v}", t_chimera=c.t_sim, t_hanayo=grp.t_sim.iloc[0],
                             idle_chimera=c.idle_sim, idle_hanayo=grp.idle_sim.iloc[0]))
    df = pd.DataFrame(rows)
    df["diff_pct"] = pct(df.t_hanayo, df.t_chimera)
    df["paper_diff_pct"] = [paper_text(TABLE1[s]) for s in df.system]

    def view(variant, mode):
        sub = df[(df.variant == variant) & (df["mode"] == mode)].set_index("system").reindex(LABELS)
        return pd.DataFrame({
            "t Chimera (s)": sub.t_chimera, "t Hanayo (s)": sub.t_hanayo,
            "idle Chimera %": 100 * sub.idle_chimera, "idle Hanayo %": 100 * sub.idle_hanayo,
            "Hanayo vs Chimera %": sub.diff_pct, "paper %": sub.paper_diff_pct,
        })

    sections = [
        (f"Table I counterpart, Hanayo W = 1 (the sweep), {PRIMARY}", markdown(view(swept, PRIMARY), "{:.2f}")),
        (f"Hanayo W = 2 (two waves), {PRIMARY}", markdown(view(two, PRIMARY), "{:.2f}")),
    ]
    comp = df.pivot_table(index="system", columns=["variant", "mode"], values="diff_pct").reindex(LABELS)
    keep = [(swept, m) for m in spec.comm] + [(two, m) for m in spec.comm] + \
           [("hanayo W=1, no grad sync", PRIMARY), ("hanayo W=1, t_b = t_f", PRIMARY)]
    comp = comp[keep]
    comp.columns = [f"{v.replace('hanayo ', '').replace(' (swept)', '').replace(', as swept', '')}, {m}" for v, m in comp.columns]
    comp["paper"] = [paper_text(TABLE1[s]) for s in comp.index]
    sections.append(("Hanayo vs Chimera, % step time, every mode and ablation", markdown(comp, "{:+.1f}")))

    judged = [s for s in LABELS if TABLE1[s] is not None]
    fast_mid = [s.label for s in SYSTEMS if s.network in ("fast", "mid")]
    measured: dict[str, dict[str, pd.Series]] = {"4-time": {}, "4-idle-chimera": {}, "4-idle-hanayo": {}}
    for variant, suffix in ((swept, ""), (two, ", W = 2")):
        for mode in spec.comm:
            sub = df[(df.variant == variant) & (df["mode"] == mode)].set_index("system")
            measured["4-time"][mode + suffix] = sub.diff_pct.reindex(judged).astype(float)
            measured["4-idle-chimera"][mode + suffix] = (100 * sub.idle_chimera).reindex(fast_mid).astype(float)
            measured["4-idle-hanayo"][mode + suffix] = (100 * sub.idle_hanayo).reindex(fast_mid).astype(float)

    def primary_view(variant):
        return df[(df.variant == variant) & (df["mode"] == PRIMARY)].set_index("system").reindex(LABELS)

    numbers = dict(df=df, t1=primary_view(swept), t2=primary_view(two),
                   tfb=primary_view("hanayo W=1, t_b = t_f"), tng=primary_view("hanayo W=1, no grad sync"))
    return Finding("f4_table1_hanayo_vs_chimera", "Finding 4 (Table I): Hanayo vs Chimera at p = m = 8", df, sections,
                   measured=measured, numbers=numbers)


def paper_text(value) -> str:
    """A Table I entry as printed: ``"+12.3"``, ``"-12 … -14"``, ``"n/a"``."""
    if value is None:
        return "n/a"
    if isinstance(value, tuple):
        return f"{value[1]:g} … {value[0]:g}"
    return f"{value:+g}"


def finding5(ds, asym, spec) -> Finding:
    """Asymmetric Chimera (1:2) against symmetric (1:1): memory and step time.

    Args:
      ds: the ``paper`` store (loaded; Chimera 1:1).
      asym: the ``paper_asym`` store (loaded; Chimera 1:2).
      spec: the ``paper`` SweepSpec.
    """
    from ppsweep.tables.build import build_schedule
    from ppsweep.cost_model import persistent_bytes_per_worker, stage_layers

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
    ms = [m for m in spec.m if m <= 32]
    abl = pd.concat([
        ablation_frame(spec, "chimera", spec.p, ms, [PRIMARY], [BASE, NO_GRAD], split=s).assign(split=s) for s in ("1:1", "1:2")
    ])
    ablw = abl.pivot_table(index=["p", "m", "mode", "variant", "system"], columns="split", values="t_sim").reset_index()
    ablw["diff_pct"] = pct(ablw["1:2"], ablw["1:1"])
    prim = diff[diff.comm == PRIMARY]
    sections = []
    for p in spec.p:
        tab = prim[prim.p == p].pivot(index="system", columns="m", values="diff_pct").reindex(LABELS)
        sections.append((f"Chimera 1:2 vs 1:1, % step time, p = {p}, {PRIMARY} (negative: 1:2 faster)", markdown(tab, "{:+.2f}")))
    tab = ablw[ablw.variant == "no grad sync"].pivot_table(index="system", columns=["p", "m"], values="diff_pct").reindex(LABELS)
    tab.columns = [f"p={p} m={m}" for p, m in tab.columns]
    sections.append((f"Ablation 'no grad sync': Chimera 1:2 vs 1:1, %, {PRIMARY}", markdown(tab, "{:+.2f}")))
    sections.append(("Bottleneck worker's peak memory (no memory cap; global batch 256; the same on every system)", markdown(mem, "{:.4g}")))
    pwt = pw.pivot_table(index=["p", "split"], columns="worker", values="total_TB")
    sections.append(("Peak memory per worker at m = 2p, TB (persistent + activations)", markdown(pwt, "{:.3g}")))
    csv = pd.concat([diff.rename(columns={"comm": "mode"}).assign(variant="as swept"), ablw[ablw.variant != "as swept"]])

    fast_nw = [s.label for s in SYSTEMS if s.network == "fast"]
    measured = {
        "5-memory": {"": _cases(mem["1:2 / 1:1"].reset_index(), "1:2 / 1:1", ["p", "m"])},
        "5-gain": _by_mode(diff[(diff.p == 4) & diff.system.isin(fast_nw)], "diff_pct", ["system", "m"]),
        "5-loss": _by_mode(diff[(diff.p == 8) & (diff.m <= 16)], "diff_pct", ["system", "m"]),
    }
    a4 = prim[(prim.p == 4) & prim.system.isin(fast_nw)]
    a8 = prim[(prim.p == 8) & (prim.m <= 16)]
    numbers = dict(
        mem_ratio=(float(mem["1:2 / 1:1"].min()), float(mem["1:2 / 1:1"].max())),
        prim=prim, ablw=ablw, pw=pw, a4=a4, a8=a8,
        a8_slow=a8[a8.system.str.endswith("slow nw")],
        ng5=ablw[(ablw.variant == "no grad sync") & (ablw.p == 8) & (ablw.m <= 16)],
    )
    return Finding("f5_asym_chimera", "Finding 5: asymmetric Chimera (1:2)", csv, sections,
                   extra_csv={"f5_asym_memory_per_worker": pw}, measured=measured, numbers=numbers)
