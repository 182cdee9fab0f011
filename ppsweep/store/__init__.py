"""The results store: one xarray Dataset in zarr per sweep (docs/contract.md §5).

- :mod:`~ppsweep.store.results`: layout, identity, unit writes, locks, ``open_results``.
- :mod:`~ppsweep.store.schema`: the variables (names, dimension kinds, units), imported by the evaluators without zarr.
- :mod:`~ppsweep.store.verify`: ``python -m ppsweep.verify``, checksums of finished units.

``from ppsweep.store import open_results`` works (imported on first use).
"""

from ppsweep import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(('open_results',), 'ppsweep.store.results'))
