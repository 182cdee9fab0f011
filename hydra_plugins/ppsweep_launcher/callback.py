"""The Hydra callback of a sharded ``--multirun`` (``hydra.callbacks.shards`` in ``conf/config.yaml``).

:class:`ShardsCallback` runs in the process that launches a ``--multirun``: before any job starts
it checks the config and the shard indices and creates (or checks) the store's layout, once; after
every job has ended it checks the store is complete and marks it so
(:func:`ppsweep.sweep.shards.finalize`). Hydra imports this module while scanning its plugins, in every
process: it imports neither JAX nor the store at import time.
"""

from __future__ import annotations

import copy
import shutil
import sys
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from ppsweep.cli.support import display, exit_with
from ppsweep.sweep.config import Plan, check_shards, plan_from_config

try:  # Hydra's callback base; plain object where Hydra is older than 1.1
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object  # type: ignore[misc,assignment]


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
                exit_with(2, f"error: {error}")
            return
        try:
            plan = plan_from_config(_task_config(config), OmegaConf.select(config, "hydra.runtime.cwd"))
            shards = swept_shards(shard_line, plan.shards)
        except ValueError as error:
            exit_with(2, f"error: {error}")
        if plan.finalize or plan.dry_run:
            return  # each job only checks (or prints its estimate); on_multirun_end reports
        _check_submitter(config)
        from ppsweep.sweep.shards import finalize
        from ppsweep.store.errors import StoreError
        from ppsweep.store.open import open_for_sweep

        try:
            _, pending = open_for_sweep(plan.path, plan.spec, plan.config_yaml, plan.overwrite)
        except StoreError as error:
            exit_with(2, f"error: {error}")
        except OSError as error:
            exit_with(1, f"error: creating {display(plan.path)} failed: {error.strerror or error}")
        if not pending:
            _, message = finalize(plan)
            exit_with(0, f"{message}; nothing to do (overwrite=true recomputes it)")
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
        from ppsweep.sweep.shards import finalize
        from ppsweep.store.errors import StoreError

        try:
            complete, message = finalize(self.plan)
        except StoreError as error:
            exit_with(2, f"error: {error}")
        except OSError as error:
            exit_with(1, f"error: finalizing {display(self.plan.path)} failed: {error.strerror or error}")
        if complete or not self.all_shards:
            print(message, file=sys.stderr, flush=True)
            return
        exit_with(1, f"error: {message}")


def _check_submitter(config: DictConfig) -> None:
    """Off a cluster, the SLURM launcher stops in one line before the store is created (exit 2)."""
    target = str(OmegaConf.select(config, "hydra.launcher._target_", default="") or "")
    if target.endswith("SlurmLauncher") and shutil.which("sbatch") is None:
        exit_with(2, "error: hydra/launcher=slurm submits with SLURM's sbatch, which is not on this machine's PATH "
                     "(run from a cluster's login node; on one machine: hydra/launcher=local); nothing was created")
