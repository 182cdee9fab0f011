"""ppsweep's Hydra launchers: hydra-submitit-launcher's, with one-line reports of failed shards.

``hydra/launcher=local`` and ``hydra/launcher=slurm`` (``conf/hydra/launcher/``) select them; see
:mod:`ppsweep.shards`. Hydra only instantiates launchers that live in the ``hydra_plugins``
namespace package, hence this package beside ``ppsweep``.
"""
