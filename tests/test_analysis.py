"""Analysis of real sweep stores: ranks, flips, Kendall tau, crossovers, sensitivity, masking.

The known case, derived by hand (overlap mode, p = 2, m = 2, F = f, B = 2f per stage, message
time c = alpha + msg_bytes/beta, gradient bytes G per stage):

- GPipe: w0 runs F0 F1, w1 gets them c later and runs F0 F1 B0 B1 back to back from f + c,
  w0's backwards follow c after each of w1's: t = 3f + 3·2f + 2c = 9f + 2c. 1F1B runs the same
  operations in the same dependency pattern at p = 2, m = 2: the same time (a tie).
- Chimera (two replicas, microbatch 0 down, 1 up): each worker runs F, F (waiting c for the
  other's first forward), B, B (waiting c for the other's backward): 6f + 2c; then each stage's
  gradients, held by both workers, are all-reduced over n = 2 in 2(alpha + G/(2·beta)): the step
  ends at 6f + 2c + 2·alpha + G/beta.

So Chimera beats GPipe/1F1B exactly where 2·alpha + G/beta < 3f, i.e. above
beta* = G / (3f - 2·alpha), whatever the message time. The bubble formula and the table say
Chimera (bubble 0) wins everywhere, so the winner flips at every bandwidth below beta*.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from ppsweep import analysis, build_schedule
from ppsweep.cost_model import stage_costs
from ppsweep.sweep.runner import run_sweep
from ppsweep.store.errors import IncompleteStoreWarning
from ppsweep.store.open import open_for_sweep
from ppsweep.store.units import write_unit
from ppsweep.sweep.evaluate import SweepSpec, evaluate_unit

MODEL = {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16}
SYSTEM = {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7}
LATENCIES = [1e-7, 1e-6]


def config(**overrides):
    cfg = {
        "name": "analysis",
        "schedules": ["gpipe", "1f1b", "chimera"],
        "p": [2, 4],
        "m": [2, 6],  # chimera cannot run at p=4, m=6 (m must be a multiple of p): invalid there
        "bandwidth": {"start": 1e8, "stop": 1e12, "num": 17},
        "latency": LATENCIES,
        "model": MODEL,
        "system": SYSTEM,
    }
    cfg.update(overrides)
    return cfg


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("analysis") / "analysis.zarr"
    spec = SweepSpec.from_config(config())
    run_sweep(spec, path, "", progress=False)
    return path


@pytest.fixture(scope="module")
def ds(store):
    return analysis.load(store)


@pytest.fixture(scope="module")
def st(ds):
    return analysis.stability(ds)


def beta_star(alpha):
    """Bandwidth above which Chimera beats GPipe at p=2, m=2 (module docstring)."""
    spec = SweepSpec.from_config(config())
    table = build_schedule("chimera", 2, 2)
    costs = stage_costs(spec.model, spec.system, table)
    f = costs.t_f[0, 0]
    assert np.allclose(costs.t_f, f) and np.allclose(costs.grad_bytes, costs.grad_bytes[0])
    assert np.allclose(stage_costs(spec.model, spec.system, build_schedule("gpipe", 2, 2)).t_f, f)
    return costs.grad_bytes[0] / (3 * f - 2 * alpha)


def test_hand_derivation_matches_the_store(ds):
    """The store's t_sim follows the closed forms above (so the expected crossover is right)."""
    # By hand (SPEC §3), MODEL and SYSTEM at p = m = 2: b = 8 sequences, 8 layers per stage; a layer
    # is memory-bound (weights + activations over 3e12 B/s exceed its FLOPs over 1e15 FLOP/s).
    h, s, b = 1024, 1024, 8
    f = 8 * max(b * (24 * s * h**2 + 4 * s**2 * h) / 1e15, (2 * (12 * h**2 + 13 * h) + s * b * h * (34 + 5 * 16 * s / h)) / 3e12)
    g = 8 * (12 * h**2 + 13 * h) * 2
    beta = ds.bandwidth.values[:, None]
    alpha = np.array(LATENCIES)[None, :]
    c = alpha + b * s * h * 2 / beta
    t = ds.t_sim.sel(p=2, m=2)
    np.testing.assert_allclose(t.sel(schedule="gpipe"), 9 * f + 2 * c, rtol=1e-12)
    np.testing.assert_allclose(t.sel(schedule="1f1b"), 9 * f + 2 * c, rtol=1e-12)
    np.testing.assert_allclose(t.sel(schedule="chimera"), 6 * f + 2 * c + 2 * alpha + g / beta, rtol=1e-12)


