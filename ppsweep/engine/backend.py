"""The engine's backends: one protocol, one registry, one chooser (docs/contract.md §4, "Backends").

A *backend* computes :class:`SimResult` for one table over a grid of points of its
:class:`~ppsweep.engine.cost_grid.Costs` in one comm mode. The built-in ones wrap the implementations
(registered by :mod:`ppsweep.engine.core`, which every caller of ``simulate`` imports):

- ``reference``: :func:`ppsweep.engine.reference.reference_simulate`, point by point (slow; the
  rules as written; never chosen by ``auto``).
- ``jax_scan``: the jit-compiled max-plus scan (:mod:`ppsweep.engine.core`), noise included.
- ``native_scan``: the compiled CPU loop (:mod:`ppsweep.engine.native_scan`), to the bit of ``jax_scan``,
  noise included.
- ``envelope``: the table's maximal path vectors (:mod:`ppsweep.engine.envelope`); no noise, only
  tables whose envelope stays within ``cap`` vectors.
- ``piecewise_scan``: the periodic scan at a sample of a grid's points, the others interpolated where
  convexity proves them exact (:mod:`ppsweep.engine.piecewise`); no noise, grids with an axis that
  moves the costs on lines.

``simulate(table, costs, mode, backend="auto")`` asks :func:`choose`: ``auto`` takes the
supporting backend of highest :attr:`Backend.priority` (``None``: never automatic) that does not
decline the case as not worth it (an optional ``auto_refusal``, same arguments as
:meth:`Backend.supports`: the envelope where its programme passes a budget of work per operation and point), ``scan`` the
same among the scans; a named backend runs if it supports the case, else a ValueError gives its
reason. The result says which backend ran and why (:attr:`SimResult.backend`, :attr:`SimResult.reason`).

A new backend is one class with the :class:`Backend` attributes and methods, registered with
:func:`register`; the conformance harness (``tests/conformance/``) then checks it against
``reference`` within its declared :class:`Tolerance`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["AUTO", "SCAN", "Backend", "SimResult", "Tolerance", "UnsupportedCase", "backend_names", "check_backend", "choose",
           "get_backend", "register"]

#: ``backend=`` value: the supporting backend of highest priority.
AUTO = "auto"
#: ``backend=`` value: the supporting scan (:attr:`Backend.is_scan`) of highest priority.
SCAN = "scan"


class UnsupportedCase(NotImplementedError):
    """No backend asked for can run a (valid) case; the message gives each one's reason."""


@dataclass(frozen=True)
class SimResult:
    """Result of ``simulate``, every array with the broadcast point shape ``batch``.

    Attributes:
      t_sim: step time, s, ``batch``.
      worker_finish: ``batch + (p,)``: when each worker finished its last operation (and, in
        ``blocking``, its last send), before any optimizer update, s.
      comm_time: time the critical path spends outside compute (messages, link or port queues,
        synchronisations), s, ``batch``.
      compute_time: total compute time of all operations and optimizer updates, s, ``batch``.
      backend: name of the registered backend that computed it.
      reason: why :func:`choose` took that backend (and, for ``auto``, why not those before it).
    """

    t_sim: np.ndarray
    worker_finish: np.ndarray
    comm_time: np.ndarray
    compute_time: np.ndarray
    backend: str = "jax_scan"
    reason: str = ""

    @property
    def method(self) -> str:
        """``envelope`` or ``scan`` (or ``reference``): the name results had before backends (deprecated; read :attr:`backend`)."""
        return {"envelope": "envelope", "reference": "reference"}.get(self.backend, "scan")

    def idle_fraction(self, p: int) -> np.ndarray:
        """``idle_sim = 1 - compute_time / (p · t_sim)``."""
        return 1.0 - self.compute_time / (p * self.t_sim)


@dataclass(frozen=True)
class Tolerance:
    """What a backend promises about its results.

    Attributes:
      rtol: relative bound against ``reference`` on ``t_sim``, ``worker_finish``,
        ``compute_time``; on ``comm_time`` (a difference of times) the bound is ``rtol · t_sim``
        (absolute); float64 (0: to the bit).
      exact_to: name of a backend whose results this one equals to the bit (same inputs, same
        dtype, wherever both support the case), or None.
    """

    rtol: float = 0.0
    exact_to: str | None = None


