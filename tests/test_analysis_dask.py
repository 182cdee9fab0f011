"""The analysis on dask: lazy, chunk-layout independent, and equal to a plain per-point computation.

The reference here is written from the documented rules (``ppsweep.analysis.ranks``,
``ppsweep.analysis.stability``), one point at a time in plain Python, not from the code under test.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
import xarray as xr
from scipy import stats

from ppsweep import analysis


@pytest.fixture(scope="module")
def store(small_store):
    return small_store


def _all(ds: xr.Dataset) -> dict[str, xr.Dataset]:
    st = analysis.stability(ds).compute()
    return {
        "ranks": analysis.ranks(ds).compute(),
        "stability": st,
        "crossovers": analysis.crossovers(ds),
        "sensitivity": analysis.sensitivity(st).compute(),
    }


def test_load_is_dask_backed_and_the_analysis_lazy(store):
    ds = analysis.load(store)
    assert ds["t_sim"].chunks is not None
    assert ds["t_sim"].data.chunksize[1:3] == (1, 1)  # one dask chunk per (p, m) unit
    st = analysis.stability(ds)
    assert all(st[name].chunks is not None for name in st.data_vars)  # nothing computed yet
    assert analysis.ranks(ds)["rank_sim"].chunks is not None
    assert analysis.load(store, chunks=None)["t_sim"].chunks is None


@pytest.mark.filterwarnings("ignore:.*chunks.*:UserWarning")  # chunks that cut the store's own
@pytest.mark.parametrize("chunks", [None, {"bandwidth": 4, "schedule": 1}, {"p": 2, "m": 2, "latency": 1}])
def test_results_do_not_depend_on_the_chunks(store, chunks):
    reference = _all(analysis.load(store))
    other = _all(analysis.load(store, chunks=chunks))
    for name in reference:
        xr.testing.assert_identical(other[name], reference[name])


def test_single_threaded_and_threaded_schedulers_agree(store):
    ds = analysis.load(store)
    threaded = analysis.stability(ds).compute(scheduler="threads")
    with dask.config.set(scheduler="synchronous"):
        single = analysis.stability(ds).compute()
    xr.testing.assert_identical(threaded, single)


def test_on_a_dask_distributed_cluster(store):
    distributed = pytest.importorskip("distributed")
    reference = analysis.stability(analysis.load(store)).compute(scheduler="synchronous")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster):
            on_cluster = analysis.stability(analysis.load(store)).compute()
            crossovers = analysis.crossovers(analysis.load(store))
    xr.testing.assert_identical(on_cluster, reference)
    xr.testing.assert_identical(crossovers, analysis.crossovers(analysis.load(store, chunks=None)))


def test_equal_to_a_plain_per_point_computation(store):
    raw = xr.open_zarr(store, chunks=None).load()
    names = [str(s) for s in raw.schedule.values]
    st = analysis.stability(analysis.load(store)).compute()
    checked = 0
    for p in raw.p.values:
        for m in raw.m.values:
            valid = raw.valid.sel(p=p, m=m).values & bool(raw.done.sel(p=p, m=m))
            formula = np.where(valid, raw.bubble_formula.sel(p=p, m=m).values, np.nan)
            table = np.where(valid, raw.bubble_table.sel(p=p, m=m).values, np.nan)
            for bw in raw.bandwidth.values:
                for lat in raw.latency.values:
                    t = np.where(valid, raw.t_sim.sel(p=p, m=m, bandwidth=bw, latency=lat).values, np.nan)
                    at = st.sel(p=p, m=m, bandwidth=bw, latency=lat)
                    sim_rank = _ranks(t)
                    form_rank = _ranks(formula)
                    win_sim = {names[k] for k in range(len(names)) if sim_rank[k] == 1}
                    win_form = {names[k] for k in range(len(names)) if form_rank[k] == 1}
                    assert set(analysis.winner_members(int(at.winner_sim), names)) == win_sim
                    assert set(analysis.winner_members(int(at.winner_table), names)) == {
                        names[k] for k, r in enumerate(_ranks(table)) if r == 1
                    }
                    assert float(at.disagree_formula) == float(not (win_sim & win_form))
                    assert float(at.differ_formula) == float(win_sim != win_form)
                    both = ~np.isnan(sim_rank) & ~np.isnan(form_rank)
                    x, y = sim_rank[both], form_rank[both]
                    if len(set(x)) > 1 and len(set(y)) > 1:
                        expected = stats.kendalltau(x, y, variant="b").statistic
                        assert float(at.tau_formula) == pytest.approx(expected, abs=1e-6)
                    else:
                        assert np.isnan(float(at.tau_formula))
                    checked += 1
    assert checked == raw.sizes["p"] * raw.sizes["m"] * raw.sizes["bandwidth"] * raw.sizes["latency"]
    assert 0 < float(st.disagree_formula.mean()) < 1  # the store has both flips and agreements


def _ranks(values: np.ndarray) -> np.ndarray:
    """Competition ranks with a 1e-9 relative tie band, NaN for NaN (the documented rule)."""
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if np.isnan(v):
            continue
        out[i] = 1 + sum(1 for w in values if not np.isnan(w) and w < v - 1e-9 * abs(v))
    return out



def test_python_m_ppsweep_analysis_is_the_analyze_command(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-m", "ppsweep.analysis", str(tmp_path / "missing.zarr")], cwd=root, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and run.stderr.strip().splitlines() == [f"error: {tmp_path / 'missing.zarr'}: no such store; run a sweep first (python -m ppsweep +sweep=...)"]
