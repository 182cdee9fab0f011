"""``python -m ppsweep +sweep=NAME``: run a sweep from Hydra configs into ``results/NAME.zarr``.

The configs live in ``conf/`` at the repository root; it is found next to the package (source
checkout or editable install), or through ``PPSWEEP_CONF_DIR``. Users add their own sweeps with
Hydra's ``--config-dir``.

Sharded sweeps (:mod:`ppsweep.shards`): ``shards=N shard=K`` runs one shard; ``shards=N
hydra/launcher=local|slurm --multirun`` runs them all as separate jobs; ``finalize=true`` checks
the store and marks it complete. Inside a ``--multirun`` job the task returns
``{"status", "message"}`` for the launcher to report instead of exiting the process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf


def logspace(start: float, stop: float, num: int) -> list[float]:
    """``${logspace:1e9,1e12,64}`` in a config: ``num`` log-spaced values from ``start`` to ``stop``."""
    import numpy as np

    if not (float(start) > 0 and float(stop) > 0 and int(num) >= 1):
        raise ValueError(f"logspace: needs start > 0, stop > 0, num >= 1, got {start}, {stop}, {num}")
    return [float(x) for x in np.logspace(np.log10(float(start)), np.log10(float(stop)), int(num))]


if not OmegaConf.has_resolver("logspace"):
    OmegaConf.register_new_resolver("logspace", logspace)


def find_conf_dir() -> Path:
    """The ``conf/`` directory: ``$PPSWEEP_CONF_DIR``, else the one beside the package."""
    env = os.environ.get("PPSWEEP_CONF_DIR")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parent.parent / "conf", Path.cwd() / "conf"]
    for candidate in candidates:
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SystemExit(
        "error: ppsweep's conf/ directory not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); set PPSWEEP_CONF_DIR"
    )


def original_cwd() -> str | None:
    """The directory ppsweep was started in (Hydra's ``hydra.runtime.cwd``), or None outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return str(HydraConfig.get().runtime.cwd)
    return None


def in_multirun_job() -> bool:
    """Whether this process runs one job of a Hydra ``--multirun``."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def run(cfg: DictConfig) -> int:
    """Validate the config, then run the sweep (or this job's shard of it); return the exit status."""
    return run_outcome(cfg)["status"]


def run_outcome(cfg: DictConfig) -> dict:
    """As :func:`run`, returning ``{"status": int, "message": str}`` (the last line printed).

    Every failure ends in one ``error: ...`` line on stderr and a non-zero status: 2 for a bad
    config or a store that is not this sweep's, 1 for a failed write (a full disk: what was
    written stays valid and resumes), 130 when interrupted.
    """
    from ppsweep.shards import display, finalize, plan_from_config
    from ppsweep.store import StoreError

    def fail(status: int, message: str) -> dict:
        print(f"error: {message}", file=sys.stderr, flush=True)
        return {"status": status, "message": f"error: {message}"}

    def say(message: str) -> dict:
        print(message, file=sys.stderr, flush=True)
        return {"status": 0, "message": message}

    try:
        plan = plan_from_config(cfg, original_cwd())
    except ValueError as error:
        return fail(2, str(error))
    where = display(plan.path)
    if plan.finalize:
        try:
            complete, message = finalize(plan)
        except StoreError as error:
            return fail(2, str(error))
        except OSError as error:
            return fail(1, f"finalizing {where} failed: {error.strerror or error}")
        return say(message) if complete else fail(1, message)
    overwrite = plan.overwrite
    if overwrite and plan.shard is not None and plan.shards > 1:
        if in_multirun_job():
            overwrite = False  # the launching process replaced the store once, before any shard started
        else:
            return fail(
                2,
                f"overwrite=true with shard={plan.shard}: replacing {where} would erase the other shards' work; "
                "delete it first, or launch every shard at once with --multirun (the store is replaced once, before they start)",
            )

    from ppsweep.runner import configure_jax, run_sweep

    configure_jax(plan.compilation_cache)
    spec = plan.spec
    part = "" if plan.shard is None else f"shard {plan.shard} of {plan.shards} ({len(plan.units)} units) of "
    print(f"sweep {spec.name}: {part}{spec.n_points:,} points in {len(spec.units())} units -> {where}", file=sys.stderr, flush=True)
    try:
        report = run_sweep(spec, plan.path, plan.config_yaml, overwrite=overwrite, progress=plan.progress, units=list(plan.units))
    except StoreError as error:
        return fail(2, str(error))
    except OSError as error:
        return fail(
            1,
            f"writing {where} failed: {error.strerror or error}; the units written before stay valid "
            "(re-run the same command to resume)",
        )
    except KeyboardInterrupt:
        return fail(130, f"interrupted; the units written to {where} stay valid (re-run the same command to resume)")
    if report.units_run == 0 and report.complete:
        line = f"{where} is already complete; nothing to do (overwrite=true recomputes it)"
    elif report.units_run == 0:
        line = f"shard {plan.shard} of {plan.shards} is already done in {where}"
    else:
        line = (
            f"wrote {report.points_run:,} points in {report.seconds:.1f} s "
            f"({report.points_per_second:,.0f} points/s end to end) to {where}"
        )
    if not report.complete:
        from ppsweep.shards import describe_missing
        from ppsweep.store import check_store, done_units

        line += f"; the store still has {describe_missing(done_units(check_store(plan.path, spec)), plan.shards)}"
    elif plan.shard is not None and report.units_run:
        line += "; the store is complete"
    return say(line)


@hydra.main(config_path=str(find_conf_dir()), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> dict | None:
    if in_multirun_job():
        return run_outcome(cfg)  # the launcher reports failures; a job never exits the process
    status = run(cfg)
    if status:
        sys.exit(status)
    return None


def main() -> None:
    """Console entry point."""
    _hydra_main()