@runtime_checkable
class Backend(Protocol):
    """One way of computing ``simulate``'s results (module docstring).

    Attributes:
      name: the registry's key (``backend=`` value).
      tolerance: its declared :class:`Tolerance`.
      priority: rank for ``auto`` (highest first among supporting backends), or None: only by name.
      is_scan: whether ``backend="scan"`` may take it.
    """

    name: str
    tolerance: Tolerance
    is_scan: bool

    @property
    def priority(self) -> int | None: ...

    def supports(self, table: Any, costs: Any, mode: str, noise: Any, *, cap: int,
                 worker_node: tuple[int, ...] | None = None) -> str | None:
        """None where it can compute ``table`` at ``costs`` in ``mode`` with ``noise`` (None: no
        noise; else a config with ``samples > 0`` and some factor not 1) with workers on nodes
        ``worker_node`` (None: each its own node), else the reason it cannot; ``cap``: the most
        vectors an envelope may keep."""

    def prepare(self, table: Any, mode: str, costs: Any, *, cap: int, worker_node: tuple[int, ...] | None = None) -> Any:
        """What :meth:`run` needs of the table in ``mode`` with workers on nodes ``worker_node``: each
        message's tier (:mod:`ppsweep.engine.tiers`) among it (compiled once per table by the engine's caches)."""

    def run(self, prepared: Any, costs: Any, mode: str, *, dtype: np.dtype, chunk: int, finish: bool, noise: Any) -> SimResult:
        """The results at every point of ``costs`` (``+ (samples,)`` with noise), ``backend`` and ``reason`` left empty."""


_REGISTRY: dict[str, Backend] = {}
_LOCK = threading.Lock()


def register(backend: Backend) -> Backend:
    """Add ``backend`` to the registry (replacing one of the same name); returns it.

    Raises:
      TypeError: if it lacks an attribute or method of :class:`Backend`.
      ValueError: if its name is ``auto`` or ``scan`` (the chooser's words).
    """
    if not isinstance(backend, Backend):
        raise TypeError(f"register: {backend!r} is not a Backend (name, tolerance, is_scan, priority, supports, prepare, run)")
    if backend.name in (AUTO, SCAN):
        raise ValueError(f"register: backend name {backend.name!r} is reserved (auto, scan)")
    with _LOCK:
        _REGISTRY[backend.name] = backend
    return backend


def backend_names() -> tuple[str, ...]:
    """Registered backend names, in registration order."""
    with _LOCK:
        return tuple(_REGISTRY)


def get_backend(name: str) -> Backend:
    """The registered backend ``name``, or a ValueError naming the accepted ones."""
    with _LOCK:
        found = _REGISTRY.get(name)
    if found is None:
        raise ValueError(f"engine.backend: unknown backend {name!r}; accepted: {', '.join((AUTO, SCAN) + backend_names())}")
    return found


def check_backend(name: str) -> str:
    """``name`` if ``auto``, ``scan`` or a registered backend, else a ValueError naming the accepted values."""
    if name not in (AUTO, SCAN):
        get_backend(name)
    return name


def choose(table: Any, costs: Any, mode: str, noise: Any, backend: str = AUTO, cap: int = 64,
           worker_node: tuple[int, ...] | None = None) -> tuple[Backend, str]:
    """The backend that computes ``table`` at ``costs`` in ``mode`` with ``noise``, and why.

    Args:
      table, costs, mode, noise: the case (``noise``: None, or one with non-unit factors).
      backend: ``auto``, ``scan`` or a registered name (module docstring).
      cap: the most vectors an envelope may keep (:meth:`Backend.supports`).
      worker_node: the node of each worker (None: each its own node; :mod:`ppsweep.engine.tiers`).

    Raises:
      ValueError: an unknown name.
      UnsupportedCase: a named backend that does not support the case, or none (with the reasons).
    """
    check_backend(backend)
    if backend not in (AUTO, SCAN):
        chosen = get_backend(backend)
        why = chosen.supports(table, costs, mode, noise, cap=cap, worker_node=worker_node)
        if why is not None:
            raise UnsupportedCase(f"engine.backend: {backend} cannot run {getattr(table, 'name', 'this table')} in {mode}: {why}")
        return chosen, "asked for by name"
    with _LOCK:
        candidates = [b for b in _REGISTRY.values() if b.priority is not None and (backend == AUTO or b.is_scan)]
    passed = []
    for candidate in sorted(candidates, key=lambda b: -b.priority):
        refusal = getattr(candidate, "auto_refusal", None)
        why = None if refusal is None else refusal(table, costs, mode, noise, cap=cap, worker_node=worker_node)
        if why is None:
            why = candidate.supports(table, costs, mode, noise, cap=cap, worker_node=worker_node)
        if why is None:
            return candidate, f"{backend}: " + "; ".join(passed + [f"{candidate.name} supports it"])
        passed.append(f"not {candidate.name} ({why})")
    raise UnsupportedCase(f"engine.backend: no backend runs {getattr(table, 'name', 'this table')} in {mode} ({'; '.join(passed)})")

