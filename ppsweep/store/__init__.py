"""The results store: one xarray Dataset in zarr per sweep (docs/contract.md §5).

- :mod:`~ppsweep.store.results`: schema, identity, unit writes, locks, ``open_results``.
- :mod:`~ppsweep.store.verify`: ``python -m ppsweep.verify``, checksums of finished units.

``from ppsweep.store import open_results`` works (imported on first use).
"""

from ppsweep import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(('open_results',), 'ppsweep.store.results'))
