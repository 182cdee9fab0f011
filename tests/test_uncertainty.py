"""Uncertainty analysis (ppsweep.analysis.uncertainty) on a hand-made store with samples."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from ppsweep.analysis import AnalysisError
from ppsweep.analysis import uncertainty as U


def _store(t, formula, table, nominal=None, valid=(True, True, True)):
    """Schedules a, b, c; p=[4], m=[8], bandwidth=[1e9], latency=[0]; t: (3, K)."""
    t = np.asarray(t, float)
    K = t.shape[1]
    dims = ("schedule", "p", "m", "bandwidth", "latency")
    ds = xr.Dataset(
        {
            "t_sim": (dims + ("sample",), t.reshape(3, 1, 1, 1, 1, K)),
            "bubble_formula": (("schedule", "p", "m"), np.reshape(formula, (3, 1, 1)).astype(float)),
            "bubble_table": (("schedule", "p", "m"), np.reshape(table, (3, 1, 1)).astype(float)),
            "valid": (("schedule", "p", "m"), np.reshape(valid, (3, 1, 1))),
            "done": (("p", "m"), np.ones((1, 1), bool)),
        },
        coords={"schedule": ["a", "b", "c"], "p": [4], "m": [8], "bandwidth": [1e9], "latency": [0.0], "sample": np.arange(K)},
    )
    if nominal is not None:
        ds["t_sim_nominal"] = (dims, np.reshape(nominal, (3, 1, 1, 1, 1)).astype(float))
    return ds


T = [[1, 1, 3, 2], [2, 1, 2, 1], [3, 3, 3, 3]]


def test_win_probability_shares_ties():
    p = U.win_probability(_store(T, [0.1, 0.1, 0.05], [0.1, 0.2, 0.3])).squeeze()
    # sample 0: a; 1: a = b (half each); 2: b; 3: b
    np.testing.assert_allclose(p.values, [1.5 / 4, 2.5 / 4, 0.0])


def test_rank_distribution():
    d = U.rank_distribution(_store(T, [0.1, 0.1, 0.05], [0.1, 0.2, 0.3])).squeeze()
    # a has ranks 1, 1, 2, 2; b has 2, 1, 1, 1; c has 3, 3, 2, 3 (tie with a in sample 2 for second)
    np.testing.assert_allclose(d.sel(schedule="a").values, [0.5, 0.5, 0.0])
    np.testing.assert_allclose(d.sel(schedule="b").values, [0.75, 0.25, 0.0])
    np.testing.assert_allclose(d.sel(schedule="c").values, [0.0, 0.25, 0.75])


def test_step_time_stats():
    s = U.step_time_stats(_store(T, [0.1, 0.1, 0.05], [0.1, 0.2, 0.3])).squeeze()
    np.testing.assert_allclose(s["t_mean"].values, [1.75, 1.5, 3.0])
    np.testing.assert_allclose(s["t_p50"].values, [1.5, 1.5, 3.0])
    # a's sorted samples 1, 1, 2, 3: the 95th percentile lies 0.85 of the way from 2 to 3
    np.testing.assert_allclose(s["t_p95"].sel(schedule="a").values, 2.85)


def test_regret_by_each_criterion():
    r = U.regret(_store(T, [0.1, 0.1, 0.05], [0.1, 0.2, 0.3], nominal=[1.0, 1.2, 0.9])).squeeze()
    # formula picks c: 3/1-1, 3/1-1, 3/2-1, 3/1-1
    np.testing.assert_allclose(r["regret_formula_mean"].values, (2 + 2 + 0.5 + 2) / 4)
    np.testing.assert_allclose(r["regret_formula_p95"].values, 2.0)
    # table picks a: 0, 0, 3/2-1, 2/1-1
    np.testing.assert_allclose(r["regret_table_mean"].values, 1.5 / 4)
    np.testing.assert_allclose(r["regret_table_p95"].values, 0.5 + 0.85 * 0.5)
    # the noise-free simulation picks c as well
    np.testing.assert_allclose(r["regret_sim_mean"].values, r["regret_formula_mean"].values)


def test_regret_tie_is_mean_over_tied_choices_and_invalid_is_skipped():
    ds = _store(T, [0.1, 0.1, 0.2], [0.1, 0.2, 0.05], valid=(True, True, False))
    r = U.regret(ds).squeeze()
    # formula ties a and b; c cannot run, so the best is min(a, b) per sample
    a = np.array([1, 1, 3, 2]) / np.array([1, 1, 2, 1]) - 1
    b = np.array([2, 1, 2, 1]) / np.array([1, 1, 2, 1]) - 1
    np.testing.assert_allclose(r["regret_formula_mean"].values, np.mean((a + b) / 2))
    # table's favourite (c) cannot run: it chooses among a and b, and picks a
    np.testing.assert_allclose(r["regret_table_mean"].values, np.mean(a))
    assert "regret_sim_mean" not in r  # no t_sim_nominal in this store


def test_noise_free_store_regret_and_summary():
    ds = _store(T, [0.1, 0.1, 0.05], [0.1, 0.2, 0.3]).isel(sample=0, drop=True)  # t = 1, 2, 3
    r = U.regret(ds)
    np.testing.assert_allclose(r["regret_formula_mean"].values.ravel(), 2.0)
    np.testing.assert_allclose(r["regret_table_mean"].values.ravel(), 0.0)
    summary = U.regret_summary(r)
    assert summary["formula"]["mean"] == pytest.approx(2.0)
    assert summary["table"]["share_positive"] == 0.0
    with pytest.raises(AnalysisError, match="t_sim_nominal"):
        U.regret(ds, by=["sim"])
    with pytest.raises(AnalysisError, match="accepted: formula, table, sim"):
        U.regret(ds, by=["bubble"])


def test_robustness_flags_the_noise_free_winner_that_loses_often():
    rb = U.robustness(_store(T, [0.1, 0.1, 0.05], [0.1, 0.2, 0.3], nominal=[1.0, 1.2, 3.0]))
    # a wins noise-free but only 37.5 % of samples: fragile at its one winning point
    assert float(rb["flip_share"].sel(schedule="a")) == 1.0
    np.testing.assert_allclose(rb["slowdown"].sel(schedule="a").values, 1.75 - 1)


def test_figures(tmp_path):
    from ppsweep.analysis.uncertainty_plots import write_uncertainty_figures

    ds = _store(T, [0.1, 0.1, 0.05], [0.1, 0.2, 0.3], nominal=[1.0, 1.2, 0.9])
    paths = write_uncertainty_figures(ds, U.win_probability(ds), U.regret(ds), tmp_path)
    assert sorted(p.name for p in paths) == ["p_win_map.png", "regret_map_formula.png", "regret_map_sim.png", "regret_map_table.png"]
    assert all(p.stat().st_size > 1000 for p in paths)


def test_win_map_legend_lists_only_schedules_that_win_somewhere():
    from ppsweep.analysis.uncertainty_plots import appearing_winners

    best = np.array([[0, 2], [2, 1]])
    top = np.array([[0.9, 0.5], [0.6, -1.0]])  # -1: no valid schedule there (schedule 1 only wins there)
    assert appearing_winners(best, top) == [0, 2]


def test_report_section_with_and_without_samples():
    from ppsweep.analysis.uncertainty_report import nominal_view, uncertainty_section

    ds = _store(T, [0.1, 0.1, 0.05], [0.1, 0.2, 0.3], nominal=[1.0, 1.2, 3.0])
    text = "\n".join(uncertainty_section(ds))
    # a: mean P(win) 0.375, fragile at its one noise-free win; formula picks c: mean regret 162.5 %
    assert "a                0.375  100.0 %" in text
    assert "by closed-form bubble     mean 162.5 %" in text
    assert "the noise-free winner is the most likely winner at 0.0 % of the points" in text
    assert "\n".join(uncertainty_section(ds.chunk())) == text  # a dask-backed store, as analyze loads it
    view = nominal_view(ds)
    assert "sample" not in view.dims and float(view["t_sim"].sel(schedule="b").squeeze()) == 1.2
    plain = "\n".join(uncertainty_section(view))
    assert "by closed-form bubble     mean 200.0 %" in plain and "p95" not in plain
    assert "noise-free simulation" not in plain
