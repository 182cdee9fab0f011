"""The schedule search (issue 28): the zero-bubble paper's 1.5B row, objectives, the store, the CLI, the PyTorch export."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppsweep.paper import zero_bubble
from ppsweep.search.driver import search
from ppsweep.search.region import Region, figures
from ppsweep.search.spaces import Space
from ppsweep.tables.build import build_schedule

#: The zero-bubble paper's Table 1 activation memory per layer: M_B = sb(34h + 5as) until B, M_W = 32sbh
#: from B to W; with Table 3's 1.5B model (h = 2304, a = 24, s = 1024), M_W / M_B:
W_SHARE_15B = 32 * 2304 / (34 * 2304 + 5 * 24 * 1024)


@pytest.fixture(scope="module")
def row():
    s = zero_bubble.settings()[0]
    assert (s.model, s.p, s.m) == ("1.5B", 8, 24)
    return s


@pytest.fixture(scope="module")
def region(row):
    return Region.of(row.t_f, row.t_b, row.t_w, latency=row.t_comm, w_share=W_SHARE_15B)


def small_space(p: int, m: int) -> Space:
    """A few variants of space ``a`` around the paper's memory limits (the full space runs in the README)."""
    def grid(p, m, cap, times, wshare):
        return {"warmup": [p - 1, 2 * p - 2, 2 * p - 1], "lag": [p - 1, m], "mem": [int(cap)], "wshare": [wshare]}
    return Space("a-small", "test subset of space a", grid, ("warmup", "lag"))


def test_bubble_rate_is_the_papers(row, region):
    """The search's bubble (longest stage span) gives Table 5's 1F1B, ZB-H1 and ZB-H2 to 4 decimals."""
    for name, column in (("1f1b", "1f1b"), ("zb_h1", "zb_h1"), ("zb_h2", "zb_h2")):
        fig = figures(build_schedule(name, row.p, row.m), region)
        assert round(float(fig.bubble.item()), 4) == row.bubble[column], name


@pytest.mark.parametrize("cap,column", [(8, "zb_1p"), (16, "zb_2p")])
def test_search_meets_the_zero_bubble_scheduler(row, region, cap, column):
    """Under the paper's caps (p and 2p M_B, its M_W/M_B rule) the search is at or below ZB-1p and ZB-2p."""
    result = search(small_space(row.p, row.m), row.p, row.m, region, cap=cap, objective="bubble", budget=200,
                    progress=False)
    best = result.best[0]
    assert best.figures.peak <= cap + 1e-9
    assert round(float(best.figures.bubble.item()), 4) <= row.bubble[column], best.label
    assert best.score <= min(c.score for c in result.incumbents) + 1e-12 or column == "zb_1p"


def test_region_objectives_and_margin():
    region = Region.of(1.0, 1.0, 0.5, latency=[0.0, 0.1], bandwidth=[1e3, math.inf], msg_bytes=10.0)
    for objective in ("mean", "worst", "p95", "pwin"):
        result = search("a", 4, 8, region, cap=4, objective=objective, budget=40, progress=False)
        assert result.evaluated <= 40 and result.best and result.incumbents
        winner, hand = result.best[0], result.incumbents[0]
        assert winner.figures.t_sim.shape == (2, 2)
        if objective == "pwin":
            assert 0 <= result.margin <= 1 and result.margin == -winner.score
        else:
            assert result.margin == pytest.approx((hand.score - winner.score) / hand.score)
        assert all(c.figures.peak <= 4 for c in result.best + result.incumbents)


def test_noise_objective_uses_samples():
    from ppsweep.engine.noise import Jitter, NoiseConfig

    region = Region.of(1.0, 1.0, 0.5, latency=0.05, noise=NoiseConfig(samples=8, seed=3, compute=Jitter("lognormal", 0.1)))
    result = search("a", 4, 8, region, cap=8, objective="p95", budget=4, progress=False, incumbents=("1f1b",))
    t = result.best[0].figures.t_sim
    assert t.shape == (1, 1, 8) and result.best[0].score == pytest.approx(np.percentile(t, 95))


def test_bad_input_is_one_line():
    region = Region.of(1.0, 1.0, 0.5)
    with pytest.raises(ValueError, match="objective: unknown 'fast'"):
        search("a", 4, 8, region, objective="fast")
    with pytest.raises(ValueError, match="space: unknown 'z'"):
        search("z", 4, 8, region)
    with pytest.raises(ValueError, match="latency: must be finite seconds >= 0"):
        Region.of(1.0, 1.0, 0.5, latency=-1)


def test_cli_writes_store_and_a_csv_pytorch_loads(tmp_path, capsys):
    pytest.importorskip("torch")
    import xarray as xr

    from ppsweep.search.cli import main

    out, csv = tmp_path / "s.zarr", tmp_path / "best.csv"
    assert main(["--space", "b", "--p", "4", "--m", "8", "--t-f", "1", "--t-i", "1", "--t-w", "0.5", "--latency", "0.05",
                 "--cap", "4", "--budget", "12", "--out", str(out), "--csv", str(csv)]) == 0
    text = capsys.readouterr().out
    assert "PyTorch's _load_csv: valid" in text
    ds = xr.open_zarr(out)
    assert bool(ds.searched[0]) and not bool(ds.searched[-1]) and ds.t_sim.dims == ("candidate", "latency", "bandwidth")
    assert ds.attrs["space"] == "b" and np.all(ds.peak_activations.values <= 4) and ds.attrs["evaluated"] <= 12
    assert main(["--p", "4", "--m", "8", "--t-f", "1"]) == 2
    assert capsys.readouterr().err.strip() == "error: --t-i: required without --profile (seconds per microbatch)"


