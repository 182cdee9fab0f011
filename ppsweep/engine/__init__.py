"""The engine: one table and its costs over a grid of points to step times (docs/contract.md §4).

- :mod:`~ppsweep.engine.backend`: the ``Backend`` protocol, ``Tolerance``, ``SimResult`` and the registry
  ``simulate(..., backend=)`` chooses from.
- :mod:`~ppsweep.engine.core`: ``simulate``, the jit-compiled max-plus scan, and the registered backends.
- :mod:`~ppsweep.engine.envelope`: compiled envelopes (a maximum of linear functions of the costs);
  :mod:`~ppsweep.engine.native_envelope` runs their programme compiled (numba).
- :mod:`~ppsweep.engine.program`, :mod:`~ppsweep.engine.fast_program`: a table compiled into the
  static index arrays the scan runs; :mod:`~ppsweep.engine.compiled` caches all of it per table.
- :mod:`~ppsweep.engine.comm`: the communication rules, written once.
- :mod:`~ppsweep.engine.cost_grid`: ``Costs``, the engine's inputs (a JAX pytree).
- :mod:`~ppsweep.engine.tiers`: the two network tiers: each message's and synchronisation's tier
  (within a node or between nodes) from the placement of workers on nodes.
- :mod:`~ppsweep.engine.noise`: jitter and stragglers from counter-based keys.
- :mod:`~ppsweep.engine.reference`: the plain, slow reference simulator the engine is tested against.

``from ppsweep.engine import simulate`` (and ``simulate_costs``, ``SimResult``, ``Costs``, ``MODES``,
``METHODS``) works; it imports JAX on first use only, so ``ppsweep.engine.comm`` stays light.
"""

from ppsweep import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(('METHODS', 'MODES', 'Costs', 'SimResult', 'simulate', 'simulate_costs'), 'ppsweep.engine.core'))
