"""The results store: one xarray Dataset in zarr per sweep (docs/contract.md §5), written unit by unit.

Every data variable is created empty (NaN, or False for ``valid``) with one chunk per unit of work
``(p, m)``; a unit writes its chunks, then its checksum, then its ``done`` flag, so a store killed at
any moment reads back with every unfinished unit still NaN and marked not done. Re-running the same
sweep resumes with the units not done (or damaged); a different grid or config is refused, naming
the first setting that differs. Shards: the layout appears whole or not at all, and each process
writes only the chunks of its own units, so no two writers ever touch the same file.

- :mod:`~ppsweep.store.open`: ``open_results`` (read, after checking), ``open_store``,
  ``open_for_sweep`` (create or resume), ``check_store``, ``pending_units``;
- :mod:`~ppsweep.store.identity`: the store's identity and fingerprint (``STORE_FORMAT``);
- :mod:`~ppsweep.store.layout`: building the layout (``create_store``, ``restore_layout``,
  ``finish_store``, ``is_ppsweep_store``);
- :mod:`~ppsweep.store.units`: one unit's chunks, checksum and done flag (``write_unit``,
  ``UnitWriter``, ``read_unit``, ``done_units``, ``damaged_units``);
- :mod:`~ppsweep.store.integrity`: the layout's integrity record (coordinates, metadata, attributes);
- :mod:`~ppsweep.store.locks`: writers' registration, unit locks and the layout's generation;
- :mod:`~ppsweep.store.errors`: ``StoreError``, ``IncompleteStoreWarning``;
- :mod:`~ppsweep.store.schema`: the variables (names, dimension kinds, units), imported by the evaluators without zarr;
- :mod:`~ppsweep.store.verify`: ``python -m ppsweep.verify``, checksums of finished units.

``from ppsweep.store import open_results`` works (the names below are imported on first use).
"""

from ppsweep import lazy_exports

#: Public name -> the module that defines it.
_EXPORTS = {
    "IncompleteStoreWarning": "ppsweep.store.errors",
    "StoreError": "ppsweep.store.errors",
    "open_results": "ppsweep.store.open",
    "open_store": "ppsweep.store.open",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
