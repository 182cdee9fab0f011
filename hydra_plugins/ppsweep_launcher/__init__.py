"""ppsweep's Hydra plugins: the launchers of sharded sweeps and the callback that prepares and finishes them.

``hydra/launcher=local`` and ``hydra/launcher=slurm`` (``conf/hydra/launcher/``) select the
launchers (:mod:`.launcher`); ``conf/config.yaml`` names the callback (:mod:`.callback`). The
shard arithmetic is :mod:`ppsweep.sweep.shards`. Hydra only instantiates launchers that live in the
``hydra_plugins`` namespace package, hence this package beside ``ppsweep``.
"""
