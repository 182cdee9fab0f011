"""The engine's method names, checked without importing the engine (which imports JAX).

A sweep's config is validated before its evaluators start (:mod:`ppsweep.sweep.config`); reading
the names from here keeps JAX's import (seconds) out of that path, so that the spawned evaluators
start, and import JAX, while this process imports it too.
"""

from __future__ import annotations

#: Accepted values of ``method`` (:func:`ppsweep.engine.core.simulate`).
METHODS = ("auto", "scan", "envelope")


def check_method(method: str) -> str:
    """``method`` if it is a known engine method, else a ValueError naming the accepted ones."""
    if method not in METHODS:
        raise ValueError(f"engine.method: unknown method {method!r}; accepted: {', '.join(METHODS)}")
    return method
