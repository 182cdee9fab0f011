"""The seed paper's findings that ppsweep reproduces by construction, on a reduced study.

The reduced study is ``conf/sweep/paper.yaml`` cut to GPipe, 1F1B and Chimera, p in {4, 8},
m in {8, 16}, one system (the baseline), one comm mode, evaluated unit by unit without a store; free communication goes
through ``ppsweep.paper.sweeps``'s single-assumption runner (``ppsweep.engine.core.simulate``).
Each finding's function is tested on a reduced sweep in ``tests/test_paper_findings.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep.paper import sweeps
from ppsweep.paper.systems import SYSTEMS
from ppsweep.sweep.evaluate import evaluate_unit

REDUCED = ["schedules=[gpipe,1f1b,chimera]", "p=[4,8]", "m=[8,16]", "comm.mode=overlap", "compute=[1.0e+15]", "bandwidth=[5.0e+10]", "latency=[5.0e-7]"]


@pytest.fixture(scope="module")
def paper():
    """The reproduction's sweep helpers."""
    return sweeps


@pytest.fixture(scope="module")
def study(paper):
    """(spec, {(p, m): unit results}) of the reduced study."""
    spec = paper.load_plan("paper", REDUCED).spec
    assert spec.schedules == ("gpipe", "1f1b", "chimera")
    units = {(spec.p[i], spec.m[j]): evaluate_unit(spec, i, j) for i, j in spec.units()}
    return spec, units


def value(spec, units, name, schedule, p, m, variable):
    return float(np.ravel(units[(p, m)][variable][spec.schedules.index(schedule)])[0])


def test_paper_sweep_config_is_the_study(paper):
    spec = paper.load_plan("paper", []).spec
    assert spec.schedules == ("gpipe", "1f1b", "chimera", "hanayo")
    assert spec.p == (4, 8) and spec.m == (8, 16, 32, 64, 128, 256)
    assert spec.comm == ("overlap", "blocking", "contention") and spec.comm_axis
    assert sorted(spec.compute.tolist()) == [1e14, 1e15, 1e16]
    # The nine systems' networks are the diagonal of the swept bandwidth × latency grid.
    for system in SYSTEMS:
        peak, bw, lat = system.peak_flops, system.bandwidth, system.latency
        assert peak in spec.compute and bw in spec.bandwidth and lat in spec.latency
        assert bw * lat == pytest.approx(2.5e4)  # latency scales with 1/bandwidth, as in conf/system/*_nw.yaml


def test_gpipe_and_1f1b_take_the_same_time_without_communication(paper, study):
    spec, _ = study
    free = paper.Variant("free", free_comm=True)
    for p in spec.p:
        for m in spec.m:
            # contention with free links is overlap; one point of it keeps the run short
            for mode in ("overlap", "blocking") + (("contention",) if (p, m) == (8, 16) else ()):
                t = {s: paper.simulate_variants(spec, s, p, m, mode, [free])["t_sim"] for s in ("gpipe", "1f1b")}
                assert np.all(np.isfinite(t["gpipe"]))
                np.testing.assert_allclose(t["1f1b"], t["gpipe"], rtol=1e-12, err_msg=f"p={p} m={m} {mode}")


def test_1f1b_activation_peak_is_below_gpipe(study):
    spec, units = study
    for p in spec.p:
        for m in spec.m:
            gpipe = value(spec, units, "", "gpipe", p, m, "peak_activation_bytes")
            one = value(spec, units, "", "1f1b", p, m, "peak_activation_bytes")
            if m > p:
                assert one < gpipe, (p, m)
                assert one == pytest.approx(gpipe * p / m)  # p microbatches in flight instead of m
            else:
                assert one == pytest.approx(gpipe), (p, m)  # m = p: 1F1B also holds every microbatch


def test_chimera_formula_bubble_at_p8_m16(study):
    spec, units = study
    assert value(spec, units, "", "chimera", 8, 16, "bubble_formula") == pytest.approx(6 / 38, rel=1e-12)
    # The table (F = 1, B = 2 slots) idles more: 144/528, the paper's "about 26 %".
    assert value(spec, units, "", "chimera", 8, 16, "bubble_table") == pytest.approx(144 / 528, rel=1e-12)


def test_reduced_study_is_valid_where_the_schedules_run(study):
    spec, units = study
    for (p, m), out in units.items():
        valid = np.ravel(out["valid"])
        assert valid.all(), (p, m)  # every schedule supports p in {4, 8}, m in {8, 16}
        assert np.all(np.isfinite(out["t_sim"])) and np.all(out["t_sim"] > 0)
