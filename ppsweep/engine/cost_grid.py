"""The engine's costs: what one table costs at every point of a broadcast grid (a JAX pytree once JAX is imported).

:class:`Costs` is what the cost model produces (:func:`ppsweep.cost_model.engine_costs`) and what the
engine consumes (``simulate(table, costs, mode)``). Per-stage costs broadcast against
``batch + (S,)`` (a trailing axis of length ``S`` or 1), per-point costs against ``batch``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sys

import numpy as np

from ppsweep.engine.comm import wire_time
from ppsweep.tables.ops import pair_time

#: Per-stage fields, in the order of the engine's duration rows (kinds), then the gradient bytes.
STAGE_FIELDS = ("t_f", "t_b", "t_i", "t_w", "grad_bytes")
#: Per-point fields.
POINT_FIELDS = ("alpha", "beta", "msg_bytes", "t_opt", "fb_overlap", "alpha_intra", "beta_intra")
#: Compute-duration fields, in the order of :data:`ppsweep.engine.program.KIND_ROW`; then ``t_pf``, the
#: forward part of an overlapped pair (:data:`ppsweep.engine.program.PAIR_F`), and one row of zeros.
KINDS = ("t_f", "t_b", "t_i", "t_w")


@dataclass(frozen=True)
class Costs:
    """Costs of one table over a grid of points (float64 numpy arrays, or JAX arrays under ``jax.tree``:
    :func:`register_pytree`).

    Attributes:
      t_f, t_b, t_i, t_w: forward, full-backward, input- and weight-gradient seconds per
        microbatch of each stage, ``batch + (S or 1,)``.
      grad_bytes: gradient bytes of each stage (synchronising replicated stages), ``batch + (S or 1,)``.
      alpha: message latency, s; beta: bandwidth, bytes/s (``inf``: free transfers): the tier
        between nodes (:mod:`ppsweep.engine.tiers`), which every message takes with the default placement;
        msg_bytes: bytes of one point-to-point message; t_opt: optimizer update seconds per
        worker (0: none); fb_overlap: share in [0, 1] of an overlapped pair's forward half hidden
        under its backward half (:func:`ppsweep.tables.ops.pair_time`); alpha_intra, beta_intra: latency
        and bandwidth of the tier within a node (messages between workers of one node,
        :mod:`ppsweep.engine.tiers`; :meth:`of` makes them ``alpha``, ``beta`` where not given) --
        each broadcastable to ``batch``.
    """

    t_f: Any
    t_b: Any
    t_i: Any
    t_w: Any
    grad_bytes: Any
    alpha: Any
    beta: Any
    msg_bytes: Any
    t_opt: Any
    fb_overlap: Any = 0.0
    alpha_intra: Any = None
    beta_intra: Any = None

    @classmethod
    def of(
        cls,
        n_stages: int,
        t_f: Any,
        t_b: Any,
        alpha: Any,
        beta: Any,
        msg_bytes: Any,
        *,
        t_i: Any = None,
        t_w: Any = None,
        grad_bytes: Any = 0.0,
        t_opt: Any = 0.0,
        fb_overlap: Any = 0.0,
        alpha_intra: Any = None,
        beta_intra: Any = None,
    ) -> "Costs":
        """Validated costs of a table with ``n_stages`` stages (``t_i``, ``t_w`` default to ``t_b/2``;
        ``alpha_intra``, ``beta_intra``, the tier within a node, to ``alpha``, ``beta``).

        Raises:
          ValueError: naming the first bad field (shape, sign, finiteness).
        """
        t_i = np.asarray(t_b, float) / 2 if t_i is None else t_i
        t_w = np.asarray(t_b, float) / 2 if t_w is None else t_w
        given = {"t_f": t_f, "t_b": t_b, "t_i": t_i, "t_w": t_w, "grad_bytes": grad_bytes,
                 "alpha": alpha, "beta": beta, "msg_bytes": msg_bytes, "t_opt": t_opt, "fb_overlap": fb_overlap,
                 "alpha_intra": alpha if alpha_intra is None else alpha_intra,
                 "beta_intra": beta if beta_intra is None else beta_intra}
        arrays = {k: _stage_array(k, given[k], n_stages) for k in STAGE_FIELDS}
        arrays.update({k: np.asarray(given[k], dtype=float) for k in POINT_FIELDS})
        for name in STAGE_FIELDS + ("alpha", "msg_bytes", "t_opt", "alpha_intra"):
            a = arrays[name]
            if not (np.all(np.isfinite(a)) and np.all(a >= 0)):
                raise ValueError(f"{name}: must be finite and >= 0")
        for name in ("beta", "beta_intra"):
            if not np.all(arrays[name] > 0):
                raise ValueError(f"{name}: bandwidth must be > 0 bytes/s (inf allowed)")
        if not np.all((arrays["fb_overlap"] >= 0) & (arrays["fb_overlap"] <= 1)):
            raise ValueError("fb_overlap: must be in [0, 1] (share of a pair's forward hidden under its backward)")
        return cls(**arrays)

    @property
    def batch(self) -> tuple[int, ...]:
        """The broadcast point shape."""
        return np.broadcast_shapes(*(np.shape(getattr(self, k))[:-1] for k in STAGE_FIELDS),
                                   *(np.shape(getattr(self, k)) for k in POINT_FIELDS))

    def at(self, where: tuple[np.ndarray, ...], n_stages: int) -> "Costs":
        """The costs at the points ``where`` (an index into :attr:`batch`, ``(1,)`` for a single point), flat: ``(n, S)`` and ``(n,)``."""
        batch = self.batch or (1,)
        stage = {k: _take(getattr(self, k), batch, where, (n_stages,)) for k in STAGE_FIELDS}
        point = {k: _take(getattr(self, k), batch, where, ()) for k in POINT_FIELDS}
        return Costs(**stage, **point)

    def durations(self) -> np.ndarray:
        """Flat costs' compute seconds by duration row (kind, stage; :func:`ppsweep.engine.program.n_duration_rows`): ``(5·S + 1, n)``."""
        zero = np.zeros((self.t_f.shape[0], 1))
        return np.concatenate([getattr(self, k) for k in KINDS] + [self.pair_forward(), zero], axis=1).T

    def pair_forward(self) -> Any:
        """``t_pf``: the forward part of an overlapped pair, ``(1 - fb_overlap)·t_f``, per stage."""
        return pair_time(self.t_f, 0.0, np.asarray(self.fb_overlap)[..., None])

    def wire(self) -> np.ndarray:
        """Seconds one message occupies a link between nodes: ``msg_bytes / beta`` (0 where ``beta = inf``)."""
        return wire_time(self.msg_bytes, self.beta)

    def tier_alpha(self) -> np.ndarray:
        """Flat costs' latency per tier, ``(N_TIERS, n)``: rows :data:`ppsweep.engine.tiers.INTER`, ``INTRA``."""
        return np.stack([self.alpha, self.alpha_intra])

    def tier_beta(self) -> np.ndarray:
        """Flat costs' bandwidth per tier, ``(N_TIERS, n)`` (as :meth:`tier_alpha`)."""
        return np.stack([self.beta, self.beta_intra])

    def tier_wire(self) -> np.ndarray:
        """Flat costs' wire time of one message per tier, ``(N_TIERS, n)`` (as :meth:`tier_alpha`)."""
        return np.stack([self.wire(), wire_time(self.msg_bytes, self.beta_intra)])

    def stages(self) -> dict[str, Any]:
        """The per-stage fields by name, and ``t_pf`` (:meth:`pair_forward`)."""
        return {**{k: getattr(self, k) for k in STAGE_FIELDS}, "t_pf": self.pair_forward()}


