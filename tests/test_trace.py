"""The reference simulator's event record, Chrome traces and the ``python -m ppsweep.trace`` command."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from ppsweep import build_schedule

from ppsweep.viz import trace
from ppsweep.cost_model import ModelConfig, SystemConfig, stage_costs
from ppsweep.engine.core import simulate
from ppsweep.tables.ops import Kind, dependencies
from ppsweep.engine.reference import reference_simulate

MODEL = ModelConfig.from_mapping({"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16})
SYSTEM = SystemConfig.from_mapping({"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7, "optimizer_time": 1e-3})
CASES = [("gpipe", 4, 8, {}), ("1f1b", 4, 8, {}), ("chimera", 4, 8, {}), ("hanayo", 4, 8, {"waves": 2})]


@pytest.mark.parametrize("mode", ["overlap", "blocking", "contention"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_record_final_time_is_the_engines(case, mode):
    name, p, m, options = case
    table = build_schedule(name, p, m, **options)
    result = trace.simulate_step(table, MODEL, SYSTEM, bandwidth=2e9, latency=2e-6, mode=mode)
    costs = stage_costs(MODEL, SYSTEM, table)
    engine = simulate(
        table, costs.t_f[0], costs.t_b[0], 2e-6, 2e9, costs.msg_bytes, mode,
        t_i=costs.t_i[0], t_w=costs.t_w[0], grad_bytes=costs.grad_bytes, t_opt=SYSTEM.optimizer_time,
    )
    record = result.record
    assert record.t_sim == result.t_sim
    assert record.t_sim == pytest.approx(float(engine.t_sim), rel=1e-12)
    ends = [ev.end for ev in record.ops] + [ev.end for ev in record.updates] + [ev.end for ev in record.syncs]
    assert max(ends) == pytest.approx(record.t_sim, rel=1e-12)
    # Every operation once, with its compute time; starts after each input has arrived.
    assert sorted(ev.op for ev in record.ops) == sorted(item.op for item in table.placed_ops())
    duration = {Kind.F: costs.t_f[0], Kind.B: costs.t_b[0], Kind.I: costs.t_i[0], Kind.W: costs.t_w[0]}
    start = {ev.op: ev for ev in record.ops}
    for ev in record.ops:
        assert ev.end - ev.start == pytest.approx(duration[ev.op.kind][ev.op.stage], rel=1e-12)
    arrival = {(msg.producer, msg.consumer): msg for msg in record.messages}
    for ev in record.ops:
        for dep in dependencies(ev.op, table.n_stages, table.split_backward):
            msg = arrival.get((dep, ev.op))
            ready = start[dep].end if msg is None else msg.arrive
            assert ev.start >= ready - 1e-12 * record.t_sim
    for msg in record.messages:
        assert msg.src != msg.dst and msg.ready <= msg.send <= msg.arrive
        assert msg.ready == start[msg.producer].end
        assert msg.arrive - msg.send == pytest.approx(2e-6 + costs.msg_bytes / 2e9, rel=1e-9)
    if name == "chimera":
        assert len(record.syncs) == table.n_stages and all(len(s.holders) == 2 for s in record.syncs)
    assert len(record.updates) == p


def test_recording_changes_nothing():
    table = build_schedule("chimera", 4, 8)
    args = (table, 1e-3, 2e-3, 1e-6, 1e9, 1e7, "contention")
    plain = reference_simulate(*args, grad_bytes=1e8)
    recorded = reference_simulate(*args, grad_bytes=1e8, record=True)
    assert plain.record is None and recorded.record is not None
    assert plain.t_sim == recorded.t_sim and plain.comm_time == recorded.comm_time
    np.testing.assert_array_equal(plain.worker_finish, recorded.worker_finish)


def test_chrome_trace_layout(tmp_path):
    table = build_schedule("1f1b", 4, 8)
    record = trace.simulate_step(table, MODEL, SYSTEM, bandwidth=1e9).record
    path = trace.write_chrome_trace(record, tmp_path / "t.json", {"schedule": "1f1b"})
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    names = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert sorted(e["pid"] for e in names) == list(range(4))
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    complete = [e for e in events if e["ph"] == "X"]
    for e in complete:
        assert {"name", "pid", "tid", "ts", "dur"} <= set(e) and e["dur"] >= 0
    compute = [e for e in complete if threads[(e["pid"], e["tid"])] == "compute"]
    messages = [e for e in complete if e["cat"] == "message"]
    assert len(compute) == len(record.ops) + len(record.updates)
    assert len(messages) == len(record.messages) > 0
    assert all(threads[(e["pid"], e["tid"])].startswith("send") for e in messages)
    # No two slices overlap on one thread.
    by_thread = {}
    for e in complete:
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))
    # One flow per message: an "s" inside the message slice, an "f" bound inside the consumer.
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    assert set(starts) == set(finishes) and len(starts) == len(record.messages)

    def enclosing(e):
        return [x for x in complete if (x["pid"], x["tid"]) == (e["pid"], e["tid"]) and x["ts"] <= e["ts"] <= x["ts"] + x["dur"]]

    for k, msg in enumerate(record.messages):
        s, f = starts[k], finishes[k]
        assert f["bp"] == "e" and s["pid"] == msg.src and f["pid"] == msg.dst
        assert [x["cat"] for x in enclosing(s)] == ["message"]
        assert [x["name"] for x in enclosing(f)] == [trace.op_name(msg.consumer)]
    assert doc["otherData"]["schedule"] == "1f1b" and doc["otherData"]["t_sim_s"] == record.t_sim


def test_assign_lanes():
    assert trace.assign_lanes([(0, 2), (1, 3), (2, 4), (3.5, 5)]) == [0, 1, 0, 1]


def test_trace_command(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["1f1b", "p=4", "m=8", "bandwidth=1e10", "latency=1e-6", "mode=blocking",
            "--gantt", str(out / "g.png"), "--table-gantt", str(out / "t.png"), "--trace", str(out / "t.json")]
    assert trace.main(argv) == 0
    text = capsys.readouterr().out
    assert "t_sim" in text and "blocking" in text
    for name in ("g.png", "t.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG" and (out / name).stat().st_size > 5_000
    assert json.loads((out / "t.json").read_text())["otherData"]["mode"] == "blocking"
    for bad in (["1f1b", "p=4", "--trace", "x.json"], ["nope", "p=4", "m=8", "--trace", "x.json"], ["1f1b", "p=4", "m=8"],
                ["1f1b", "p=4", "m=8", "system=nope", "--trace", "x.json"], ["1f1b", "p=4", "m=8", "bandwidth=fast", "--trace", "x.json"]):
        assert trace.main(bad) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ")


def test_trace_command_takes_a_point_of_a_store(tmp_path, capsys):
    from ppsweep.sweep.runner import run_sweep
    from ppsweep.sweep.evaluate import SweepSpec

    cfg = {
        "name": "s", "schedules": ["gpipe"], "p": [2], "m": [2], "bandwidth": [1e9], "latency": [1e-6],
        "model": {"layers": 8, "hidden": 512, "heads": 8, "sequence": 512, "vocab": 100, "global_batch": 4},
        "system": {"peak_flops": 1e14, "memory_bandwidth": 1e12, "bandwidth": 1e9, "latency": 1e-6},
    }
    import yaml

    run_sweep(SweepSpec.from_config(cfg), tmp_path / "s.zarr", yaml.safe_dump(cfg), progress=False)
    import xarray as xr

    t_sim = float(xr.open_zarr(tmp_path / "s.zarr").t_sim.squeeze())
    assert trace.main(["gpipe", "p=2", "m=2", "--store", str(tmp_path / "s.zarr"), "--trace", str(tmp_path / "t.json")]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "t.json").read_text())["otherData"]["t_sim_s"] == pytest.approx(t_sim, rel=1e-12)


@pytest.mark.parametrize(
    "arg, message",
    [("bandwidth=-1", "error: bandwidth: must be a finite number > 0"), ("latency=-1e-6", "error: latency: must be a finite number >= 0"), ("compute=0", "error: compute: must be a finite number > 0")],
)
def test_bad_point_values_are_named_as_the_user_wrote_them(arg, message, capsys, tmp_path):
    assert trace.main(["gpipe", "p=2", "m=2", arg, "--trace", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message)
    assert not (tmp_path / "t.json").exists()


def test_every_registered_point_dimension_is_a_key(tmp_path, capsys):
    """The keys come from the dimension registry: fb_overlap moves DualPipe's step as the system's value does,
    and a value outside a dimension's range is refused in one line naming it."""
    from ppsweep.sweep.dimensions import POINT_DIMENSION_NAMES

    assert "fb_overlap" in POINT_DIMENSION_NAMES
    steps = {}
    for value in ("0", "1"):
        out = tmp_path / f"t{value}.json"
        assert trace.main(["dualpipe", "p=4", "m=8", f"fb_overlap={value}", "--trace", str(out)]) == 0
        steps[value] = json.loads(out.read_text())["otherData"]["t_sim_s"]
    capsys.readouterr()
    system = dataclasses.replace(SystemConfig.from_mapping(trace._yaml_file("system", "baseline")), fb_overlap=1.0)
    model = ModelConfig.from_mapping(trace._yaml_file("model", "megatron_128l"))
    expected = trace.simulate_step(build_schedule("dualpipe", 4, 8), model, system).t_sim
    assert steps["1"] == expected and steps["1"] < steps["0"]
    assert trace.main(["dualpipe", "p=4", "m=8", "fb_overlap=1.5", "--trace", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: fb_overlap:") and "0 … 1 share" in err[0]
