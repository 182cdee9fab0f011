"""Every registered schedule in every view: the printed grid, both Gantt charts and the Chrome trace.

Each view labels every operation of the table once (F&B pairs with both halves, the stage where a
worker holds several), so a view that cannot draw an operation kind fails here.
"""

from __future__ import annotations

import pytest

from ppsweep import SCHEDULES, build_schedule, format_table
from ppsweep.cost_model import ModelConfig, SystemConfig
from ppsweep.tables.ops import Kind, op_label
from ppsweep.viz import trace
from ppsweep.viz.plots import plot_step_gantt, plot_table_gantt

MODEL = ModelConfig.from_mapping({"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16})
SYSTEM = SystemConfig.from_mapping({"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7})


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_every_view_draws_every_operation(name, tmp_path):
    table = build_schedule(name, 4, 8)
    ops = [item.op for item in table.placed_ops()]
    show_stage = table.n_stages * table.n_replicas > table.p
    grid = format_table(table)
    for op in ops:
        assert op_label(op, show_stage) in grid
    assert plot_table_gantt(table, tmp_path / "table.png").stat().st_size > 0
    result = trace.simulate_step(table, MODEL, SYSTEM, bandwidth=1e10, latency=1e-6, mode="overlap")
    assert plot_step_gantt(result.record, tmp_path / "step.png").stat().st_size > 0
    events = trace.chrome_trace(result.record)["traceEvents"]
    names = {e["name"] for e in events if e.get("cat") != "message"}
    assert {trace.op_name(op) for op in ops} <= names


def test_pair_label_names_both_halves():
    table = build_schedule("dualpipev", 4, 8)
    pair = next(item.op for item in table.placed_ops() if item.op.kind == Kind.FB)
    assert op_label(pair) == f"F{pair.micro}&B{pair.micro2}"
    assert trace.op_name(pair) == f"F{pair.micro}s{pair.stage}&B{pair.micro2}s{pair.stage2}"
