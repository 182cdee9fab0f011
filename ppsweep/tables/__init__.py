"""Tables: a schedule's per-worker order realized as a dense, checked table (docs/contract.md §2).

- :mod:`~ppsweep.tables.ops`: operations and their data dependencies.
- :mod:`~ppsweep.tables.table`: the dense table and its as-soon-as-possible realization.
- :mod:`~ppsweep.tables.validate`: what makes a table valid.
- :mod:`~ppsweep.tables.build`: ``build_schedule``, name and ``(p, m, options)`` to a checked table; the formulas.
- :mod:`~ppsweep.tables.fast_realize`: array versions of the realization and validation.
- :mod:`~ppsweep.tables.cache`: built tables cached on disk.
- :mod:`~ppsweep.tables.interchange`: PyTorch's pipeline CSV form.
"""
