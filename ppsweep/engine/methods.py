"""The engine's method and backend names, checked without importing the engine (which imports JAX).

A sweep's config is validated before its evaluators start (:mod:`ppsweep.sweep.config`); reading
the names from here keeps JAX's import (seconds) out of that path, so that the spawned evaluators
start, and import JAX, while this process imports it too. :mod:`ppsweep.engine.backend` (the
registry, JAX-free too) and :mod:`ppsweep.engine.core` take their names from here.
"""

from __future__ import annotations

import os

from ppsweep.engine.backend import AUTO, SCAN, backend_names

#: Accepted values of the deprecated ``method`` (:func:`ppsweep.engine.core.simulate`) and of the
#: config's ``engine.method``, which also takes backend names (:func:`method_backend`).
METHODS = ("auto", "scan", "envelope")

#: The backends :mod:`ppsweep.engine.core` registers (:mod:`ppsweep.engine.backend`): known by name
#: here before the engine is imported.
BUILTIN_BACKENDS = ("reference", "jax_scan", "native_scan", "periodic_scan", "piecewise_scan", "envelope")


def accepted_methods() -> tuple[str, ...]:
    """Every accepted ``engine.method``: :data:`METHODS`, the built-in backends and any other registered one."""
    return tuple(dict.fromkeys(METHODS + BUILTIN_BACKENDS + backend_names()))


def check_method(method: str) -> str:
    """``method`` (the config's ``engine.method``) if it is a method of :data:`METHODS` or a
    backend name, else a ValueError naming the accepted ones."""
    if method not in accepted_methods():
        raise ValueError(f"engine.method: unknown method {method!r}; accepted: {', '.join(accepted_methods())}")
    return method


def method_backend(method: str) -> str:
    """The ``backend=`` of a method (:data:`METHODS`): ``auto`` and ``envelope`` (the envelope where
    it compiles, else a scan) are ``auto``, ``scan`` is ``scan``; a backend name is itself."""
    check_method(method)
    return {"auto": AUTO, "envelope": AUTO, "scan": SCAN}.get(method, method)


#: Deprecated environment variable: ``jax`` or ``native`` narrows ``backend="auto"`` and ``"scan"``
#: to the scans' ``jax_scan`` or ``native_scan`` (use ``backend=`` instead); ``auto`` (default) leaves them.
SCAN_ENV = "PPSWEEP_SCAN"


def scan_implementation() -> str:
    """``auto``, ``jax`` or ``native``: :data:`SCAN_ENV`, or a ValueError naming the accepted values."""
    choice = os.environ.get(SCAN_ENV, "auto") or "auto"
    if choice not in ("auto", "jax", "native"):
        raise ValueError(f"{SCAN_ENV}: unknown scan {choice!r}; accepted: auto, jax, native")
    return choice
