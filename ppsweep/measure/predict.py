"""ppsweep's prediction of a PyTorch pipeline step from a profiled-costs record.

The table is ppsweep's registered schedule that mirrors the PyTorch class
(:data:`ppsweep.measure.torch_runtime.TORCH_SCHEDULES`; tests/test_torch_goldens.py checks the
orders are PyTorch's), or a PyTorch CSV file read with :func:`ppsweep.tables.interchange.read_csv`.
Costs come from the profile (:func:`ppsweep.cost_profile.engine_costs_from_profile`: a profile of
``p`` stages on a table of ``v·p`` stages is cut into chunks of time/v), and the step is simulated
by ppsweep's reference simulator (:func:`ppsweep.engine.reference.reference_simulate`, which the
tests hold equal to the JAX engine to 1e-12; a few small tables, so no compilation).

Two readings of a message given as one per-hop time ``T`` (a single message size cannot separate
latency from wire time):

- ``latency``: ``α = T``, nothing held -- every mode then gives the same step;
- ``wire``: ``α = 0``, ``β = bytes/T`` -- the message holds the link (``contention``), the sender
  (``blocking``) or both ports (``ports``) for ``T``.

A profile with ``α``, ``β`` and bytes is used as it is. PyTorch rule applied where ``torch_rules``:
its first stage has no input gradient, so in a split backward its I does nothing and its W runs the
whole backward (``PipelineStage.backward_weight_one_chunk``): ``t_i = 0``, ``t_w = t_b`` on stage 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from ppsweep.cost_profile import CostProfile, engine_costs_from_profile
from ppsweep.engine.comm import MODES

#: Message readings of a per-hop time (module docstring).
READINGS = ("latency", "wire")


def schedule_table(schedule: str, p: int, m: int, csv_path: str | Path | None = None):
    """ppsweep's table of a PyTorch schedule (ppsweep name) or of a PyTorch CSV file."""
    import ppsweep
    from ppsweep.measure.torch_runtime import TORCH_SCHEDULES

    if csv_path is not None:
        from ppsweep.tables.interchange import read_csv

        return read_csv(csv_path, name=Path(csv_path).stem)
    if schedule not in TORCH_SCHEDULES:
        raise ValueError(f"schedule: {schedule!r} is not one of {', '.join(TORCH_SCHEDULES)}")
    return ppsweep.build_schedule(schedule, p, m, **TORCH_SCHEDULES[schedule][3])


def predict_step(
    profile: CostProfile,
    table,
    mode: str = "overlap",
    reading: str = "latency",
    torch_rules: bool = True,
    op_overhead: float | Mapping[str, float] = 0.0,
) -> float:
    """Predicted step time (s) of ``table`` with ``profile``'s costs in communication ``mode``.

    Args:
      profile: the profiled costs (e.g. from :func:`ppsweep.measure.calibrate.fit_trace`).
      table: the schedule table (:func:`schedule_table`).
      mode: one of :data:`ppsweep.engine.comm.MODES`.
      reading: ``latency`` or ``wire``, for a profile whose message is one time (module docstring).
      torch_rules: apply PyTorch's first-stage split-backward rule.
      op_overhead: seconds of each profiled F and B that are per-operation, a number or by kind
        ``{"F": .., "B": ..}`` (:meth:`ppsweep.measure.calibrate.Fit.per_operation`: the dispatch
        overhead and the runtime's own time in the span): where the table cuts a profiled stage
        into ``k`` chunks, that part is kept whole per chunk instead of cut, ``(t - o)/k + o`` (a
        split backward's I and W share it in the profile's proportion).

    Raises:
      ValueError: bad mode or reading; StageCountError: the table's stages do not fit the profile's.
    """
    from ppsweep.engine.reference import reference_simulate

    if mode not in MODES:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    if reading not in READINGS:
        raise ValueError(f"reading: {reading!r} is not one of {', '.join(READINGS)}")
    if profile.msg_time is not None and reading == "wire" and profile.msg_time > 0:
        alpha, beta, msg_bytes = 0.0, 1.0 / profile.msg_time, 1.0  # one byte-unit held for T
        profile = replace(profile, msg_time=None, alpha=alpha, beta=beta, msg_bytes=msg_bytes)
    costs = engine_costs_from_profile(profile, table)
    row = lambda a: np.broadcast_to(np.asarray(a, float), (table.n_stages,)).copy()
    t_f, t_b, t_i, t_w = row(costs.t_f), row(costs.t_b), row(costs.t_i), row(costs.t_w)
    fixed = op_overhead if isinstance(op_overhead, Mapping) else {"F": op_overhead, "B": op_overhead}
    if profile.n_stages and table.n_stages > profile.n_stages:
        cut = 1.0 - profile.n_stages / table.n_stages  # (t - o)/k + o = t/k + o(1 - 1/k)
        share = np.divide(t_i, t_b, out=np.full_like(t_b, 0.5), where=t_b > 0)
        t_f, t_b = t_f + fixed.get("F", 0.0) * cut, t_b + fixed.get("B", 0.0) * cut
        t_i, t_w = t_b * share, t_b * (1 - share)
    if torch_rules:
        t_i[0], t_w[0] = 0.0, t_b[0]
    result = reference_simulate(
        table, t_f, t_b, float(costs.alpha), float(costs.beta), float(costs.msg_bytes), mode,
        t_i=t_i, t_w=t_w, fb_overlap=float(costs.fb_overlap), t_opt=float(costs.t_opt),
    )
    return float(result.t_sim)
