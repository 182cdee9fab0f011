"""The opt-in tally of the compiled scan (ppsweep.engine.scan_tally) against the counts the scan returns."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep.engine import native_scan, scan_tally
from ppsweep.engine.compiled import compiled_for
from ppsweep.engine.core import simulate
from ppsweep.engine.cost_grid import Costs
from ppsweep.tables.build import build_schedule


def _costs(n_stages: int) -> Costs:
    profile = np.linspace(0.8, 1.3, n_stages)
    return Costs.of(n_stages, profile, 2.1 * profile, np.array([0.0, 0.05])[None, :], np.geomspace(0.3, 300.0, 48)[:, None], 4.0,
                    grad_bytes=10.0 * profile, t_opt=0.1)


def test_the_tally_adds_what_each_scan_counted_and_changes_no_result(monkeypatch):
    counted = []  # native_scan.run_points' counts, range by range
    run_points = native_scan.run_points
    monkeypatch.setattr(native_scan, "run_points", lambda *a, **kw: counted.append(run_points(*a, **kw)) or counted[-1])
    table = build_schedule("1f1b", 4, 192)
    costs = _costs(table.n_stages)
    outside = simulate(table, costs, "ports", backend="periodic_scan")
    assert not scan_tally.active()
    counted.clear()
    with scan_tally.tallied() as tally:
        assert scan_tally.active()
        stepped = simulate(table, costs, "ports", backend="periodic_scan")
        stepped_counts, counted[:] = sum(counted), []
        plain = simulate(table, costs, "overlap", backend="native_scan")
        plain_counts = sum(counted)
    assert not scan_tally.active()
    assert (stepped.backend, plain.backend) == ("periodic_scan", "native_scan")
    np.testing.assert_array_equal(stepped.t_sim, outside.t_sim)  # tallied or not, the same bits
    n_points, n_waves = stepped.t_sim.size, compiled_for(table).program.n_waves
    assert set(tally) == {("1f1b", 4, "ports"), ("1f1b", 4, "overlap")}
    ports, overlap = tally[("1f1b", 4, "ports")], tally[("1f1b", 4, "overlap")]
    assert (ports.scans, ports.points, ports.wave_points) == (1, n_points, n_waves * n_points)
    assert (ports.scanned, ports.stepped) == (stepped_counts[native_scan.WAVE_POINTS], stepped_counts[native_scan.STEPPED])
    assert 0 < ports.scanned < ports.wave_points and ports.stepped > 0  # this table steps over its steady state
    assert (overlap.scanned, overlap.stepped) == (plain_counts[native_scan.WAVE_POINTS], 0) == (n_waves * n_points, 0)
    assert ports.seconds > 0 and overlap.seconds > 0


def test_a_tally_records_nothing_outside_its_block_and_does_not_nest():
    scan_tally.record(("gpipe", 2, "overlap"), 1.0, 4, 8, np.zeros(4, dtype=np.int64))  # outside: ignored
    with scan_tally.tallied() as tally:
        with pytest.raises(RuntimeError, match="already active"):
            with scan_tally.tallied():
                pass
        assert scan_tally.active()  # the failed nesting left the outer block's tally in place
    assert tally == {} and not scan_tally.active()
