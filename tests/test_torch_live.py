"""A real PyTorch pipeline on this machine (p = 2, gloo, spawned ranks) held against ppsweep's prediction.

One process group runs PyTorch's 1F1B under the profiler (the calibration trace), then GPipe
unprofiled, and a ppsweep table (ZB-H1) exported as a PyTorch CSV (the ``_PipelineScheduleRuntime``
path). Stages sleep set times (``ppsweep.measure.torch_runtime``), so the check holds on a busy
machine. Skipped only when torch is not installed (``pip install -e '.[validate]'``).
"""

from __future__ import annotations

import pytest

import ppsweep
from ppsweep.measure.calibrate import fit_trace
from ppsweep.measure.predict import predict_step, schedule_table
from ppsweep.measure.torch_runtime import (
    RunConfig,
    Workload,
    chunk_workload,
    measure_csv_schedule,
    run_pipeline,
    stage_ranks,
)
from ppsweep.tables.interchange import read_csv, write_csv

WORK = Workload("sleep", t_f=(0.004, 0.006), t_i=(0.004, 0.006), t_w=(0.004, 0.006), hidden=64, rows=8)


def test_bad_input_is_refused_before_any_process_starts():
    with pytest.raises(ValueError, match="t_f: needs 2"):
        run_pipeline(2, Workload("sleep", t_f=(0.001,), t_i=(0.001,), t_w=(0.001,)), [RunConfig("1f1b", 4)])
    with pytest.raises(ValueError, match="schedule: 'zb_h2' is not one of"):
        run_pipeline(2, WORK, [RunConfig("zb_h2", 4)])
    with pytest.raises(ValueError, match="p: must be >= 2"):
        run_pipeline(1, WORK, [RunConfig("1f1b", 4)])


def test_csv_schedule_on_other_ranks_is_refused(tmp_path):
    write_csv(ppsweep.build_schedule("1f1b", 2, 4), tmp_path / "s.csv")
    with pytest.raises(ValueError, match=r"p: the file's stages sit on ranks \[0, 1\], not 0..3"):
        measure_csv_schedule(tmp_path / "s.csv", 4, 4, WORK)


def test_placement_and_chunks():
    assert stage_ranks(2, 2, "loop") == {0: 0, 1: 1, 2: 0, 3: 1}
    assert stage_ranks(2, 2, "v") == {0: 0, 1: 1, 2: 1, 3: 0}
    assert chunk_workload(WORK, 2).t_f == (0.002, 0.002, 0.003, 0.003)


def _errors(tmp_path, csv_path) -> dict[str, float]:
    """One run: calibrate on the profiled 1F1B, predict GPipe and the CSV schedule; relative errors."""
    configs = [RunConfig("1f1b", 4, steps=3, warmup=1, trace_dir=str(tmp_path / "trace")),
               RunConfig("gpipe", 4, steps=6, warmup=1),
               RunConfig("zb_h1 (csv)", 4, steps=6, warmup=1, csv_path=str(csv_path))]
    _, gpipe, from_csv = run_pipeline(2, WORK, configs, timeout=240)
    fit = fit_trace([tmp_path / "trace"])
    assert fit.profile.n_stages == 2 and fit.n_steps == 3
    errors = {}
    for measured, table in ((gpipe, schedule_table("gpipe", 2, 4)), (from_csv, read_csv(csv_path))):
        assert measured.refused is None and len(measured.times) == 6
        predicted = predict_step(fit.profile, table, "overlap", op_overhead=fit.overhead)
        # The fastest step: other work on a shared machine only ever delays a step (on a quiet one the
        # fastest and the median differ by a few per cent; scripts/validate_torch.py reports medians).
        errors[measured.schedule] = predicted / min(measured.times) - 1
    return errors


def test_live_p2_pipeline_is_predicted_within_the_target(tmp_path):
    pytest.importorskip("torch", reason="torch not installed: pip install -e '.[validate]'")
    csv_path = tmp_path / "zb_h1_p2_m4.csv"
    write_csv(ppsweep.build_schedule("zb_h1", 2, 4), csv_path)
    errors = _errors(tmp_path, csv_path)
    if max(map(abs, errors.values())) > 0.15:  # a burst of load on a shared machine: measure once more
        errors = _errors(tmp_path / "again", csv_path)
    assert max(map(abs, errors.values())) <= 0.15, errors
