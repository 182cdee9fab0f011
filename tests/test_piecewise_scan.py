"""The piecewise scan (ppsweep.engine.piecewise, backend ``piecewise_scan``): its plan and certificate on
convex functions whose kinks are known, and the backend against the reference and the periodic scan."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep import build_schedule
from ppsweep.engine import piecewise, scan_tally
from ppsweep.engine.backend import UnsupportedCase
from ppsweep.engine.comm import MODES
from ppsweep.engine.core import ENGINE_RTOL, simulate
from ppsweep.engine.cost_grid import Costs
from ppsweep.engine.noise import NoiseConfig

BANDWIDTH = np.logspace(9, 12, 5)
LATENCY = np.logspace(-8, -4, 17)


def _line(u: np.ndarray) -> piecewise.GridLines:
    return piecewise.GridLines((1, u.size, 1), (u - u[0]) / (u[-1] - u[0]), 0)


def _fill(f, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, piecewise.Plan]:
    """``f`` at every point by the plan: its ends and midpoints computed, certified segments interpolated;
    the values and the certified segments."""
    plan = piecewise.plan(_line(u))
    values = np.full((1, u.size), np.nan)
    values[0, plan.ends] = f(u[plan.ends])
    ends = values[:, plan.probed_ends]
    mid = f(u[plan.probed_ends].mean(axis=-1))[None]
    exact = np.zeros(plan.segments.shape[0], dtype=bool)
    exact[plan.probed] = piecewise.certified(ends, mid, ends[0].max(axis=-1))
    piecewise.interpolate(plan, values, exact)
    return values[0], exact, plan


def test_a_segment_is_certified_exactly_where_the_convex_function_has_no_kink():
    u = np.logspace(-8, -4, 22)  # segments [0, 7], [7, 14], [14, 21]
    kink = 0.5 * (u[9] + u[10])  # inside the second segment only
    f = lambda x: np.maximum(1.0 + 3.0 * x, 1.0 + 3.0 * kink + 50.0 * (x - kink))  # noqa: E731 - convex, one kink
    values, exact, plan = _fill(f, u)
    assert plan.segments.tolist() == [[0, 7], [7, 14], [14, 21]]
    assert exact.tolist() == [True, False, True]
    done = ~np.isnan(values)
    assert np.flatnonzero(~done).tolist() == list(range(8, 14)), "the kinked segment's inner points are left to the scan"
    np.testing.assert_allclose(values[done], f(u[done]), rtol=1e-15, atol=0)


def test_a_kink_too_small_to_see_moves_an_interpolated_value_by_less_than_the_certificate_allows():
    u = np.linspace(0.0, 1.0, 8)
    top = 1.0
    kink = 0.37
    bend = piecewise.TOLERANCE * 1.5  # below the tolerance at the midpoint: certified
    f = lambda x: top + np.maximum(0.0, bend * (x - kink) / (1 - kink))  # noqa: E731
    values, exact, _ = _fill(f, u)
    assert exact.all()
    assert np.max(np.abs(values - f(u))) <= 2 * piecewise.TOLERANCE * top


def test_the_grid_s_axis_is_the_one_that_moves_the_costs_least_and_lines_are_checked():
    table = build_schedule("1f1b", 4, 8)
    design = Costs.of(table.n_stages, 1e-3, 2e-3, LATENCY[None, :], BANDWIDTH[:, None], 1e6)
    lines = _lines_of(table, design)
    assert isinstance(lines, piecewise.GridLines) and lines.axis == 1 and lines.shape == (5, 17, 1)
    # an axis that moves the compute time and the latency on two different curves is no line
    scale = np.array([1.0, 2.0, 4.0])
    bent = Costs.of(table.n_stages, 1e-3 * scale[:, None], 2e-3, 1e-6 * scale ** 2, 1e10, 1e6)
    assert "off one line" in _lines_of(table, bent)
    assert _lines_of(table, Costs.of(table.n_stages, 1e-3, 2e-3, np.array([1e-6, 2e-6]), 1e10, 1e6)) == "no axis longer than 2"


def test_a_cost_on_a_large_constant_does_not_push_a_small_one_off_its_line():
    # Chimera's and DualPipe's all-reduces: a bandwidth term of tens of milliseconds under a latency
    # term. Their moves along the latency axis round on the large term's scale; positions read from
    # them put the latency itself (1e-8 to 1e-4 s) off its line, and the scan fell back to the
    # bandwidth axis, where the step time bends far more often.
    bandwidth, latency = np.logspace(9, 12, 32), np.logspace(-8, -4, 8)
    alpha = np.broadcast_to(latency[None, :], (32, 8)).ravel()
    wire = np.broadcast_to(1e6 / bandwidth[:, None], (32, 8)).ravel()
    all_reduce = 5e7 / np.broadcast_to(bandwidth[:, None], (32, 8)).ravel() + 6.0 * alpha
    lines = piecewise.grid_lines(np.vstack([alpha, wire, all_reduce]), (32, 8))
    assert isinstance(lines, piecewise.GridLines) and lines.axis == 1
    np.testing.assert_allclose(lines.u, (latency - latency[0]) / (latency[-1] - latency[0]), rtol=1e-12, atol=0)


def _lines_of(table, costs):
    """The piecewise scan's lines of ``costs`` for ``table``, or its reason."""
    from ppsweep.engine.core import PiecewiseScan

    plan = PiecewiseScan()._grid(table, costs, None).plan
    return plan if isinstance(plan, str) else plan.lines


