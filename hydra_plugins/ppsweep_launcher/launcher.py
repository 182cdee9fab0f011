"""ppsweep's Hydra launchers: hydra-submitit-launcher's, with one-line reports of failed shards.

:class:`SubmititShardsMixin` is the parent side: it submits one job per shard, waits for all of
them, and reports the ones that failed or were killed in one line (exit status 1) instead of a
traceback. ``hydra/launcher=local`` and ``hydra/launcher=slurm`` (``conf/hydra/launcher/``)
select :class:`LocalLauncher` and :class:`SlurmLauncher`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher as _LocalLauncher
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _SlurmLauncher
from omegaconf import DictConfig, OmegaConf

from ppsweep.cli.support import display, exit_with

log = logging.getLogger(__name__)


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
        try:
            ret.return_value  # raises the job's exception
        except Exception as error:  # noqa: BLE001 - whatever the job raised is reported
            return f"{label} (job {job.job_id}) failed: {type(error).__name__}: {error}"
    value = ret.return_value
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
            exit_with(1, f"error: submitting {len(job_params)} jobs ({self._EXECUTOR}) failed: {lines[-1].strip() if lines else type(error).__name__}")
        for overrides, job in zip(job_overrides, jobs):
            log.info(f"\t{job_label(overrides)}: job {job.job_id}")
        failures = [f for f in (job_failure(job_label(o), j) for o, j in zip(job_overrides, jobs)) if f]
        if failures:
            logs = display(Path(str(self.params["submitit_folder"]).replace("%j", "")).resolve())
            exit_with(
                1,
                f"error: {len(failures)} of {len(jobs)} jobs did not finish: {'; '.join(failures)}. "
                f"Units they finished are kept: re-run the same command to finish the rest (logs in {logs})",
            )
        return [job.results()[0] for job in jobs]


class LocalLauncher(SubmititShardsMixin, _LocalLauncher):
    """Every job in a fresh Python interpreter on this machine (JAX is never forked)."""


class SlurmLauncher(SubmititShardsMixin, _SlurmLauncher):
    """Every job a task of one SLURM job array."""
