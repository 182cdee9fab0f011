"""results/paper/REPORT.md: ``report.md.tmpl`` filled with computed numbers and computed verdicts.

The template holds the prose; :func:`report_values` computes every number it quotes (from the
findings, the cost model and the verdict table). Verdict words come only from
:func:`ppsweep.paper.verdict.verdicts` (through the ``v_*`` values and the tables).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ppsweep.paper.claims import CLAIMS, PRIMARY_MODE, Claim
from ppsweep.paper.findings import Finding, paper_text
from ppsweep.paper.output import fmt_range, markdown
from ppsweep.paper.systems import CLASS_WORDS, LABELS, LEVELS, MODES, NETWORK_LIMITED, NETWORKS, NOT_NETWORK_LIMITED, PEAKS

TEMPLATE = Path(__file__).with_name("report.md.tmpl")


def claims_table(claims: Sequence[Claim]) -> str:
    """The claims as a markdown table (the report's Setup).

    Args:
      claims: the claims table (``ppsweep.paper.claims.CLAIMS``).
    """
    rows = []
    for c in claims:
        if isinstance(c.paper, Mapping):
            paper = "; ".join(f"{k}: {paper_text(v)}" for k, v in c.paper.items() if v is not None)
        elif isinstance(c.paper, tuple):
            paper = f"{c.paper[0]:g} … {c.paper[1]:g}"
        else:
            paper = f"{c.paper:g}"
        rows.append([c.id, c.statement, c.quantity, c.cases, c.comparison, paper, f"{c.tolerance:g}", c.depends_on or "—"])
    frame = pd.DataFrame(rows, columns=["claim", "paper's claim", "measured quantity", "cases", "comparison",
                                        "paper's value", "tolerance", "depends on"])
    return markdown(frame, index=False)


def summary_table(table: pd.DataFrame) -> str:
    """The verdict table as markdown: the primary verdict, then every alternative.

    Args:
      table: the output of :func:`ppsweep.paper.verdict.verdicts`.
    """
    fixed = ["statement", "measured", "passed", "cases", "verdict"]
    others = [c for c in table.columns if c not in fixed + ["finding", "choice", "failing"]]
    alternatives = [c for c in others if not c.startswith("tolerance")] + [c for c in others if c.startswith("tolerance")]
    frame = table[fixed + alternatives].copy()
    frame["verdict"] = [f"**{v}**" for v in frame.verdict]
    frame.insert(2, "passed", frame.pop("passed").astype(str) + " of " + frame.pop("cases").astype(str))
    frame.index.name = "claim"
    return markdown(frame.rename(columns={"statement": "paper's claim"}))


def _e(x: float, digits: int = 3) -> str:
    """``x`` in short scientific notation without a plus sign: ``3.35e11``, ``3.35e-3``."""
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def _bytes(x: float) -> str:
    return f"{x / 1e9:.2f} GB" if x >= 1e9 else f"{x / 1e6:.0f} MB"


def cost_facts(spec) -> dict[str, str]:
    """The Setup's cost-model figures, from the cost model (p = 8 where a stage size is needed).

    Args:
      spec: the ``paper`` SweepSpec.
    """
    from ppsweep.cost_model import layer_time

    model, system = spec.model, spec.system
    bytes_per_flop = system.memory_bandwidth / system.peak_flops
    fast, slow_bw, slow_lat = PEAKS[LEVELS[-1]], *NETWORKS[LEVELS[0]]
    stage_layers = model.layers / 8
    pairs, ratios = [], []
    for m in spec.m:
        b = float(model.microbatch_size(m))
        msg = slow_lat + float(model.message_bytes(b)) / slow_bw
        fwd = stage_layers * float(layer_time(model, system, b, fast))
        ratios.append(msg / fwd)
        pairs.append(f"m = {m}: {msg * 1e3:.3g} ms against {fwd * 1e3:.3g} ms")
    grad = stage_layers * model.params_per_layer * model.bytes_per_value
    sync = 2 * (2 - 1) * (slow_lat + grad / 2 / slow_bw)
    return dict(
        layer_flops=_e(float(model.layer_forward_flops(1.0)), 2),
        weight_gb=f"{model.params_per_layer * model.bytes_per_value / 1e9:.1f}",
        act_gb=f"{float(model.layer_activation_bytes(1.0)) / 1e9:.1f}",
        bytes_per_flop=_e(bytes_per_flop),
        mem_bw_lo=_e(bytes_per_flop * min(PEAKS.values())),
        mem_bw_hi=_e(bytes_per_flop * max(PEAKS.values())),
        msg_first=_bytes(float(model.message_bytes(model.microbatch_size(min(spec.m))))),
        msg_last=_bytes(float(model.message_bytes(model.microbatch_size(max(spec.m))))),
        msg_ratio=f"{min(ratios):.2f}" if f"{min(ratios):.2f}" == f"{max(ratios):.2f}" else f"{min(ratios):.2f} … {max(ratios):.2f}",
        msg_pairs="; ".join(pairs),
        stage_layers=f"{stage_layers:g}",
        grad_gb=f"{grad / 1e9:.1f}",
        sync_s=f"{sync:.1f}",
    )


def _verdict_values(table: pd.DataFrame) -> dict[str, str]:
    """``v_<id>`` (bold primary verdict), ``v_<id>_<choice>`` (alternatives)."""
    out = {}
    for cid, row in table.iterrows():
        key = "v_" + cid.replace("-", "_")
        out[key] = f"**{row.verdict}**"
        if 0 < row.passed < row.cases:
            failing = row.failing.split("; ")
            out[key] += f" ({row.passed} of {row.cases} cases" + (f"; fails at {row.failing})" if len(failing) <= 3 else ")")
        for col in table.columns:
            name = col if col in MODES else ("w2" if col == f"{PRIMARY_MODE}, W = 2" else None)
            if name is not None:
                out[f"{key}_{name}"] = f"**{row[col]}**" if row[col] != "—" else "—"
    return out


def report_values(spec, sizes: Mapping[str, int], f1: Finding, f2: Finding, f3: Finding, f4: Finding, f5: Finding,
                  table: pd.DataFrame) -> dict[str, Any]:
    """Every value the template quotes.

    Args:
      spec: the ``paper`` SweepSpec.
      sizes: ``{"points": …, "points_asym": …}``.
      f1 … f5: the findings.
      table: the verdict table (:func:`ppsweep.paper.verdict.verdicts`).
    """
    from ppsweep.paper.verdict import RULE, conclusion

    tol = {c.id: c.tolerance for c in CLAIMS}
    values: dict[str, Any] = {
        **_study_values(spec, sizes, table, f2.numbers),
        **_finding1_values(f1.numbers, tol),
        **_finding2_values(f2.numbers, f3.numbers, table, tol),
        **_finding3_values(f3.numbers, tol),
        **_finding4_values(f4, f3.numbers, tol),
        **_finding5_values(f5, tol),
        "conclusion": conclusion(table),
        "verdict_rule": RULE,
    }
    values.update(_verdict_values(table))
    return values


#: The point of the report's bubble numbers (Chimera's, the paper's p = 8, m = 16).
_P, _M = 8, 16


def _study_values(spec, sizes: Mapping[str, int], table: pd.DataFrame, r2: Mapping[str, Any]) -> dict[str, Any]:
    """The study's setup: the model, the grid, the claims and the summary of the verdicts."""
    model = spec.model
    return dict(
        model_name=model.name, layers=model.layers, hidden=model.hidden, heads=model.heads, sequence=model.sequence,
        vocab=model.vocab, G=model.global_batch,
        b_max=f"{float(model.microbatch_size(min(spec.m))):g}", b_min=f"{float(model.microbatch_size(max(spec.m))):g}",
        p_list=", ".join(map(str, spec.p)), m_list=", ".join(map(str, spec.m)),
        modes=", ".join(f"`{c}`" for c in spec.comm),
        peaks=", ".join(_e(v, 1) for v in PEAKS.values()),
        networks=", ".join(f"{lvl} ({bw / 1e9:g} GB/s, {_latency(lat)})" for lvl, (bw, lat) in NETWORKS.items()),
        points=f"{sizes['points']:,}", points_asym=f"{sizes['points_asym']:,}",
        primary=PRIMARY_MODE,
        claims_table=claims_table(CLAIMS), summary_table=summary_table(table),
        **cost_facts(spec),
        m_first=min(spec.m), m_last=max(spec.m), m_top=r2["m_top"], m_from=r2["m_from"],
    )


def _finding1_values(r1: Mapping[str, Any], tol: Mapping[str, float]) -> dict[str, Any]:
    """Finding 1 (GPipe vs 1F1B): the span table, the worst cases, the activation ratios."""
    bc = r1["by_class"]
    return dict(
        free=r1["free_max"], span_table=markdown(r1["span"], index=True),
        worst="; ".join(f"`{mode}` {v[3]:+.1f} % ({v[0]}, p = {v[1]}, m = {v[2]})" for mode, v in sorted(r1["worst"].items())),
        overlap_by_class="; ".join(f"{CLASS_WORDS[k]}: {bc[('overlap', k)][0]:+.2f} … {bc[('overlap', k)][1]:+.2f} %" for k in sorted(CLASS_WORDS)),
        tol_1a=tol["1a"], max_blocking=r1["max_abs"]["blocking"],
        act_min=r1["act_ratio_min"], act_max=r1["act_ratio_max"],
        act_equal_at=", ".join(f"p = {a}, m = {b}" for a, b in r1["act_equal_at"]),
        gpipe_act_p4=r1["gpipe_act_tb"][4],
    )


def _finding2_values(r2: Mapping[str, Any], r3: Mapping[str, Any], table: pd.DataFrame, tol: Mapping[str, float]) -> dict[str, Any]:
    """Finding 2 (Chimera vs GPipe and 1F1B): where Chimera wins and is slowest, the spreads, the
    joined Chimera, the rise with m and the ablations."""
    smallest = r3["smallest"]
    chim_table = smallest[smallest["schedule (table)"].str.contains("chimera")]
    rise = r2["rise"]
    slow_rows = rise.loc[[s for s in LABELS if s.endswith("slow nw")]]
    rising = [(s, c, float(v)) for s, row in slow_rows.iterrows() for c, v in row.items() if v > 0]
    win_all = {p: len(v) for p, v in r2["win_systems_m8"].items()}
    lost8 = {p: [s for s in LABELS if s not in v] for p, v in r2["win_systems_m8"].items()}
    nog, tbf, g8, g2k = (r2[f"abl:{k}:table"] for k in ("no grad sync", "t_b = t_f", "G = 8", "G = 2048"))
    asw = r2["ref_table_p8"]
    m_top = r2["m_top"]
    return dict(
        ref_table_p8=markdown(r2["ref_table_p8"], "{:+.1f}"), ref_table_p4=markdown(r2["ref_table_p4"], "{:+.1f}"),
        chim_formula_every="every" if smallest["schedule (formula)"].str.contains("chimera").all() else "not every",
        chim_table_pts=", ".join(f"p = {a}, m = {b}" for a, b in zip(chim_table.p, chim_table.m)),
        win_m8=r2["max_win_m"][8], win_m4=r2["max_win_m"][4], max_gain=r2["max_gain"],
        win_all8=win_all[8], win_all4=win_all[4],
        lost8=f" (it loses only on {', '.join(lost8[4])} at p = 4)" if lost8[4] else "",
        tol_2c_gain=tol["2c-gain"], tol_2d=tol["2d"], tol_2e=tol["2e"],
        network_limited=", ".join(NETWORK_LIMITED),
        first_slowest_nl=min((k for k, f in r2["nl_slowest_by_m"].items() if f == 1.0), default=None),
        first_slowest_other=min((k for k, f in r2["other_slowest_by_m"].items() if f == 1.0), default=None),
        first_slowest_by_system=", ".join(f"{s}: m ≥ {k}" for s, k in r2["first_slowest_by_system"].items() if s in NETWORK_LIMITED),
        as256_lo=r2["abl:as swept:m256"][0], as256_hi=r2["abl:as swept:m256"][1],
        spread_lo=r2["spread_m256"][0], spread_hi=r2["spread_m256"][1],
        joined_lo=r2["joined_spread"][0], joined_hi=r2["joined_spread"][1],
        joined_vs_lo=r2["joined_vs_gpipe"][0], joined_vs_hi=r2["joined_vs_gpipe"][1],
        joined_method=", ".join(f"{k.replace('_', ' ')} in {v}" for k, v in sorted(r2["joined_method"].items())),
        joined_cases=r2["joined_cases"],
        joined_apart="; ".join(f"{s} (p = {p}): {v:+.1f} % against GPipe, {ns:+.1f} % without the gradient sync"
                               for s, p, v, ns in r2["joined_apart"]) or "none",
        joined_cause=(": without the gradient sync they are within the tolerance, so what is left there is Chimera's "
                      "once-per-step gradient all-reduce"
                      if r2["joined_apart"] and all(abs(ns) <= tol["2d-joined"] for *_, ns in r2["joined_apart"]) else ""),
        v_2e_alternatives=", ".join(f"{table.loc['2e', mode]} in `{mode}`" for mode in MODES if mode != PRIMARY_MODE),
        rise_table=markdown(rise, "{:+.2f}"),
        rising=", ".join(f"{s} {c} {v:+.2f} %" for s, c, v in rising) or "none",
        abl_rep=markdown(r2["abl_rep"], "{:+.1f}", index=False),
        limit_bubble=100 * (_P - 2) / (4 * _P - 2),
        tbf_mid=tbf.loc["mid cp / mid nw", m_top], tbf_slow=tbf.loc["slow cp / fast nw", m_top],
        as_mid=asw.loc["mid cp / mid nw", m_top], as_slow=asw.loc["slow cp / fast nw", m_top],
        nog_8=nog.loc["fast cp / slow nw", 8], asw_8=asw.loc["fast cp / slow nw", 8],
        nog_256=nog.loc["fast cp / slow nw", m_top], asw_256=asw.loc["fast cp / slow nw", m_top],
        g2k_8=g2k.loc["fast cp / slow nw", 8], g8_8=g8.loc["fast cp / slow nw", 8],
        g8rise=markdown(r2["g8rise"], "{:+.1f}"),
    )


def _finding3_values(r3: Mapping[str, Any], tol: Mapping[str, float]) -> dict[str, Any]:
    """Finding 3 (bubbles): Chimera's at p = 8, m = 16 by formula and by table, the smallest bubbles."""
    p, m = _P, _M
    return dict(
        formula_frac=f"{p - 2}/{2 * m + p - 2}", table_frac=f"{(p - 2) * (m + p)}/{(p - 2) * (m + p) + 3 * m * p}",
        formula=100 * r3["formula"], table=100 * r3["table"], equal=100 * r3["equal"],
        tol_3f=tol["3-formula"], tol_3t=tol["3-table"],
        smallest=markdown(r3["smallest"], index=False),
    )


def _finding4_values(f4: Finding, r3: Mapping[str, Any], tol: Mapping[str, float]) -> dict[str, Any]:
    """Finding 4 (Table I, Hanayo vs Chimera): the tables, ranges and idle shares, one and two waves."""
    r4 = f4.numbers
    t1, t2, tfb, tng = r4["t1"], r4["t2"], r4["tfb"], r4["tng"]
    p = _P
    return dict(
        t1_table=markdown(_t_view(t1), "{:.2f}"), t2_table=markdown(_t_view(t2), "{:.2f}"),
        tol_4=tol["4-time"], tol_4ic=tol["4-idle-chimera"], tol_4ih=tol["4-idle-hanayo"],
        t1_range=fmt_range(t1.diff_pct), idle_c_min=100 * t1.idle_chimera.min(), idle_h_min=100 * t1.idle_hanayo.min(),
        bubble_hanayo88=100 * r3["table_p8m8"]["hanayo"], bubble_chimera88=100 * r3["table_p8m8"]["chimera"],
        not_nl=", ".join(NOT_NETWORK_LIMITED), t2_range=fmt_range(t2.loc[NOT_NETWORK_LIMITED].diff_pct),
        t2_idle_c=100 * t2.loc[NOT_NETWORK_LIMITED].idle_chimera.min(),
        t2_idle_h_lo=100 * t2.loc[NOT_NETWORK_LIMITED].idle_hanayo.min(),
        t2_idle_h_hi=100 * t2.loc[NOT_NETWORK_LIMITED].idle_hanayo.max(),
        t2_fm=t2.loc["fast cp / mid nw", "diff_pct"], t2_ms=t2.loc["mid cp / slow nw", "diff_pct"],
        t2_fs=t2.loc["fast cp / slow nw", "diff_pct"],
        crossings_w2=4 * (p - 1), crossings_chimera=p - 1,
        tng_range=fmt_range(tng.diff_pct), tfb_shift=float(np.max(np.abs(tfb.diff_pct - t1.diff_pct))),
        f4_all=f4.section("Hanayo vs Chimera, % step time, every mode and ablation").strip() + "\n",
    )


def _finding5_values(f5: Finding, tol: Mapping[str, float]) -> dict[str, Any]:
    """Finding 5 (asymmetric Chimera): the memory ratio, per-worker memory and step-time ranges."""
    r5 = f5.numbers
    prim5 = r5["prim"]
    return dict(
        mem_lo=r5["mem_ratio"][0], mem_hi=r5["mem_ratio"][1],
        pw_table=markdown(r5["pw"].pivot_table(index=["p", "split"], columns="worker", values="total_TB"), "{:.3g}"),
        a4_range=fmt_range(r5["a4"].diff_pct, " %"), a8_range=fmt_range(r5["a8"].diff_pct),
        a8s_range=fmt_range(r5["a8_slow"].diff_pct), prim5_lo=prim5.diff_pct.min(), prim5_hi=prim5.diff_pct.max(),
        ng5_range=fmt_range(r5["ng5"].diff_pct), a4_abs_max=float(np.abs(r5["a4"].diff_pct).max()),
        f5_tables="\n".join(f"*{h}*\n\n{t}" for h, t in f5.sections if not h.startswith("Bottleneck worker's peak memory")
                            and not h.startswith("Peak memory per worker")),
    )


def _latency(seconds: float) -> str:
    return f"{seconds * 1e6:g} µs" if seconds >= 1e-6 else f"{seconds * 1e9:g} ns"


def _t_view(t: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"t Chimera (s)": t.t_chimera, "t Hanayo (s)": t.t_hanayo, "idle Chimera %": 100 * t.idle_chimera,
                         "idle Hanayo %": 100 * t.idle_hanayo, "Hanayo vs Chimera %": t.diff_pct, "paper %": t.paper_diff_pct})


def render(values: Mapping[str, Any], template: Path = TEMPLATE) -> str:
    """The report: ``template`` with ``values`` filled in.

    Args:
      values: the output of :func:`report_values`.
      template: the template (``str.format`` fields).
    """
    return template.read_text().format_map(values)