@pytest.mark.parametrize("name", ["1f1b", "zb_h1", "interleaved_1f1b"])
def test_the_piecewise_scan_agrees_with_the_reference_in_every_mode(name):
    table = build_schedule(name, 4, 8)
    costs = Costs.of(table.n_stages, 1e-3, 2e-3, LATENCY[None, ::2], BANDWIDTH[:, None], 1e6, grad_bytes=1e6, t_opt=1e-4)
    for mode in MODES:
        with scan_tally.tallied() as tally:
            got = simulate(table, costs, mode, backend="piecewise_scan")
        ref = simulate(table, costs, mode, backend="reference")
        assert got.backend == "piecewise_scan"
        assert sum(t.points for t in tally.values()) < int(np.prod(costs.batch)), "some points interpolated"
        for field in ("t_sim", "worker_finish", "compute_time"):
            np.testing.assert_allclose(getattr(got, field), getattr(ref, field), rtol=ENGINE_RTOL, atol=0, err_msg=f"{mode} {field}")
        assert np.all(np.abs(got.comm_time - ref.comm_time) <= ENGINE_RTOL * ref.t_sim), mode


@pytest.mark.parametrize("name, p, m", [("hanayo", 16, 64), ("dualpipe", 16, 64), ("interleaved_1f1b", 16, 128)])
def test_the_piecewise_scan_agrees_with_the_periodic_scan_on_a_network_grid(name, p, m):
    table = build_schedule(name, p, m)
    bandwidth, latency = np.logspace(9, 12, 32), np.logspace(-8, -4, 8)
    costs = Costs.of(table.n_stages, 1e-3, 2e-3, latency[None, :], bandwidth[:, None], 1e6)
    scanned = 0
    for mode in MODES:
        with scan_tally.tallied() as tally:
            got = simulate(table, costs, mode, backend="piecewise_scan", finish=False)
        scanned += sum(t.points for t in tally.values())
        want = simulate(table, costs, mode, backend="periodic_scan", finish=False)
        np.testing.assert_allclose(got.t_sim, want.t_sim, rtol=ENGINE_RTOL, atol=0, err_msg=mode)
        np.testing.assert_array_equal(got.compute_time, want.compute_time)
        assert np.all(np.abs(got.comm_time - want.comm_time) <= ENGINE_RTOL * want.t_sim), mode
    assert scanned <= 0.8 * len(MODES) * 256, f"{scanned} of {len(MODES) * 256} points scanned"


def test_auto_takes_the_piecewise_scan_on_a_network_grid_but_not_with_noise_nor_as_a_scan():
    table = build_schedule("1f1b", 4, 8)
    costs = Costs.of(table.n_stages, 1e-3, 2e-3, LATENCY[None, :], BANDWIDTH[:, None], 1e6)
    auto = simulate(table, costs, "ports", cap=1)  # cap=1: the envelope declines
    assert auto.backend == "piecewise_scan", auto.reason
    assert simulate(table, costs, "ports", backend="scan").backend == "periodic_scan"
    noise = NoiseConfig.from_mapping({"samples": 2, "seed": 1, "compute": {"dist": "lognormal", "cv": 0.1}})
    with pytest.raises(UnsupportedCase, match="noise"):
        simulate(table, costs, "ports", backend="piecewise_scan", noise=noise)
    assert simulate(table, costs, "ports", noise=noise, cap=1).backend == "periodic_scan"


def test_a_grid_whose_costs_pass_the_memory_bound_is_declined(monkeypatch):
    from ppsweep.engine import core

    table = build_schedule("1f1b", 4, 8)
    costs = Costs.of(table.n_stages, 1e-3, 2e-3, LATENCY[None, :], BANDWIDTH[:, None], 1e6)
    assert simulate(table, costs, "ports", backend="piecewise_scan").backend == "piecewise_scan"
    monkeypatch.setattr(core, "PIECEWISE_FLOATS", 100)
    with pytest.raises(UnsupportedCase, match="floats"):
        simulate(table, costs, "ports", backend="piecewise_scan")
    assert simulate(table, costs, "ports", cap=1).backend == "periodic_scan"
