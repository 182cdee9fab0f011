"""The fastest schedule that fits (ppsweep.analysis.fits) on a dataset written by hand."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from ppsweep.analysis import AnalysisError
from ppsweep.analysis.fits import fastest_that_fits, fit_summary, fits_mask


def dataset() -> xr.Dataset:
    """Schedules a, b, c; recompute none/full; two bandwidths; p=4, m=8; c cannot run.

    t_sim (s) at bandwidth 1 / 2:      peak memory (GB):
      a none 1.0 / 2.0   a full 1.3 / 2.6      a none 90   a full 30
      b none 1.5 / 1.5   b full 1.9 / 1.9      b none 70   b full 20
    """
    t = np.array([[[1.0, 2.0], [1.3, 2.6]], [[1.5, 1.5], [1.9, 1.9]], [[0.1, 0.1], [0.1, 0.1]]])  # schedule, recompute, bw
    peak = np.array([[90e9, 30e9], [70e9, 20e9], [1e9, 1e9]])
    return xr.Dataset(
        {
            "t_sim": (("schedule", "p", "m", "recompute", "bandwidth", "latency"), t[:, None, None, :, :, None]),
            "peak_memory_bytes": (("schedule", "p", "m", "recompute"), peak[:, None, None, :]),
            "valid": (("schedule", "p", "m"), np.array([True, True, False])[:, None, None]),
            "done": (("p", "m"), np.array([[True]])),
        },
        coords={"schedule": ["a", "b", "c"], "p": [4], "m": [8], "recompute": ["none", "full"],
                "bandwidth": [1e9, 2e9], "latency": [1e-6]},
    )


def test_fastest_that_fits_over_schedule_and_recompute():
    result = fastest_that_fits(dataset(), capacity=[100e9, 80e9, 25e9, 10e9]).squeeze(["p", "m", "latency"])
    labels = result["choice_label"].transpose("memory_capacity", "bandwidth").values.tolist()
    assert labels == [
        ["a · none", "b · none"],  # 100 GB: everything valid fits; c cannot run
        ["a · full", "b · none"],  # 80 GB: a needs recomputation (1.3 s) and still beats b at bw 1
        ["b · full", "b · full"],  # 25 GB: only b with full recomputation
        ["", ""],                  # 10 GB: nothing fits
    ]
    cost = result["memory_cost"].transpose("memory_capacity", "bandwidth").values
    assert cost[0] == pytest.approx([0.0, 0.0])
    assert cost[1] == pytest.approx([0.3, 0.0])
    assert cost[2] == pytest.approx([0.9, 1.9 / 1.5 - 1])
    assert np.isnan(cost[3]).all()
    changed = result["fit_changes_winner"].transpose("memory_capacity", "bandwidth").values
    assert changed.tolist() == [[False, False], [True, False], [True, True], [False, False]]
    # Ranks among fitting options only, at 80 GB and bandwidth 1: a·full 1, b·none 2, others none.
    ranks = result["rank_fit"].sel(memory_capacity=80e9, bandwidth=1e9)
    by_label = dict(zip(result["option_label"].values.tolist(), ranks.values.tolist()))
    assert by_label["a · full"] == 1 and by_label["b · none"] == 2 and by_label["b · full"] == 3
    assert np.isnan(by_label["a · none"]) and np.isnan(by_label["c · none"])
    assert result["n_fit"].sel(memory_capacity=80e9).values.tolist() == [3, 3]


def test_choice_over_schedules_only_keeps_recompute_as_a_dimension():
    result = fastest_that_fits(dataset(), capacity=80e9, over=["schedule"])
    labels = result["choice_label"].squeeze(["p", "m", "latency", "memory_capacity"]).transpose("recompute", "bandwidth")
    assert labels.values.tolist() == [["b", "b"], ["a", "b"]]


def test_store_fits_variable_is_used_and_summarised():
    ds = dataset()
    caps = xr.DataArray([80e9, 25e9], dims="memory_capacity", coords={"memory_capacity": [80e9, 25e9]})
    ds["fits"] = ds["valid"] & (ds["peak_memory_bytes"] <= caps)
    assert fits_mask(ds).dims == ("schedule", "p", "m", "recompute", "memory_capacity")
    rows = fit_summary(fastest_that_fits(ds))
    assert rows[0]["memory_capacity"] == 80e9 and rows[0]["shares"] == {"a · full": 0.5, "b · none": 0.5}
    assert rows[1]["shares"] == {"b · full": 1.0}
    assert rows[1]["median_memory_cost"] == pytest.approx(np.median([0.9, 1.9 / 1.5 - 1]))


def test_bad_requests():
    with pytest.raises(AnalysisError, match="capacity: the store has no memory_capacity axis"):
        fits_mask(dataset())
    with pytest.raises(AnalysisError, match="capacity: must be bytes > 0"):
        fits_mask(dataset(), capacity=[-1.0])
    with pytest.raises(AnalysisError, match="over: 'comm' is not a dimension of t_sim"):
        fastest_that_fits(dataset(), capacity=1e11, over=["comm"])


def test_map_is_written(tmp_path):
    from ppsweep.analysis.fits import plot_fits_map

    result = fastest_that_fits(dataset(), capacity=[100e9, 80e9, 25e9, 10e9])
    path = plot_fits_map(result, tmp_path / "fits_map.png")
    assert path.stat().st_size > 1000


def test_recompute_cost():
    from ppsweep.analysis.fits import recompute_cost

    cost = recompute_cost(dataset()).sel(recompute="full").squeeze(["p", "m", "latency"]).transpose("schedule", "bandwidth")
    assert cost.values[:2] == pytest.approx(np.array([[0.3, 0.3], [1.9 / 1.5 - 1, 1.9 / 1.5 - 1]]))
    assert np.isnan(cost.values[2]).all()  # c cannot run
    with pytest.raises(AnalysisError, match="baseline: must be one of none, full"):
        recompute_cost(dataset(), baseline="selective")