def _take(value: Any, batch: tuple[int, ...], where: tuple[np.ndarray, ...], trailing: tuple[int, ...]) -> np.ndarray:
    """The values of ``np.broadcast_to(value, batch + trailing)[where]`` without indexing the broadcast
    grid: the points' positions along the axes ``value`` varies on index its own values (most costs
    vary along a few axes of a sweep's grid, or none). A read-only view where a value repeats (a
    cost that varies along none of the axes, or is the same for every stage): nothing copies it."""
    value = np.asarray(value)
    shape = (1,) * (len(batch) + len(trailing) - value.ndim) + value.shape
    varying = [d for d in range(len(batch)) if shape[d] > 1]
    rows = value.reshape(-1, *shape[len(batch):])  # one row per combination of the varying axes
    if varying:
        rows = rows[np.ravel_multi_index(tuple(where[d] for d in varying), tuple(shape[d] for d in varying))]
    else:
        rows = np.broadcast_to(rows, (np.shape(where[0])[0],) + rows.shape[1:])
    return np.broadcast_to(rows, rows.shape[:1] + trailing)


def _stage_array(name: str, value: Any, n_stages: int) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if array.ndim == 0:
        return array.reshape(1)
    if array.shape[-1] not in (1, n_stages):
        raise ValueError(
            f"{name}: trailing axis must have length 1 or n_stages={n_stages} (one value per stage), "
            f"got shape {array.shape}"
        )
    return array


_REGISTERED = False


def register_pytree() -> None:
    """Register :class:`Costs` as a JAX pytree (its fields the leaves), once per process.

    The engine imports JAX only where a JAX scan runs (:mod:`ppsweep.engine.jax_scan`, which
    registers it); this module registers it on import where JAX is already imported. Code that
    imports JAX later and maps ``jax.tree`` over costs calls this first.
    """
    global _REGISTERED
    if not _REGISTERED:
        import jax

        jax.tree_util.register_dataclass(Costs)
        _REGISTERED = True


if "jax" in sys.modules:
    register_pytree()
