"""The comparison with published measurements runs, and its errors are the script's (scripts/published_layouts.py)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import pytest

from ppsweep.layout import Layout, LayoutOptions, unpipelined_step
from ppsweep.published import a100, read_table

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def printed():
    spec = importlib.util.spec_from_file_location("published_layouts", ROOT / "scripts" / "published_layouts.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rows = script.main()
    return rows, out.getvalue()


def test_every_row_is_printed_with_the_error_of_its_numbers(printed):
    rows, text = printed
    assert len(rows["narayanan"]) == len(read_table("narayanan2021_table1")) == 10
    assert len(rows["korthikanti"]) == 2
    assert len(rows["vtrain"]) == len(read_table("vtrain_ground_truth_multi")) == 109
    printed_rows = [line for line in text.splitlines() if re.fullmatch(r"\| .* \| [-+\d.]+ \| [-+\d.]+ \| [-+\d.]+% \|", line)]
    ordered = rows["narayanan"] + rows["korthikanti"] + rows["vtrain"]  # the order the script prints them
    assert len(printed_rows) == len(ordered)
    for row, line in zip(ordered, printed_rows):
        assert line.startswith(f"| {row.label} | {row.setting} |")
        measured, predicted, error = re.findall(r"\| ([-+\d.]+%?) ", line + " ")[-3:]
        assert float(measured) == pytest.approx(row.measured, abs=0.05)
        assert float(predicted) == pytest.approx(row.predicted, abs=0.05)
        assert error == f"{row.predicted / row.measured - 1:+.1%}"


def test_a_row_recomputed_from_the_model_alone(printed):
    # 1.7B on 32 GPUs (t=1, p=1, d=32, B=512): no pipeline, 16 microbatches of one sequence
    rows, _ = printed
    from ppsweep.cost_model import ModelConfig

    model = ModelConfig(layers=24, hidden=2304, heads=24, sequence=2048, vocab=51200, global_batch=512,
                        recompute="full", head_compute=True)
    t = float(unpipelined_step(model, a100(), Layout(p=1, dp=32), LayoutOptions(scatter_gather=True), 16))
    flops = 96 * 512 * 2048 * 24 * 2304**2 * (1 + 2048 / (6 * 2304) + 51200 / (16 * 24 * 2304))
    assert rows["narayanan"][0].predicted == pytest.approx(flops / (t * 32) / 1e12, rel=1e-12)


def test_median_errors_stay_within_their_bounds(printed):
    # Bounds on what the model delivers today (README, "Against published measurements"): Table 1
    # is over-predicted by about a quarter, Korthikanti's two MFU figures within a few percent.
    rows, _ = printed
    import numpy as np

    assert np.median([abs(r.error) for r in rows["narayanan"]]) < 0.30
    assert max(abs(r.error) for r in rows["korthikanti"]) < 0.05
    assert all(0 < gain < 0.15 for _, gain in rows["interleaved"])
    assert np.mean([abs(r.error) for r in rows["vtrain"]]) < 0.20


def test_vtrain_mape_and_ranking_agreement_are_printed(printed):
    from ppsweep.published import ranking_agreement, summary

    rows, text = printed
    assert f"MAPE {summary(rows['vtrain'])['mape']:.1%}" in text
    groups = ranking_agreement(rows["vtrain"])
    assert sum(g["rows"] for g in groups) == 109
    for g in groups:
        assert f"| {g['model']} | {g['rows']} | {g['mape']:.1%} | {g['tau']:.2f} |" in text