def test_ranks_match_the_stored_ranks_and_handle_ties_and_invalid(ds):
    r = analysis.ranks(ds)
    np.testing.assert_array_equal(r.rank_sim.values, ds.rank_sim.values)
    for name in ("rank_formula", "rank_table"):
        np.testing.assert_array_equal(r[name].values, np.broadcast_to(ds[name].values[..., None, None], r[name].shape))
    # p=2, m=2: formula and table rank chimera first, gpipe and 1f1b tie behind it (1, 2, 2 -> "min" rule).
    assert r.rank_formula.sel(p=2, m=2).isel(bandwidth=0, latency=0).values.tolist() == [2.0, 2.0, 1.0]
    low = r.rank_sim.sel(p=2, m=2, bandwidth=1e8, latency=1e-7).values
    high = r.rank_sim.sel(p=2, m=2, bandwidth=1e12, latency=1e-7).values
    assert low.tolist() == [1.0, 1.0, 3.0] and high.tolist() == [2.0, 2.0, 1.0]
    # Away from ties the rule is scipy's rankdata(method="min").
    t = ds.t_sim.sel(p=2, m=6, bandwidth=1e8, latency=1e-6).values
    assert len(set(t.tolist())) == 3
    np.testing.assert_array_equal(r.rank_sim.sel(p=2, m=6, bandwidth=1e8, latency=1e-6).values, stats.rankdata(t, method="min"))
    # Chimera cannot run at p=4, m=6: no rank, and the others are ranked among themselves.
    assert np.isnan(r.rank_sim.sel(p=4, m=6, schedule="chimera")).all()
    assert r.rank_sim.sel(p=4, m=6, schedule="gpipe").values.max() == 1.0
    assert (r.rank_sim.sel(p=4, m=6, schedule="1f1b") == 2.0).all()
    assert set(np.unique(r.winner_formula.sel(p=4, m=6))) == {0b011}  # gpipe = 1f1b, a tie
    assert analysis.winner_label(0b011, analysis.schedules(ds)) == "gpipe=1f1b"
    assert analysis.winner_label(-1, analysis.schedules(ds)) == "none"


def test_known_flip(ds, st):
    names = analysis.schedules(ds)
    for alpha in LATENCIES:
        below = ds.bandwidth.values < beta_star(alpha)
        assert 0 < below.sum() < len(below)
        point = st.sel(p=2, m=2, latency=alpha)
        assert set(np.unique(point.winner_formula)) == {0b100}  # chimera
        np.testing.assert_array_equal(point.winner_sim.values, np.where(below, 0b011, 0b100))
        np.testing.assert_array_equal(point.disagree_formula.values, below.astype(float))
        np.testing.assert_array_equal(point.disagree_table.values, below.astype(float))
        np.testing.assert_array_equal(point.differ_formula.values, below.astype(float))
    flips = analysis.flip_points(st, "formula")
    mine = flips[(flips.p == 2) & (flips.m == 2)]
    assert len(mine) == sum(int((ds.bandwidth.values < beta_star(a)).sum()) for a in LATENCIES)
    assert set(mine.winner_sim) == {"gpipe=1f1b"} and set(mine.winner_formula) == {"chimera"}
    assert set(flips.columns) >= {"p", "m", "bandwidth", "latency", "winner_sim", "winner_formula"}
    # A tie on the formula side that includes the sim winner is no flip: p=4, m=6 (no chimera).
    assert (st.winner_sim.sel(p=4, m=6) == 0b001).all()
    assert (st.disagree_formula.sel(p=4, m=6) == 0).all()
    assert (st.differ_formula.sel(p=4, m=6) == 1).all()  # gpipe alone vs the tie gpipe = 1f1b
    assert (st.reordered_formula.sel(p=4, m=6) == 1).all()
    # Shares per slice and overall are means over the comparable points.
    per = analysis.summarize(st)
    expected = np.mean([(ds.bandwidth.values < beta_star(a)).mean() for a in LATENCIES])
    assert float(per.share_disagree_formula.sel(p=2, m=2)) == pytest.approx(expected)
    overall = analysis.summarize(st, by=())
    assert int(overall.n_points) == 4 * 17 * 2
    assert float(overall.share_disagree_formula) == pytest.approx(float(st.disagree_formula.mean()))
    assert names == ["gpipe", "1f1b", "chimera"]


