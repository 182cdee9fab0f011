"""The package's import graph, read from its source (``ast``): every ``import`` and ``from … import``,
those inside functions included (those under ``if TYPE_CHECKING:`` excluded: they never run).

- :func:`import_graph`: module -> the package's modules it imports.
- :func:`cycles`: the import circles (strongly connected components of more than one module).
- :func:`closure`: a module and everything it imports, directly or not.
- :func:`source_version`: a hash of the source of a module's closure: the cache keys of
  :mod:`ppsweep.tables.cache` and :mod:`ppsweep.engine.envelope_cache` (a change to any module a
  cached value's code imports starts a fresh set of files; no hand-kept list).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from ppsweep import disk_cache

__all__ = ["closure", "cycles", "import_graph", "module_path", "source_version"]

PACKAGE = "ppsweep"
_ROOT = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=1)
def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``), found once per process."""
    out = {}
    for path in sorted(_ROOT.rglob("*.py")):
        parts = path.relative_to(_ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def module_path(name: str) -> Path:
    """The source file of the package's module ``name``."""
    return _modules()[name]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that the module ``name`` (source ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    found.add(_nearest(alias.name, known))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] == PACKAGE:
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in known else _nearest(base, known))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    found.discard(name)
    return found


def _nearest(dotted: str, known: dict[str, Path]) -> str:
    """``dotted``, or its nearest enclosing module that exists."""
    while dotted not in known and "." in dotted:
        dotted = dotted.rpartition(".")[0]
    return dotted


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, frozenset[str]]:
    """Every module of the package -> the package's modules it imports (anywhere in its source)."""
    return {name: _imports_of(name) for name in _modules()}


@functools.lru_cache(maxsize=None)
def _imports_of(name: str) -> frozenset[str]:
    """The package's modules that module ``name`` imports (its source parsed once per process)."""
    known = _modules()
    return frozenset(_imported(name, known[name], known))


def cycles(graph: dict[str, frozenset[str]] | None = None) -> list[list[str]]:
    """The import circles of ``graph`` (default :func:`import_graph`): each a sorted list of the
    modules of one strongly connected component with more than one module."""
    graph = import_graph() if graph is None else graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm, recursive (the package is a few hundred modules)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(out)


def closure(*roots: str) -> tuple[str, ...]:
    """``roots`` and every module of the package they import, directly or not, sorted."""
    known = _modules()
    seen: set[str] = set()
    todo = list(roots)
    while todo:  # parses only the modules it reaches (a cache key's closure: a fifth of the package)
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_imports_of(name) if name in known else ())
    return tuple(sorted(seen))


@functools.lru_cache(maxsize=None)
def source_version(*roots: str) -> str:
    """Hash of the source of :func:`closure` of ``roots`` (:func:`ppsweep.disk_cache.source_version`)."""
    return disk_cache.source_version([module_path(name) for name in closure(*roots)])
