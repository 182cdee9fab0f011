"""The package's import graph (ppsweep/import_graph.py): no import circle, imports inside functions
counted; the caches' code keys follow it."""

from __future__ import annotations

from pathlib import Path

from ppsweep import import_graph


def test_the_package_has_no_import_circle():
    assert import_graph.cycles() == []


def test_a_circle_is_found_and_imports_inside_functions_count(tmp_path: Path):
    # two modules importing each other, one of them inside a function (and one import only for type checking, ignored)
    (tmp_path / "a.py").write_text("from ppsweep.x import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ppsweep.c\n"
                                   "def f():\n    from ppsweep.x.a import thing\n    return thing\n")
    known = {"ppsweep.x.a": tmp_path / "a.py", "ppsweep.x.b": tmp_path / "b.py", "ppsweep.c": tmp_path / "a.py"}
    graph = {name: frozenset(import_graph._imported(name, path, known)) for name, path in known.items() if name != "ppsweep.c"}
    assert graph == {"ppsweep.x.a": {"ppsweep.x.b"}, "ppsweep.x.b": {"ppsweep.x.a"}}
    assert import_graph.cycles(graph) == [["ppsweep.x.a", "ppsweep.x.b"]]
    assert import_graph.cycles({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset()}) == []


def test_cache_keys_cover_every_module_the_cached_code_imports():
    tables = import_graph.closure("ppsweep.tables.build")
    assert {"ppsweep.tables.fast_realize", "ppsweep.tables.op_arrays", "ppsweep.tables.validate",
            "ppsweep.schedules.gpipe", "ppsweep.schedules.dualpipev", "ppsweep.implementations"} <= set(tables)
    engine = import_graph.closure("ppsweep.engine.compiled", "ppsweep.engine.native_scan")
    assert {"ppsweep.engine.program", "ppsweep.engine.fast_program", "ppsweep.engine.comm", "ppsweep.engine.envelope",
            "ppsweep.engine.native_envelope", "ppsweep.engine.native_scan", "ppsweep.tables.table"} <= set(engine)
    assert "ppsweep.engine.core" not in engine  # the scan's driver builds no cached value
