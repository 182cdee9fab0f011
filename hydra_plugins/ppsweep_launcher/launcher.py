"""The launcher classes; the logic is :class:`ppsweep.shards.SubmititShardsMixin`."""

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher as _LocalLauncher
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _SlurmLauncher

from ppsweep.shards import SubmititShardsMixin


class LocalLauncher(SubmititShardsMixin, _LocalLauncher):
    """Every job in a fresh Python interpreter on this machine (JAX is never forked)."""


class SlurmLauncher(SubmititShardsMixin, _SlurmLauncher):
    """Every job a task of one SLURM job array."""
