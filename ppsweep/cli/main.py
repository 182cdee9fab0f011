"""``python -m ppsweep +sweep=NAME``: run a sweep from Hydra configs into ``results/NAME.zarr``.

The configs live in ``conf/`` at the repository root; it is found next to the package (source
checkout or editable install), or through ``PPSWEEP_CONF_DIR``. Users add their own sweeps with
Hydra's ``--config-dir``. The config is validated by :mod:`ppsweep.sweep.config` before JAX is imported.

Sharded sweeps (:mod:`ppsweep.sweep.shards`): ``shards=N shard=K`` runs one shard; ``shards=N
hydra/launcher=local|slurm --multirun`` runs them all as separate jobs; ``finalize=true`` checks
the store and marks it complete. Inside a ``--multirun`` job the task returns
``{"status", "message"}`` for the launcher to report instead of exiting the process.

Before Hydra starts, :func:`main` answers plain ``python -m ppsweep`` (no sweep, no ``name=``)
with the usage and the available sweeps, and an unknown ``+sweep=`` name with one line (exit 2).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn


def find_conf_dir():  # noqa: ANN201 - see ppsweep.sweep.config.find_conf_dir
    """The ``conf/`` directory (:func:`ppsweep.sweep.config.find_conf_dir`)."""
    from ppsweep.sweep.config import find_conf_dir as find

    return find()


#: Hydra's own flags that print something instead of running (no sweep needed).
_INFO_FLAGS = ("--help", "-h", "--hydra-help", "--version", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc")


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


def run(cfg: Any) -> int:
    """Validate the config, then run the sweep (or this job's shard of it); return the exit status."""
    return run_outcome(cfg)["status"]


def run_outcome(cfg: Any) -> dict:
    """As :func:`run`, returning ``{"status": int, "message": str}`` (the last line printed).

    Every failure ends in one ``error: ...`` line on stderr and a non-zero status: 2 for a bad
    config or a store that is not this sweep's, 1 for a failed write (a full disk: what was
    written stays valid and resumes), 130 when interrupted.
    """
    from ppsweep.sweep.config import plan_from_config

    try:
        plan = plan_from_config(cfg, original_cwd())
    except ValueError as error:
        return _fail(2, str(error))
    try:
        if plan.finalize:
            return _finalize(plan)
        overwrite = _overwrite(plan)
        _check_target(plan, overwrite)
        figures = _estimate(plan)
        if plan.dry_run:
            return _say(f"{figures.line()}; dry run: nothing computed, {_where(plan)} untouched")
        _check_limits(plan, figures)
        report = _run_sweep(plan, overwrite, figures)
    except _Failed as failure:
        return failure.outcome
    return _say(_outcome_line(plan, report))


class _Failed(Exception):
    """A step of :func:`run_outcome` failed. Made where it fails, it prints ``error: message`` at
    once (before any clean-up the step still runs); ``outcome`` is the run's result."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.outcome = _fail(status, message)


def _fail(status: int, message: str) -> dict:
    """Print ``error: message`` on stderr; the outcome with ``status``."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    return {"status": status, "message": f"error: {message}"}


def _say(message: str) -> dict:
    """Print ``message`` on stderr; the outcome with status 0."""
    print(message, file=sys.stderr, flush=True)
    return {"status": 0, "message": message}


def _where(plan: Any) -> str:
    """The plan's store as the messages name it."""
    from ppsweep.cli.support import display

    return display(plan.path)


def _finalize(plan: Any) -> dict:
    """``finalize=true``: check the store and mark it complete (:func:`ppsweep.sweep.shards.finalize`)."""
    from ppsweep.store.errors import StoreError
    from ppsweep.sweep.shards import finalize

    try:
        complete, message = finalize(plan)
    except StoreError as error:
        raise _Failed(2, str(error)) from None
    except OSError as error:
        raise _Failed(1, f"finalizing {_where(plan)} failed: {error.strerror or error}") from None
    return _say(message) if complete else _fail(1, message)


def _overwrite(plan: Any) -> bool:
    """Whether this run replaces the store: ``overwrite=true``, except in one shard of a
    ``--multirun`` (the launching process replaced it once); refused for one shard run alone."""
    if not (plan.overwrite and plan.shard is not None and plan.shards > 1):
        return plan.overwrite
    if in_multirun_job():
        return False  # the launching process replaced the store once, before any shard started
    raise _Failed(
        2,
        f"overwrite=true with shard={plan.shard}: replacing {_where(plan)} would erase the other shards' work; "
        "delete it first, or launch every shard at once with --multirun (the store is replaced once, before they start)",
    )


def _check_target(plan: Any, overwrite: bool) -> None:
    """Refuse a store path that holds something other than a ppsweep store."""
    from ppsweep.store.layout import is_ppsweep_store

    if (plan.path.exists() or plan.path.is_symlink()) and not is_ppsweep_store(plan.path):
        raise _Failed(
            2,
            f"{_where(plan)}: exists and is not a ppsweep store (no ppsweep metadata); "
            + ("overwrite=true replaces only a ppsweep store: " if overwrite else "")
            + "choose another name=... or results_dir=...",
        )


def _estimate(plan: Any) -> Any:
    """The run's estimated figures (:func:`ppsweep.sweep.estimate.estimate`)."""
    from ppsweep.sweep.estimate import estimate

    try:
        return estimate(plan.spec, plan.units)
    except ValueError as error:  # a user schedule that fails on its tiny table
        raise _Failed(2, str(error)) from None


def _check_limits(plan: Any, figures: Any) -> None:
    """Refuse a run past the plan's limits (:func:`ppsweep.sweep.estimate.check_limits`)."""
    from ppsweep.sweep.estimate import check_limits

    try:
        check_limits(figures, plan.limits, plan.path)
    except ValueError as error:
        raise _Failed(2, str(error)) from None


def _run_sweep(plan: Any, overwrite: bool, figures: Any) -> Any:
    """Run the sweep (or this shard of it); its :class:`~ppsweep.sweep.runner.SweepReport`.

    A run that computes every unit it asks for (a new store) starts its worker processes first:
    their imports then overlap this process's and the store's creation.
    """
    from ppsweep.store.errors import StoreError
    from ppsweep.sweep.cluster import ClusterError
    from ppsweep.sweep.parallel import start_evaluators

    spec, units, where = plan.spec, plan.units, _where(plan)
    fresh = (overwrite or not plan.path.exists()) and plan.cluster is None
    evaluators = start_evaluators(spec, list(units), plan.workers, plan.compilation_cache) if fresh else None
    try:
        from ppsweep.sweep.runner import configure_jax, run_sweep

        configure_jax(plan.compilation_cache)
        part = "" if plan.shard is None else f"shard {plan.shard} of {plan.shards} ({len(units)} units) of "
        print(f"sweep {spec.name}: {part}{spec.n_points:,} points in {len(spec.units())} units -> {where}", file=sys.stderr, flush=True)
        print(figures.line(), file=sys.stderr, flush=True)
        return run_sweep(
            spec, plan.path, plan.config_yaml, overwrite=overwrite, progress=plan.progress, units=list(units),
            say=lambda line: print(line, file=sys.stderr, flush=True),
            workers=plan.workers, compilation_cache=plan.compilation_cache, evaluators=evaluators, cluster=plan.cluster,
        )
    except StoreError as error:
        raise _Failed(2, str(error)) from None
    except ClusterError as error:
        raise _Failed(1, f"{error}; the units written before stay valid (re-run the same command to resume)") from None
    except ValueError as error:  # a user schedule failing at one of the sweep's points: written units stay valid
        raise _Failed(2, f"{' '.join(str(error).split())}; the units written to {where} stay valid") from None
    except OSError as error:
        raise _Failed(
            1,
            f"writing {where} failed: {error.strerror or error}; the units written before stay valid "
            "(re-run the same command to resume)",
        ) from None
    except KeyboardInterrupt:
        raise _Failed(130, f"interrupted; the units written to {where} stay valid (re-run the same command to resume)") from None
    finally:
        if evaluators is not None:
            evaluators.shutdown()


def _outcome_line(plan: Any, report: Any) -> str:
    """The run's last line: what it wrote, or that nothing was left to do, and what the store
    still misses; first a warning where step times pass a day."""
    where = _where(plan)
    if report.units_run == 0 and report.complete:
        line = f"{where} is already complete; nothing to do (overwrite=true recomputes it)"
    elif report.units_run == 0:
        line = f"shard {plan.shard} of {plan.shards} is already done in {where}"
    else:
        line = (
            f"wrote {report.points_run:,} points in {report.seconds:.1f} s "
            f"({report.points_per_second:,.0f} points/s end to end) to {where}"
        )
    if report.longest_step > DAY_SECONDS:  # legal, but far outside any real training step: a unit slip?
        print(f"warning: step times up to {report.longest_step / DAY_SECONDS:,.1f} days: check the units of the model and "
              "system (bandwidth in bytes/s, latency and optimizer_time in s, peak_flops in FLOP/s)", file=sys.stderr, flush=True)
    if not report.complete:
        from ppsweep.sweep.shards import describe_missing
        from ppsweep.store.open import check_store
        from ppsweep.store.units import done_units

        line += f"; the store still has {describe_missing(done_units(check_store(plan.path, plan.spec)), plan.shards)}"
    elif plan.shard is not None and report.units_run:
        line += "; the store is complete"
    return line


#: Step times past this (one day, s) get a warning naming the likely unit slip.
DAY_SECONDS = 86400.0

#: Exit statuses of the failed jobs of a ``--multirun`` that ran in this process (Hydra's basic
#: launcher); :func:`main` exits with the worst of them once every job has run.
_FAILED_JOBS: list[int] = []


def _task(cfg: Any) -> dict | None:
    if in_multirun_job():
        outcome = run_outcome(cfg)  # a job never exits the process: the next jobs still run
        if outcome["status"]:
            _FAILED_JOBS.append(outcome["status"])
        return outcome
    status = run(cfg)
    if status == 130:  # interrupted: the run has finished its writes and said so in one line
        _exit_now(130)
    if status:
        sys.exit(status)
    return None


def _exit_now(status: int) -> NoReturn:
    """Flush and leave with ``status`` at once: after a Ctrl-C, interpreter shutdown (Hydra's and
    JAX's handlers and threads) could otherwise end the process as ``-SIGINT``."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _config_dirs(args: Sequence[str]) -> list[str]:
    """The ``--config-dir``/``-cd`` directories on a command line."""
    dirs = []
    for k, arg in enumerate(args):
        for flag in ("--config-dir", "-cd"):
            if arg == flag and k + 1 < len(args):
                dirs.append(args[k + 1])
            elif arg.startswith(flag + "="):
                dirs.append(arg.split("=", 1)[1])
    return dirs


def usage(config_dirs: Sequence[str] = ()) -> str:
    """What to run: the command's form and the available sweeps."""
    from ppsweep.sweep.config import available_sweeps

    return (
        "usage: python -m ppsweep +sweep=NAME [KEY=VALUE ...]   e.g. python -m ppsweep +sweep=bandwidth p=[4,8]\n"
        f"sweeps: {', '.join(available_sweeps(config_dirs))} (conf/sweep/; your own: --config-dir DIR with DIR/sweep/NAME.yaml)\n"
        "without a sweep file, name the store: python -m ppsweep name=mine p=[4] m=[8]; every key: python -m ppsweep --help"
    )


def check_command_line(args: Sequence[str]) -> str | None:
    """What to print (exit status 2) before Hydra starts, or None to go on.

    Plain ``python -m ppsweep`` (no ``sweep=``, no ``name=``) gets the usage and the available
    sweeps; an unknown ``+sweep=`` name gets one ``error:`` line naming the available ones.
    """
    if any(arg in _INFO_FLAGS or arg.startswith(("--cfg=", "--info=")) for arg in args):
        return None
    dirs = _config_dirs(args)
    keys = {arg.split("=", 1)[0].lstrip("+~"): arg.split("=", 1)[1] for arg in args if "=" in arg and not arg.startswith("-")}
    if "sweep" not in keys and "name" not in keys:
        return usage(dirs)
    if "sweep" in keys:
        from ppsweep.sweep.config import check_sweep_names

        try:
            check_sweep_names(keys["sweep"].split(","), dirs)
        except ValueError as error:
            return f"error: {error}"
    return None


def _on_interrupt(signum: int, frame: Any) -> None:
    """Ctrl-C: one line and exit 130 at once. A KeyboardInterrupt raised instead can land in a
    garbage-collection callback (JAX has one), where Python prints it and carries on; the store
    needs no cleanup: a unit is marked done only after its values and checksum are written."""
    print("error: interrupted; units already written stay valid (re-run the same command to resume)",
          file=sys.stderr, flush=True)
    _exit_now(130)


def main() -> None:
    """Console entry point: ``python -m ppsweep`` / ``ppsweep``."""
    signal.signal(signal.SIGINT, _on_interrupt)
    try:
        if "--version" in sys.argv[1:]:
            from ppsweep import __version__

            print(f"ppsweep {__version__}")
            sys.exit(0)
        problem = check_command_line(sys.argv[1:])
        if problem is not None:
            print(problem, file=sys.stderr)
            sys.exit(2)
        import hydra

        hydra.main(config_path=str(find_conf_dir()), config_name="config", version_base="1.3")(_task)()
        if _FAILED_JOBS:
            print(f"error: {len(_FAILED_JOBS)} job(s) of the multirun failed (their lines above)", file=sys.stderr, flush=True)
            _exit_now(max(_FAILED_JOBS))
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        _exit_now(130)  # nothing is written yet
    # Every job has ended and said so, its store written and closed (zarr writes synchronously), its
    # evaluator processes joined: leave now. The interpreter's own teardown (JAX's backends, the
    # modules of JAX, zarr and Hydra) would add about a second to every command for nothing.
    # Under a profiler or tracer (``python -m cProfile -m ppsweep …``, coverage) return normally,
    # so that it can write its report.
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return
    import gc

    gc.collect()  # the evaluator pool's queues: their semaphores unregister as they are collected
    _exit_now(0)