def test_exported_csv_loads_in_pytorch(tmp_path, row, region):
    pytest.importorskip("torch")
    from ppsweep.search.export import check_with_torch, export_csv
    from ppsweep.tables.interchange import read_csv

    result = search(small_space(row.p, row.m), row.p, row.m, region, cap=16, objective="bubble", budget=50, progress=False)
    table = build_schedule(result.best[0].label, row.p, row.m)
    path = export_csv(table, tmp_path / "zb.csv")
    assert check_with_torch(path, table.p, table.n_stages, table.m) > 3 * table.m * table.p  # with sends and receives
    assert read_csv(path).orders() == table.orders()
    # an order whose ranks wait on each other: PyTorch's lowering refuses it
    path.write_text("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n")
    with pytest.raises(ValueError, match="PyTorch rejected"):
        check_with_torch(path, 2, 2, 2)


def test_profiled_costs_drive_the_search(tmp_path, capsys):
    """A profiled-costs file (ppsweep.cost_profile) is the region: per-stage times, its message."""
    from ppsweep.cost_profile import load_cost_profile
    from ppsweep.search.cli import main

    path = tmp_path / "costs.yaml"
    path.write_text("format: ppsweep-costs/1\nt_f: [1.0, 1.2, 1.2, 1.0]\nt_i: [1.0, 1.1, 1.1, 1.0]\n"
                    "t_w: [0.5, 0.6, 0.6, 0.5]\nmessage: {time: 0.05}\n")
    region = Region.from_profile(load_cost_profile(path))
    assert region.latency == (0.05,) and region.bandwidth == (math.inf,) and region.t_f == (1.0, 1.2, 1.2, 1.0)
    table = build_schedule("interleaved_1f1b@v=2", 4, 8)  # 8 stages: each profiled stage cut in two
    same = Region.of([0.5, 0.5, 0.6, 0.6, 0.6, 0.6, 0.5, 0.5], [0.5, 0.5, 0.55, 0.55, 0.55, 0.55, 0.5, 0.5],
                     [0.25, 0.25, 0.3, 0.3, 0.3, 0.3, 0.25, 0.25], latency=0.05)
    assert figures(table, region).t_sim == pytest.approx(figures(table, same).t_sim, rel=1e-12)
    assert main(["--space", "a", "--p", "4", "--m", "8", "--profile", str(path), "--cap", "4", "--budget", "10",
                 "--out", str(tmp_path / "p.zarr")]) == 0
    assert "margin over the best hand-made" in capsys.readouterr().out


def test_overhead_is_per_pass_whatever_its_size():
    table = build_schedule("interleaved_1f1b@v=2", 4, 8)
    costs = Region.of(1.0, 1.0, 0.5, overhead=0.1).table_costs(table)
    assert np.allclose(costs.t_f, 0.6) and np.allclose(costs.t_b, 0.85) and np.allclose(costs.t_i, 0.6)
    assert np.allclose(costs.t_w, 0.35)


def test_cap_in_bytes():
    region = Region.of(1.0, 1.0, 0.5, activation_bytes=[1e6, 2e6, 2e6, 1e6])  # per profiled stage
    # 1F1B: worker w holds p-w activations of its stage: 4e6, 6e6, 4e6, 1e6
    assert figures(build_schedule("1f1b", 4, 8), region).peak == pytest.approx(6e6)
    assert figures(build_schedule("interleaved_1f1b@v=2", 4, 8), region).peak == pytest.approx(
        max(build_schedule("interleaved_1f1b@v=2", 4, 8).peak_activations_per_worker(
            np.repeat(np.array([1e6, 2e6, 2e6, 1e6]) / 2, 2))))
    result = search("a", 4, 8, region, cap=6e6, objective="mean", budget=10, progress=False)
    assert all(c.figures.peak <= 6e6 for c in result.best + result.incumbents)


@pytest.mark.parametrize("name", ["flex@lag=24@mem=16@warmup=15@wshare=37", "zbv", "interleaved_zb@v=2", "zb_h2"])
def test_bubble_span_is_the_reference_post_validated_step(row, region, name):
    """The search's span (engine finish minus the analytic start) is the reference simulator's longest worker span."""
    from ppsweep.engine.reference import post_validated_step, reference_simulate

    table = build_schedule(name, row.p, row.m)
    costs = region.table_costs(table)
    per_stage = {k: np.asarray(getattr(costs, k), dtype=float).reshape(-1).tolist() for k in ("t_f", "t_b", "t_i", "t_w")}
    assert len(per_stage["t_f"]) == table.n_stages
    ref = reference_simulate(table, per_stage["t_f"], per_stage["t_b"], row.t_comm, math.inf, 0.0, "overlap",
                             t_i=per_stage["t_i"], t_w=per_stage["t_w"], record=True)
    span = post_validated_step(ref)
    assert float(figures(table, region).bubble.item()) == pytest.approx((span - row.busy) / span, rel=1e-12)
