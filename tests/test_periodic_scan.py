"""The periodic scan (ppsweep.engine.steady_state, the runs; native_scan, the step over them) held
against the plain compiled scan on tables long enough to step over their steady state."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep.engine import native_scan
from ppsweep.engine.compiled import compiled_for
from ppsweep.engine.core import ENGINE_RTOL, simulate
from ppsweep.engine.cost_grid import Costs
from ppsweep.engine.native_scan import native_steps
from ppsweep.engine.noise import NoiseConfig
from ppsweep.engine.steady_state import MIN_BLOCKS, periodic_runs, wave_keys
from ppsweep.tables.build import build_schedule

#: Long tables of every family, each in one comm mode (the four modes meet).
LONG = [("1f1b", 4, 192, "overlap"), ("zb_h1", 4, 192, "contention"), ("interleaved_1f1b", 4, 192, "ports"),
        ("chimera", 4, 192, "blocking"), ("hanayo", 4, 192, "overlap"), ("dualpipe", 4, 192, "contention"),
        ("zbv", 4, 192, "ports"), ("gpipe", 8, 256, "blocking"), ("interleaved_zb", 4, 192, "overlap"), ("zb_h2", 8, 256, "ports")]


def _grid(n_stages: int) -> Costs:
    """Compute-bound to message-bound points (the bandwidth spans three decades), two latencies and
    unequal stages, so that the points of one tile repeat after different numbers of blocks."""
    profile = np.linspace(0.8, 1.3, n_stages)
    beta = np.geomspace(0.3, 300.0, 48)[:, None]
    alpha = np.array([0.0, 0.05])[None, :]
    return Costs.of(n_stages, profile, 2.1 * profile, alpha, beta, 4.0, grad_bytes=10.0 * profile, t_opt=0.1)


def _close(got, want, where: str) -> None:
    for field in ("t_sim", "worker_finish", "compute_time"):
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=ENGINE_RTOL, atol=0, err_msg=f"{where}: {field}")
    assert np.all(np.abs(got.comm_time - want.comm_time) <= ENGINE_RTOL * want.t_sim), f"{where}: comm_time"


@pytest.mark.parametrize("name, p, m, mode", LONG, ids=[f"{n}-p{p}-m{m}-{mode}" for n, p, m, mode in LONG])
def test_the_periodic_scan_steps_over_the_steady_state_within_the_engine_tolerance(name, p, m, mode, monkeypatch):
    counted = []  # what each call of the compiled walk counted (native_scan.run_points' return)
    run_points = native_scan.run_points
    monkeypatch.setattr(native_scan, "run_points", lambda *a, **kw: counted.append(run_points(*a, **kw)))
    table = build_schedule(name, p, m)
    costs = _grid(table.n_stages)
    plain = simulate(table, costs, mode, backend="native_scan")
    plain_counts, counted[:] = sum(counted), []
    stepped = simulate(table, costs, mode, backend="periodic_scan")
    stepped_counts = sum(counted)
    assert stepped.backend == "periodic_scan"
    _close(stepped, plain, f"{name} {mode}")
    # a point that steps over no run is computed by the same operations as the plain scan, to the bit;
    # so a point that differs stepped (the run was found and taken)
    assert np.any(stepped.t_sim != plain.t_sim), "no point stepped over the steady state"
    n_points = plain.t_sim.size
    assert plain_counts[native_scan.WAVE_POINTS] == compiled_for(table).program.n_waves * n_points
    assert plain_counts[native_scan.STEPPED] == 0
    assert 0 < stepped_counts[native_scan.STEPPED] <= n_points * periodic_runs(
        native_steps(compiled_for(table).program, compiled_for(table).routing(mode)), p, m).start.size
    assert stepped_counts[native_scan.WAVE_POINTS] < plain_counts[native_scan.WAVE_POINTS]  # waves stepped over


def test_auto_takes_the_periodic_scan_and_it_is_the_plain_scan_with_noise(monkeypatch):
    from ppsweep.engine import core

    table = build_schedule("1f1b", 4, 192)
    costs = _grid(table.n_stages)
    monkeypatch.setattr(core, "ENVELOPE_MIN_WORK", 1)  # no envelope within its budget here
    monkeypatch.setattr(core, "ENVELOPE_WORK_PER_OP_POINT", 1e-6)
    assert simulate(table, costs, "overlap", backend="scan").backend == "periodic_scan"  # the first of the scans
    assert simulate(table, costs, "overlap").backend == "piecewise_scan"  # before it, interpolating along the bandwidth
    noise = NoiseConfig.from_mapping({"samples": 3, "seed": 5, "compute": {"dist": "lognormal", "cv": 0.2}})
    a = simulate(table, costs, "overlap", backend="periodic_scan", noise=noise)
    b = simulate(table, costs, "overlap", backend="native_scan", noise=noise)
    for field in ("t_sim", "worker_finish", "comm_time", "compute_time"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


def test_a_table_without_a_repeating_run_is_scanned_wave_by_wave():
    table = build_schedule("1f1b", 4, 8)  # too short: no run spans MIN_BLOCKS blocks
    program = compiled_for(table).program
    assert periodic_runs(native_steps(program, compiled_for(table).routing("overlap")), 4, 8).start.size == 0
    costs = _grid(table.n_stages)
    a, b = simulate(table, costs, "overlap", backend="periodic_scan"), simulate(table, costs, "overlap", backend="native_scan")
    assert np.array_equal(a.t_sim, b.t_sim) and np.array_equal(a.comm_time, b.comm_time)


@pytest.mark.parametrize("name, p, m, mode", LONG[:4])
def test_periodic_runs_repeat_step_for_step(name, p, m, mode):
    table = build_schedule(name, p, m)
    compiled = compiled_for(table)
    steps = native_steps(compiled.program, compiled.routing(mode))
    runs = periodic_runs(steps, p, m)
    assert runs.start.size >= 1
    keys = wave_keys(steps)
    fields = np.column_stack([steps.worker, steps.row, steps.dep, steps.out, steps.slot, steps.link, steps.held])  # every field of a step
    for q in range(runs.start.size):
        start, block, end = int(runs.start[q]), int(runs.block[q]), int(runs.end[q])
        assert end - start >= MIN_BLOCKS * block
        rows = runs.rows[runs.rows_at[q]:runs.rows_at[q + 1]]
        assert set(range(p)) <= set(rows.tolist())  # every worker computes in a block
        # each block's steps are the block before's, field for field
        ws = steps.wave_start
        for j in range(1, (end - start) // block):
            a, b = start + (j - 1) * block, start + j * block
            assert np.array_equal(keys[a:b], keys[b:b + block])
            assert np.array_equal(fields[ws[a]:ws[b]], fields[ws[b]:ws[b + block]])
