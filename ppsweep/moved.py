"""Old module paths, kept importable for one release (deprecated).

Before the package was laid out by stage (schedules → tables → engine → sweep → store → analysis,
viz, cli), its modules sat at the top: ``ppsweep.interchange``, ``ppsweep.table``, … . Importing one
of those names still works: it warns (``DeprecationWarning`` naming the new path) and gives the
module at its new path, the same module object. The README lists them ("Old module paths").
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

#: Old path -> new path.
MOVED = {
    "ppsweep.build": "ppsweep.tables.build",
    "ppsweep.cli_support": "ppsweep.cli.support",
    "ppsweep.comm": "ppsweep.engine.comm",
    "ppsweep.compiled": "ppsweep.engine.compiled",
    "ppsweep.config": "ppsweep.sweep.config",
    "ppsweep.costs": "ppsweep.cost_model",
    "ppsweep.display": "ppsweep.viz.display",
    "ppsweep.engine.costs": "ppsweep.engine.cost_grid",
    "ppsweep.engine_costs": "ppsweep.engine.cost_grid",
    "ppsweep.envelope": "ppsweep.engine.envelope",
    "ppsweep.estimate": "ppsweep.sweep.estimate",
    "ppsweep.fast_program": "ppsweep.engine.fast_program",
    "ppsweep.fast_realize": "ppsweep.tables.fast_realize",
    "ppsweep.interchange": "ppsweep.tables.interchange",
    "ppsweep.noise": "ppsweep.engine.noise",
    "ppsweep.ops": "ppsweep.tables.ops",
    "ppsweep.parallel": "ppsweep.sweep.parallel",
    "ppsweep.plots": "ppsweep.viz.plots",
    "ppsweep.program": "ppsweep.engine.program",
    "ppsweep.progress": "ppsweep.sweep.progress",
    "ppsweep.ranking": "ppsweep.sweep.ranking",
    "ppsweep.reference": "ppsweep.engine.reference",
    "ppsweep.runner": "ppsweep.sweep.runner",
    "ppsweep.shards": "ppsweep.sweep.shards",
    "ppsweep.table": "ppsweep.tables.table",
    "ppsweep.table_cache": "ppsweep.tables.cache",
    "ppsweep.timing": "ppsweep.sweep.timing",
    "ppsweep.uncertainty_plots": "ppsweep.analysis.uncertainty_plots",
    "ppsweep.uncertainty_report": "ppsweep.analysis.uncertainty_report",
    "ppsweep.validate": "ppsweep.tables.validate",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path, warns, and loads the module at its new path."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; the old path goes in the next release", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at its new path is loaded already."""


def install() -> None:
    """Make the old paths importable (once per process)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