def test_kendall_tau_is_scipys(ds, st):
    r = analysis.ranks(ds)
    for sel in ({"p": 2, "m": 2, "bandwidth": 1e8, "latency": 1e-7}, {"p": 2, "m": 6, "bandwidth": 1e12, "latency": 1e-6}):
        a = r.rank_sim.sel(sel).values
        b = r.rank_formula.sel(sel).values
        expected = stats.kendalltau(a, b, variant="b").statistic
        assert float(st.tau_formula.sel(sel)) == pytest.approx(expected)
    # Low bandwidth at p=2, m=2: sim (1, 1, 3) against formula (2, 2, 1): perfectly reversed.
    assert float(st.tau_formula.sel(p=2, m=2, bandwidth=1e8, latency=1e-7)) == pytest.approx(-1.0)
    # Formula ranking all ties (p=4, m=6: gpipe = 1f1b): tau-b undefined.
    assert np.isnan(st.tau_formula.sel(p=4, m=6)).all()


def test_known_crossover(ds):
    cx = analysis.crossovers(ds)
    assert cx.crossover.dims == ("schedule", "other", "p", "m", "latency", "crossing")
    x = np.log10(ds.bandwidth.values)
    for alpha in LATENCIES:
        exact = beta_star(alpha)
        pair = cx.sel(schedule="chimera", other="gpipe", p=2, m=2, latency=alpha)
        assert int(pair.n_crossings) == 1
        found = float(pair.crossover.isel(crossing=0))
        k = np.searchsorted(x, np.log10(exact))
        lo, hi = ds.bandwidth.values[k - 1], ds.bandwidth.values[k]
        assert lo < found < hi and lo < exact < hi  # in the grid cell of the exact crossover
        # Interpolated linearly in log bandwidth: within a small fraction of the cell (10^0.25).
        assert abs(np.log10(found / exact)) < 0.05
        assert int(pair.direction.isel(crossing=0)) == 1  # chimera faster above
        back = cx.sel(schedule="gpipe", other="chimera", p=2, m=2, latency=alpha)
        assert float(back.crossover.isel(crossing=0)) == pytest.approx(found)
        assert int(back.direction.isel(crossing=0)) == -1
    # GPipe and 1F1B tie all along at p=2, m=2: a tie is no crossover.
    assert (cx.n_crossings.sel(schedule="gpipe", other="1f1b", p=2, m=2) == 0).all()
    # Nothing crosses itself; invalid schedules have no crossovers.
    assert (cx.n_crossings.sel(schedule="gpipe", other="gpipe") == 0).all()
    assert (cx.n_crossings.sel(schedule="chimera", p=4, m=6) == 0).all()


