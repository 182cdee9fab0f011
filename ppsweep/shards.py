"""Shards: one sweep's units of work split across jobs that write disjoint regions of one store.

A sweep of ``U`` units of work (``(p, m)`` pairs: one chunk of every variable of the store, see
:mod:`ppsweep.sweep`) splits into ``shards`` shards. Shard ``k`` owns units ``k``, ``k + shards``,
``k + 2·shards``, … of :meth:`SweepSpec.units` (round-robin, so that the expensive large-``p``
units spread over every shard). A shard writes only its units' chunks and their ``done`` flags,
so shards run in any order, at once, on machines that share a filesystem.

The pieces, in the order a sharded sweep uses them (README, "Running on a cluster"):

- :func:`plan_from_config` turns a resolved config (``shards``, ``shard``, ``finalize``,
  ``overwrite``, …) into a :class:`Plan`; the CLI runs it.
- :class:`ShardsCallback` (a Hydra callback, in ``conf/config.yaml``) runs in the process that
  launches a ``--multirun``: before any job starts it checks the config and the shard indices
  and creates (or checks) the store's layout, once; after every job has ended it checks the
  store is complete and marks it so (:func:`finalize`).
- :class:`SubmititShardsMixin` is the parent-side half of ppsweep's Hydra launchers
  (``hydra/launcher=local`` and ``hydra/launcher=slurm``, thin subclasses of
  hydra-submitit-launcher's in ``hydra_plugins/ppsweep_launcher``): it submits one job per
  shard, waits for all of them, and reports the ones that failed or were killed in one line.

This module imports neither JAX nor the store at import time: Hydra imports it while scanning
its plugins, in every process.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from omegaconf import DictConfig, OmegaConf, open_dict

try:  # Hydra's callback base; plain object where Hydra is older than 1.1
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object  # type: ignore[misc,assignment]

if TYPE_CHECKING:
    from ppsweep.sweep import SweepSpec

log = logging.getLogger(__name__)

#: Config keys that belong to one job, not to the sweep: left out of the store's ``config``.
JOB_KEYS = ("shard", "finalize")


# ---- which units a shard owns ----------------------------------------------------------------
def check_shards(shards: Any, shard: Any, n_units: int) -> tuple[int, int | None]:
    """Validate ``shards`` and ``shard`` against a sweep of ``n_units`` units.

    Returns:
      ``(shards, shard)`` as ints (``shard`` None: every unit).

    Raises:
      ValueError: naming the bad key and the values it accepts.
    """
    if isinstance(shards, bool) or not isinstance(shards, (int, float)) or shards != int(shards) or shards < 1:
        raise ValueError(f"shards: must be an integer >= 1, got {shards!r}")
    shards = int(shards)
    if shards > n_units:
        raise ValueError(
            f"shards: {shards} is more than the sweep's {n_units} units of work ((p, m) pairs); use shards <= {n_units}"
        )
    if shard is None:
        return shards, None
    if isinstance(shard, bool) or not isinstance(shard, (int, float)) or shard != int(shard) or not 0 <= shard < shards:
        raise ValueError(f"shard: must be an integer from 0 to {shards - 1} (shards={shards}), got {shard!r}")
    return shards, int(shard)


def shard_units(spec: SweepSpec, shards: int, shard: int | None) -> list[tuple[int, int]]:
    """The ``(p index, m index)`` units of shard ``shard`` of ``shards`` (all units if ``shard`` is None)."""
    units = spec.units()
    shards, shard = check_shards(shards, shard, len(units))
    return units if shard is None else units[shard::shards]


def missing_by_shard(done, shards: int) -> dict[int, int]:
    """Units not done, per shard that has any, from the store's ``done`` ``(p, m)`` array."""
    flat = [bool(x) for x in done.reshape(-1)]  # the order of SweepSpec.units(): p-major
    missing: dict[int, int] = {}
    for index, finished in enumerate(flat):
        if not finished:
            missing[index % shards] = missing.get(index % shards, 0) + 1
    return missing


