"""The paper's sweeps, loaded through the sweep config path, and single-assumption runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ppsweep.paper.systems import LABELS, SYSTEMS

ROOT = Path(__file__).resolve().parent.parent.parent


def load_plan(sweep: str, overrides: Sequence[str] = ()) -> Any:
    """The validated run of ``python -m ppsweep +sweep=<sweep> <overrides>``, through ppsweep's
    config path (:func:`ppsweep.sweep.config.load_plan`). This is the reproduction's one entry into it.

    Args:
      sweep: name of ``conf/sweep/<sweep>.yaml``.
      overrides: Hydra overrides, e.g. ``["p=[4]"]``.

    Returns:
      The :class:`~ppsweep.sweep.config.Plan`: ``spec`` (the SweepSpec), ``path`` (the store; a relative
      ``results_dir`` is taken from the repository root), ``config_yaml``, ``compilation_cache``.
    """
    from ppsweep.sweep.config import load_plan as config_load_plan

    return config_load_plan([f"+sweep={sweep}", *overrides], base_dir=ROOT)


def run_or_load(sweep: str, overrides: Sequence[str], fresh: bool, log: Callable[[str], None]) -> tuple[Any, Any]:
    """Run ``sweep`` into ``<results_dir>/<name>.zarr`` unless complete; return (dataset, spec).

    Args:
      sweep: name of ``conf/sweep/<sweep>.yaml``.
      overrides: Hydra overrides.
      fresh: recompute the store from scratch.
      log: one-line progress messages.
    """
    import xarray as xr

    from ppsweep.sweep.runner import configure_jax, run_sweep

    plan = load_plan(sweep, overrides)
    configure_jax(plan.compilation_cache)
    report = run_sweep(plan.spec, plan.path, plan.config_yaml, overwrite=fresh, progress=False)
    if report.units_run:
        log(f"sweep {sweep}: {report.points_run:,} points in {report.seconds:.1f} s -> {plan.path}")
    else:
        log(f"sweep {sweep}: {plan.path} already complete, reused")
    return xr.open_zarr(plan.path).load(), plan.spec


def diagonal(ds) -> Any:
    """The nine systems out of a store: a ``system`` dimension instead of compute × bw × latency."""
    import xarray as xr

    parts = [
        ds.sel(compute=s.peak_flops, bandwidth=s.bandwidth, latency=s.latency).drop_vars(["compute", "bandwidth", "latency"])
        for s in SYSTEMS
    ]
    return xr.concat(parts, dim=pd.Index(LABELS, name="system"))


@dataclasses.dataclass(frozen=True)
class Variant:
    """One modelling assumption changed against the sweep's.

    Attributes:
      label: name in the tables.
      grad: synchronise replicated stages' gradients (False: ``grad_bytes = 0``).
      equal_fb: backward as long as forward, ``t_f = t_b = 1.5 t_f`` (same compute per microbatch).
      global_batch: override of ``model.global_batch`` (None: the model's).
      free_comm: latency 0 and infinite bandwidth.
    """

    label: str
    grad: bool = True
    equal_fb: bool = False
    global_batch: int | None = None
    free_comm: bool = False


BASE = Variant("as swept")
NO_GRAD = Variant("no grad sync", grad=False)
EQUAL_FB = Variant("t_b = t_f", equal_fb=True)
FREE = Variant("free comm", free_comm=True)


def simulate_variants(spec, name: str, p: int, m: int, mode: str, variants: Sequence[Variant], **options) -> dict[str, np.ndarray]:
    """Step time and idle fraction of one schedule on the nine systems under several assumptions.

    All variants run in one engine call (one table, points = variants × systems).

    Args:
      spec: the sweep (model, system, slots, engine settings).
      name: schedule name; ``options`` its options.
      p, m: workers and microbatches.
      mode: comm mode.
      variants: the assumptions.

    Returns:
      ``{"t_sim": (V, 9), "idle_sim": (V, 9)}``; NaN where the schedule cannot run at (p, m).
    """
    from ppsweep.tables.build import UnsupportedPointError, build_schedule
    from ppsweep.cost_model import stage_costs
    from ppsweep.engine.core import simulate

    shape = (len(variants), len(SYSTEMS))
    try:
        table = build_schedule(name, p, m, spec.f_slots, spec.b_slots, **options)
    except UnsupportedPointError:
        return {"t_sim": np.full(shape, np.nan), "idle_sim": np.full(shape, np.nan)}
    peaks = np.array([s.peak_flops for s in SYSTEMS])
    t_f, t_b, grad, msg, alpha, beta = [], [], [], [], [], []
    for v in variants:
        model = spec.model if v.global_batch is None else dataclasses.replace(spec.model, global_batch=v.global_batch)
        costs = stage_costs(model, spec.system, table, peak_flops=peaks)  # (9, S)
        f, b = (1.5 * costs.t_f, 1.5 * costs.t_f) if v.equal_fb else (costs.t_f, costs.t_b)
        t_f.append(f)
        t_b.append(b)
        grad.append(np.broadcast_to(costs.grad_bytes * (1.0 if v.grad else 0.0), f.shape))
        msg.append(np.full(len(SYSTEMS), costs.msg_bytes))
        alpha.append(np.zeros(len(SYSTEMS)) if v.free_comm else np.array([s.latency for s in SYSTEMS]))
        beta.append(np.full(len(SYSTEMS), np.inf) if v.free_comm else np.array([s.bandwidth for s in SYSTEMS]))
    t_f, t_b = np.stack(t_f), np.stack(t_b)
    result = simulate(
        table, t_f, t_b, np.stack(alpha), np.stack(beta), np.stack(msg), mode,
        t_i=t_b / 2, t_w=t_b / 2, grad_bytes=np.stack(grad), t_opt=spec.system.optimizer_time,
        dtype=spec.dtype, chunk=spec.chunk,
    )
    return {"t_sim": result.t_sim, "idle_sim": result.idle_fraction(table.p)}


def ablation_frame(spec, name: str, ps, ms, modes, variants: Sequence[Variant], **options) -> pd.DataFrame:
    """Long table of :func:`simulate_variants`: schedule, p, m, mode, variant, system, t_sim, idle_sim."""
    rows = []
    for p in ps:
        for m in ms:
            for mode in modes:
                out = simulate_variants(spec, name, p, m, mode, variants, **options)
                for i, v in enumerate(variants):
                    for j, system in enumerate(LABELS):
                        rows.append(
                            dict(schedule=name, p=p, m=m, mode=mode, variant=v.label, system=system,
                                 t_sim=out["t_sim"][i, j], idle_sim=out["idle_sim"][i, j])
                        )
    return pd.DataFrame(rows)