def test_series_crossings_ties_and_masks():
    x = np.arange(6.0)
    sign = np.array(
        [
            [1, 0, 0, -1, -1, -1],  # through a tie run: midpoint of x[1], x[2]
            [1, 0, 1, 1, 1, 1],  # into a tie and back: none
            [1, np.nan, -1, -1, -1, -1],  # masked in between: none
            [1, -1, 1, 1, 1, 1],  # twice
        ]
    )
    d = sign * np.array([2.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    d[0, 0], d[3, 0], d[3, 1] = 2.0, 3.0, -1.0
    pos, new = analysis.series_crossings(sign, d, x)
    assert pos[0, 2] == pytest.approx(1.5) and new[0, 2] == -1
    assert np.isnan(pos[1]).all() and np.isnan(pos[2]).all()
    assert pos[3, 0] == pytest.approx(0.75) and pos[3, 1] == pytest.approx(1.5)


def test_sensitivity_along_bandwidth(ds, st):
    sens = analysis.sensitivity(st)
    assert {"steps_bandwidth", "factor_bandwidth", "steps_latency", "steps_p", "steps_m"} <= set(sens.data_vars)
    bw = ds.bandwidth.values
    for alpha in LATENCIES:
        k = int(np.searchsorted(bw, beta_star(alpha)))  # first grid point above the crossover
        steps = sens.steps_bandwidth.sel(p=2, m=2, latency=alpha).values
        factor = sens.factor_bandwidth.sel(p=2, m=2, latency=alpha).values
        expected = np.where(np.arange(len(bw)) < k, k - np.arange(len(bw)), np.arange(len(bw)) - k + 1)
        np.testing.assert_array_equal(steps, expected)
        np.testing.assert_allclose(factor, 10.0 ** (0.25 * expected))
    # Latency never changes the winner at p=2, m=2 (beta* barely moves).
    assert np.isnan(sens.steps_latency.sel(p=2, m=2)).all()
    codes = np.array([[3, 3, -1, 4, 4], [1, 1, 1, 1, 1]])
    steps, factor = analysis.steps_to_change(codes, np.array([1.0, 2.0, 4.0, 8.0, 16.0]), axis=1)
    np.testing.assert_array_equal(steps[0], [3, 2, np.nan, 2, 3])  # the unknown point is skipped, and has none
    assert np.isnan(steps[1]).all() and factor[0, 1] == 4.0


def test_unfinished_units_are_masked(tmp_path):
    spec = SweepSpec.from_config(config(schedules=["gpipe", "chimera"], bandwidth=[1e9, 1e11], latency=[1e-6]))
    path = tmp_path / "partial.zarr"
    group, _ = open_for_sweep(path, spec, "")
    write_unit(group, spec, 0, 0, evaluate_unit(spec, 0, 0))  # p=2, m=2 done
    write_unit(group, spec, 1, 1, evaluate_unit(spec, 1, 1))  # p=4, m=6 written ...
    group["done"][1, 1] = False  # ... but killed before it was marked done
    with pytest.warns(IncompleteStoreWarning):
        ds = analysis.load(path)
    st = analysis.stability(ds)
    assert (st.winner_sim.sel(p=2, m=2) >= 0).all()
    assert (st.winner_sim.sel(p=4, m=6) == -1).all() and np.isnan(st.disagree_formula.sel(p=4, m=6)).all()
    assert int(analysis.summarize(st, by=()).n_points) == 2
    assert np.isnan(analysis.ranks(ds).rank_sim.sel(p=4, m=6)).all()
    assert (analysis.crossovers(ds).n_crossings.sel(p=4, m=6) == 0).all()


def test_comm_and_compute_axes(tmp_path):
    spec = SweepSpec.from_config(
        config(
            schedules=["gpipe", "chimera"], p=[2], m=[2], bandwidth=[1e9, 1e10, 1e11, 1e12], latency=[1e-6],
            comm={"mode": ["overlap", "contention"]}, compute=[1e14, 1e15],
        )
    )
    path = tmp_path / "axes.zarr"
    run_sweep(spec, path, "", progress=False)
    ds = analysis.load(path)
    st = analysis.stability(ds)
    assert st.winner_sim.dims == ("p", "m", "comm", "compute", "bandwidth", "latency")
    cx = analysis.crossovers(ds)
    assert cx.crossover.dims == ("schedule", "other", "p", "m", "comm", "compute", "latency", "crossing")
    assert int(cx.n_crossings.sel(schedule="chimera", other="gpipe").max()) >= 1
    sens = analysis.sensitivity(st)
    assert "steps_compute" in sens and "steps_bandwidth" in sens and "steps_p" not in sens
    by_comm = analysis.summarize(st, by=("comm",))
    assert by_comm.share_disagree_formula.dims == ("comm",)
    lat = analysis.crossovers(ds, along="compute")
    assert "bandwidth" in lat.dims and lat.attrs["along"] == "compute"


def test_load_refuses_what_is_not_a_results_store(tmp_path):
    with pytest.raises(analysis.AnalysisError, match="no such store"):
        analysis.load(tmp_path / "missing.zarr")
    xr.Dataset({"x": ("a", [1.0])}).to_zarr(tmp_path / "other.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(analysis.AnalysisError, match="not a ppsweep results store"):
        analysis.load(tmp_path / "other.zarr")