def describe_missing(done, shards: int) -> str:
    """``"3 of 16 units missing (shards 1, 5 of 8)"``."""
    missing = missing_by_shard(done, shards)
    count = sum(missing.values())
    text = f"{count} of {done.size} units missing"
    if shards > 1:
        text += f" (shard{'s' if len(missing) > 1 else ''} {', '.join(map(str, sorted(missing)))} of {shards})"
    return text


# ---- a config, as a plan ---------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What one ``python -m ppsweep`` process (or one job of a multirun) is asked to do.

    Attributes:
      spec: the sweep.
      path: its store, absolute (``results_dir`` is relative to the directory ppsweep was started in).
      shards, shard: the split, and this job's shard (None: every unit).
      units: the units this job owns.
      config_yaml: the resolved config without the job-only keys, for the store's attributes.
      overwrite, finalize, progress: the flags of the same names.
      compilation_cache: JAX's persistent compilation cache directory, or None.
    """

    spec: SweepSpec
    path: Path
    shards: int
    shard: int | None
    units: tuple[tuple[int, int], ...]
    config_yaml: str
    overwrite: bool
    finalize: bool
    progress: bool
    compilation_cache: str | None


def plan_from_config(cfg: DictConfig, base_dir: str | os.PathLike | None = None) -> Plan:
    """Validate a ppsweep config (the task's, without ``hydra``) into a :class:`Plan`.

    Args:
      cfg: the composed config.
      base_dir: the directory a relative ``results_dir`` is taken from: the one ppsweep was
        started in (Hydra's ``hydra.runtime.cwd``), whatever directory a job runs in; None: the
        current directory.

    Raises:
      ValueError: naming the first bad field.
    """
    from ppsweep.sweep import SweepSpec

    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    spec = SweepSpec.from_config(container)
    shards, shard = check_shards(container.get("shards", 1), container.get("shard"), len(spec.units()))
    flags = {}
    for key in ("overwrite", "finalize", "progress"):
        value = container.get(key, key == "progress")
        if not isinstance(value, bool):
            raise ValueError(f"{key}: must be true or false, got {value!r}")
        flags[key] = value
    results_dir = container.get("results_dir", "results")
    if not isinstance(results_dir, str) or not results_dir:
        raise ValueError(f"results_dir: must be a directory name, got {results_dir!r}")
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    path = (base / os.path.expanduser(results_dir) / f"{spec.name}.zarr").absolute()
    stored = copy.deepcopy(cfg)
    with open_dict(stored):
        for key in JOB_KEYS:
            stored.pop(key, None)
    engine = container.get("engine") or {}
    return Plan(
        spec=spec,
        path=path,
        shards=shards,
        shard=shard,
        units=tuple(shard_units(spec, shards, shard)),
        config_yaml=OmegaConf.to_yaml(stored, resolve=True),
        overwrite=flags["overwrite"],
        finalize=flags["finalize"],
        progress=flags["progress"],
        compilation_cache=engine.get("compilation_cache"),
    )


def display(path: Path) -> str:
    """``path`` relative to the current directory when it is below it (shorter messages)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def finalize(plan: Plan) -> tuple[bool, str]:
    """Check the store of ``plan`` and mark it complete when every unit is done.

    Returns:
      ``(complete, message)``: the message says what is complete, or what is missing and how to
      finish it.

    Raises:
      StoreError: no store there, or another sweep's.
    """
    from ppsweep.store import StoreError, check_store, done_units, finish_store

    if not plan.path.exists():
        raise StoreError(f"{display(plan.path)}: no such store; run the sweep first (same command without finalize=true)")
    group = check_store(plan.path, plan.spec)
    if finish_store(group, plan.path):
        return True, f"{display(plan.path)} is complete: {plan.spec.n_points:,} points in {len(plan.spec.units())} units"
    done = done_units(group)
    return False, (
        f"{display(plan.path)} is incomplete: {describe_missing(done, plan.shards)}; run the missing shards "
        "(the same command, with shard=K for one), then finalize=true"
    )


# ---- the launching process of a --multirun ----------------------------------------------------
def _exit(status: int, line: str) -> NoReturn:
    print(line, file=sys.stderr, flush=True)
    sys.exit(status)


def _task_config(config: DictConfig) -> DictConfig:
    task = copy.deepcopy(config)
    with open_dict(task):
        task.pop("hydra", None)
    return task


def _shard_sweep(config: DictConfig) -> tuple[bool, str | None]:
    """``(only_shards, shard_override)`` of a multirun's master config.

    ``only_shards`` is False when the multirun sweeps keys other than ``shard`` (then each job is
    a sweep of its own and manages its own store); ``shard_override`` is the effective
    ``shard=...`` override (the command line's, else ``hydra.sweeper.params.shard``).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    lines = [f"{key}={value}" for key, value in (OmegaConf.select(config, "hydra.sweeper.params") or {}).items()]
    lines += list(OmegaConf.select(config, "hydra.overrides.task") or [])
    only_shards, shard_line = True, None
    for line in lines:
        override = parser.parse_override(line)
        if override.key_or_group == "shard":
            shard_line = line
        elif override.is_sweep_override():
            only_shards = False
    return only_shards, shard_line


def swept_shards(shard_line: str | None, shards: int) -> list[int | None]:
    """The shard of each job a ``shard=...`` override launches, validated against ``shards``.

    Raises:
      ValueError: an index out of range or not an integer.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if shard_line is None:
        return [None]
    override = OverridesParser.create().parse_override(shard_line)
    values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
    out: list[int | None] = []
    for value in values:
        out.append(check_shards(shards, value, shards)[1])
    return out


class ShardsCallback(Callback):
    """Hydra callback: the layout before a multirun's shards start, the completeness check after.

    Runs in the launching process only. Where the multirun sweeps keys other than ``shard``
    (several sweeps at once), it steps aside: each job then creates and finishes its own store.
    """

    def __init__(self) -> None:
        self.plan: Plan | None = None
        self.all_shards = False

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        only_shards, shard_line = _shard_sweep(config)
        if not only_shards:
            try:  # hydra.sweeper.params.shard is range(${shards}): a bad value must not reach Hydra's parser
                check_shards(OmegaConf.select(config, "shards", default=1), None, sys.maxsize)
            except ValueError as error:
                _exit(2, f"error: {error}")
            return
        try:
            plan = plan_from_config(_task_config(config), OmegaConf.select(config, "hydra.runtime.cwd"))
            shards = swept_shards(shard_line, plan.shards)
        except ValueError as error:
            _exit(2, f"error: {error}")
        if plan.finalize:
            return  # each job only checks; on_multirun_end reports
        from ppsweep.store import StoreError, open_for_sweep

        try:
            _, pending = open_for_sweep(plan.path, plan.spec, plan.config_yaml, plan.overwrite)
        except StoreError as error:
            _exit(2, f"error: {error}")
        except OSError as error:
            _exit(1, f"error: creating {display(plan.path)} failed: {error.strerror or error}")
        if not pending:
            _, message = finalize(plan)
            _exit(0, f"{message}; nothing to do (overwrite=true recomputes it)")
        self.plan = plan
        self.all_shards = None in shards or set(shards) == set(range(plan.shards))
        spec = plan.spec
        print(
            f"sweep {spec.name}: {spec.n_points:,} points in {len(spec.units())} units, {plan.shards} shard"
            f"{'s' if plan.shards > 1 else ''} -> {display(plan.path)}; {len(pending)} units to run; "
            f"launching {len(shards)} job{'s' if len(shards) > 1 else ''}",
            file=sys.stderr,
            flush=True,
        )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.plan is None:
            return
        from ppsweep.store import StoreError

        try:
            complete, message = finalize(self.plan)
        except StoreError as error:
            _exit(2, f"error: {error}")
        except OSError as error:
            _exit(1, f"error: finalizing {display(self.plan.path)} failed: {error.strerror or error}")
        if complete or not self.all_shards:
            print(message, file=sys.stderr, flush=True)
            return
        _exit(1, f"error: {message}")


# ---- the launchers (parent side) -------------------------------------------------------------
def job_label(overrides: Sequence[str]) -> str:
    """``shard=3`` (or the job's overrides) for messages."""
    for override in overrides:
        if override.startswith("shard="):
            return override
    return " ".join(overrides) or "job"


def job_failure(label: str, job: Any) -> str | None:
    """Wait for a submitit job; None if it ended well, else one line saying what happened."""
    from hydra.core.utils import JobStatus
    from submitit.core.utils import FailedJobError, UncompletedJobError

    try:
        ret = job.results()[0]
    except UncompletedJobError:
        state = str(job.state)
        detail = "" if state.upper() in ("FINISHED", "COMPLETED", "UNKNOWN", "") else f", state {state}"
        return f"{label} (job {job.job_id}) was killed, crashed or ran out of time before finishing{detail}"
    except FailedJobError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        return f"{label} (job {job.job_id}) failed: {lines[-1].strip() if lines else type(error).__name__}"
    if ret.status == JobStatus.FAILED:
        error = ret._return_value
        return f"{label} (job {job.job_id}) failed: {type(error).__name__}: {error}"
    value = ret._return_value
    if isinstance(value, Mapping) and value.get("status"):
        message = str(value.get("message") or f"exit status {value['status']}")
        return f"{label} (job {job.job_id}): {message.removeprefix('error: ')}"
    return None


class SubmititShardsMixin:
    """Parent side of ppsweep's submitit launchers: submit, wait for every job, report failures.

    Follows hydra-submitit-launcher 1.2's ``BaseSubmititLauncher.launch`` (same executor, same
    parameters, same job callable), but waits for every job instead of raising at the first
    failed one, and ends with one ``error: ...`` line (exit status 1) naming each shard that
    failed or was killed, instead of a traceback.
    """

    _EXECUTOR: str
    params: dict[str, Any]
    config: DictConfig | None

    def make_executor(self) -> Any:
        """The submitit executor, configured from the launcher's parameters (as the plugin does)."""
        import submitit
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

        params = dict(self.params)
        specific_init_keys = {"max_num_timeout"}
        init_params = {"folder": params["submitit_folder"]}
        init_params.update({f"{self._EXECUTOR}_{k}": v for k, v in params.items() if k in specific_init_keys})
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init_params)
        baseparams = set(OmegaConf.structured(BaseQueueConf).keys())
        init_keys = specific_init_keys | {"submitit_folder"}
        executor.update_parameters(
            **{k if k in baseparams else f"{self._EXECUTOR}_{k}": v for k, v in params.items() if k not in init_keys}
        )
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[Any]:
        from hydra.core.singleton import Singleton
        from hydra.core.utils import filter_overrides

        assert self.config is not None
        assert len(job_overrides) > 0
        executor = self.make_executor()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        log.info(f"Submitit '{self._EXECUTOR}' sweep output dir : {sweep_dir}")
        job_params: list[Any] = []
        for idx, overrides in enumerate(job_overrides):
            idx = initial_job_idx + idx
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            job_params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
        try:
            jobs = executor.map_array(self, *zip(*job_params))
        except Exception as error:  # noqa: BLE001 - sbatch refused, no such partition, ...
            lines = [line for line in str(error).splitlines() if line.strip()]
            _exit(1, f"error: submitting {len(job_params)} jobs ({self._EXECUTOR}) failed: {lines[-1].strip() if lines else type(error).__name__}")
        for overrides, job in zip(job_overrides, jobs):
            log.info(f"\t{job_label(overrides)}: job {job.job_id}")
        failures = [f for f in (job_failure(job_label(o), j) for o, j in zip(job_overrides, jobs)) if f]
        if failures:
            logs = display(Path(str(self.params["submitit_folder"]).replace("%j", "")).resolve())
            _exit(
                1,
                f"error: {len(failures)} of {len(jobs)} jobs did not finish: {'; '.join(failures)}. "
                f"Units they finished are kept: re-run the same command to finish the rest (logs in {logs})",
            )
        return [job.results()[0] for job in jobs]
