"""The engine's method names, checked without importing the engine (which imports JAX).

A sweep's config is validated before its evaluators start (:mod:`ppsweep.sweep.config`); reading
the names from here keeps JAX's import (seconds) out of that path, so that the spawned evaluators
start, and import JAX, while this process imports it too.
"""

from __future__ import annotations

import os

#: Accepted values of ``method`` (:func:`ppsweep.engine.core.simulate`).
METHODS = ("auto", "scan", "envelope")


def check_method(method: str) -> str:
    """``method`` if it is a known engine method, else a ValueError naming the accepted ones."""
    if method not in METHODS:
        raise ValueError(f"engine.method: unknown method {method!r}; accepted: {', '.join(METHODS)}")
    return method


#: Environment variable choosing the scan's implementation: ``auto`` (default: the compiled CPU
#: loop of :mod:`ppsweep.engine.native_scan` where JAX runs on one CPU device and there is no
#: noise, else the JAX scan), ``jax`` or ``native``. Both give the same results to the bit.
SCAN_ENV = "PPSWEEP_SCAN"


def scan_implementation() -> str:
    """``auto``, ``jax`` or ``native``: :data:`SCAN_ENV`, or a ValueError naming the accepted values."""
    choice = os.environ.get(SCAN_ENV, "auto") or "auto"
    if choice not in ("auto", "jax", "native"):
        raise ValueError(f"{SCAN_ENV}: unknown scan {choice!r}; accepted: auto, jax, native")
    return choice
