"""Calibration from traces (ppsweep.measure.calibrate): ppsweep's own traces round-trip exactly;
committed PyTorch profiler traces (recorded with ppsweep.measure.torch_runtime, p=2, m=4, emulated
stages of known times) give those times. torch is not needed."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

import ppsweep
from ppsweep.calibrate import main
from ppsweep.cost_profile import load_cost_profile
from ppsweep.engine.reference import reference_simulate
from ppsweep.measure.calibrate import TraceError, fit_trace, read_spans, trace_files
from ppsweep.viz.trace import write_chrome_trace

TRACES = Path(__file__).parent / "data" / "torch_traces"


def _ppsweep_trace(path, name, opts, msg_bytes=1e5, mode="overlap"):
    table = ppsweep.build_schedule(name, 4, 8, **opts)
    n = table.n_stages
    t_f = [0.010 + 0.001 * s for s in range(n)]
    t_b = [2.1 * x for x in t_f]
    t_i = [0.9 * x for x in t_f]
    t_w = [b - i for b, i in zip(t_b, t_i)]
    result = reference_simulate(table, t_f, t_b, 2e-4, 1e9, msg_bytes, mode, t_i=t_i, t_w=t_w, record=True)
    write_chrome_trace(result.record, path, {"msg_bytes": msg_bytes})
    return t_f, t_b, t_i, t_w


@pytest.mark.parametrize("name, opts, split", [("1f1b", {}, False), ("zb_h1", {}, True),
                                               ("interleaved_1f1b", {"v": 2}, False), ("zbv", {}, True)])
def test_ppsweep_trace_round_trip(tmp_path, name, opts, split):
    t_f, t_b, t_i, t_w = _ppsweep_trace(tmp_path / "t.json", name, opts)
    fit = fit_trace([tmp_path / "t.json"])
    prof = fit.profile
    assert fit.overhead == 0.0 and fit.n_gaps > 0
    assert prof.t_f == pytest.approx(t_f, abs=1e-12)
    assert prof.t_b == pytest.approx(t_b, abs=1e-12)
    if split:
        assert prof.t_i == pytest.approx(t_i, abs=1e-12) and prof.t_w == pytest.approx(t_w, abs=1e-12)
    assert prof.msg_time == pytest.approx(2e-4 + 1e5 / 1e9, abs=1e-12)


def test_alpha_beta_fitted_over_message_sizes(tmp_path):
    for k, size in enumerate((1e5, 4e5, 1e6)):
        _ppsweep_trace(tmp_path / f"t{k}.json", "1f1b", {}, msg_bytes=size)
    prof = fit_trace([tmp_path]).profile
    assert prof.msg_time is None
    assert prof.alpha == pytest.approx(2e-4, abs=1e-12) and prof.beta == pytest.approx(1e9, rel=1e-9)


def test_torch_trace_gives_the_emulated_stage_times():
    # Recorded with ScheduleOneF1B, sleep stages t_f = (4, 6) ms, t_i = (3, 4), t_w = (3, 4) ms.
    fit = fit_trace([TRACES / "1f1b_p2_m4"])
    prof = fit.profile
    spans, _, _ = read_spans(trace_files([TRACES / "1f1b_p2_m4"]))
    for kind, field in (("F", "t_f"), ("B", "t_b")):
        for s in (0, 1):  # the median span plus the dispatch overhead, computed here independently
            med = statistics.median(x.end - x.start for x in spans if x.kind == kind and x.stage == s)
            assert getattr(prof, field)[s] == pytest.approx(med + fit.overhead, rel=1e-12)
    # the set sleeps plus what the runtime really spends around them (autograd, profiler, oversleep)
    assert prof.t_f == pytest.approx((0.004, 0.006), rel=0.25)
    assert prof.t_b == pytest.approx((0.006, 0.008), rel=0.25)
    assert all(t > s for t, s in zip(prof.t_f + prof.t_b, (0.004, 0.006, 0.006, 0.008)))
    assert 0 < fit.overhead < 1e-3 and 0 < prof.msg_time < 2e-3 and fit.n_steps == 5


def test_torch_split_backward_trace_shows_the_first_stage_runs_its_backward_in_w():
    # ZBV, p=2: four chunks of 2, 2, 3, 3 ms forward. PyTorch's first stage has no input gradient:
    # its I does nothing and its W runs the whole backward.
    prof = fit_trace([TRACES / "zbv_p2_m4"]).profile
    assert prof.t_f == pytest.approx((0.002, 0.002, 0.003, 0.003), rel=0.3)
    assert prof.t_i[0] < 0.3e-3
    assert prof.t_w[0] == pytest.approx(prof.t_i[1] + prof.t_w[1], rel=0.25)


def test_merged_trace_equals_per_rank_files(tmp_path):
    files = sorted((TRACES / "1f1b_p2_m4").glob("*.json"))
    docs = [json.loads(f.read_text()) for f in files]
    merged = {"traceEvents": [e for d in docs for e in d["traceEvents"]], "ppsweep": docs[0]["ppsweep"]}
    (tmp_path / "merged.json").write_text(json.dumps(merged))
    merged_fit, per_rank = fit_trace([tmp_path / "merged.json"], source="x"), fit_trace(files, source="x")
    assert merged_fit.profile == per_rank.profile and merged_fit.n_gaps == per_rank.n_gaps


def test_command_writes_a_profile(tmp_path, capsys):
    out = tmp_path / "costs.yaml"
    assert main([str(TRACES / "1f1b_p2_m4"), "--out", str(out)]) == 0
    assert load_cost_profile(out).t_f == fit_trace([TRACES / "1f1b_p2_m4"]).profile.t_f
    assert "per hop" in capsys.readouterr().out


def test_bad_traces_get_one_line(tmp_path, capsys):
    (tmp_path / "empty.json").write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 0, "dur": 1}]}))
    assert main([str(tmp_path / "empty.json")]) == 2
    assert main([str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: trace:") for line in err)
    with pytest.raises(TraceError, match="traceEvents"):
        (tmp_path / "x.json").write_text(json.dumps({"events": []}))
        fit_trace([tmp_path / "x.json"])


def test_step_spans_give_the_step_overhead(tmp_path):
    # ppsweep:step spans (our harness wraps each schedule.step in one) 1 ms before the first
    # operation and 2 ms after the last: t_opt = 3 ms.
    _ppsweep_trace(tmp_path / "t.json", "1f1b", {})
    data = json.loads((tmp_path / "t.json").read_text())
    ops = [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("cat") in "FBIW"]
    first, last = min(e["ts"] for e in ops), max(e["ts"] + e["dur"] for e in ops)
    data["traceEvents"] += [{"ph": "X", "name": "ppsweep:step", "pid": w, "tid": 0, "ts": first - 1e3 + 10 * w,
                             "dur": last - first + 3e3 - 10 * w} for w in range(4)]
    (tmp_path / "t.json").write_text(json.dumps(data))
    assert fit_trace([tmp_path / "t.json"]).profile.t_opt == pytest.approx(3e-3, abs=1e-9)


def test_runtime_own_time_is_the_span_outside_its_nested_events(tmp_path):
    # Two nested events (overlapping each other) cover 10..60 % and 50..80 % of every forward span:
    # the span's own time is 30 % of it; backward spans have nothing nested (no figure for B).
    t_f, *_ = _ppsweep_trace(tmp_path / "t.json", "1f1b", {})
    data = json.loads((tmp_path / "t.json").read_text())
    nested = []
    for e in data["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "F":
            for a, b in ((0.1, 0.6), (0.5, 0.8)):
                nested.append({"ph": "X", "name": "aten::mm", "pid": e["pid"], "tid": e["tid"],
                               "ts": e["ts"] + a * e["dur"], "dur": (b - a) * e["dur"]})
    data["traceEvents"] += nested
    (tmp_path / "t.json").write_text(json.dumps(data))
    fit = fit_trace([tmp_path / "t.json"])
    assert set(fit.fixed) == {"F"}
    assert fit.fixed["F"] == pytest.approx(0.3 * statistics.median(t_f), rel=1e-6)
    assert fit.per_operation() == {"F": fit.fixed["F"], "B": 0.0, "I": 0.0, "W": 0.0}


def test_trace_command_output_calibrates_to_the_cost_model(tmp_path):
    # python -m ppsweep.trace (model megatron_128l, system baseline) -> calibrate -> the model's costs.
    from ppsweep.cost_model import ModelConfig, SystemConfig, stage_costs
    from ppsweep.viz import trace

    path = tmp_path / "zb.json"
    assert trace.main(["zb_h1", "p=4", "m=8", "bandwidth=1e10", "latency=1e-6", "--trace", str(path)]) == 0
    prof = fit_trace([path]).profile
    model = ModelConfig.from_mapping(trace._yaml_file("model", "megatron_128l"))
    system = SystemConfig.from_mapping(trace._yaml_file("system", "baseline"))
    costs = stage_costs(model, system, ppsweep.build_schedule("zb_h1", 4, 8))
    for field in ("t_f", "t_b", "t_i", "t_w"):
        assert getattr(prof, field) == pytest.approx(list(getattr(costs, field)[0]), rel=1e-9), field
    assert prof.msg_time == pytest.approx(1e-6 + costs.msg_bytes / 1e10, rel=1e-9)
