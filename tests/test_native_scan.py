"""The compiled CPU scan (ppsweep/engine/native_scan.py) gives the JAX scan's results to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep import build_schedule
from ppsweep.engine.core import SCAN_ENV, simulate

FIELDS = ("t_sim", "worker_finish", "comm_time", "compute_time")


def _costs(table, kind: str, rng: np.random.Generator, n: int = 29) -> tuple[tuple, dict]:
    """Per-stage random costs (``random``), small integers (exact ties everywhere: the tie rule
    decides every path), or random with optimizer updates and overlapped pairs (``updates``)."""
    S = table.n_stages
    if kind == "integers":
        ints = lambda high, shape: rng.integers(0 if high == 2 else 1, high, shape).astype(float)  # noqa: E731
        args = (ints(3, (n, S)), ints(4, (n, S)), ints(2, n), np.ones(n), ints(2, n))
        return args, {"grad_bytes": ints(3, (n, S))}
    args = (rng.random((n, S)), 2 * rng.random((n, S)), 0.1 * rng.random(n), 10 ** rng.uniform(8, 11, n), 1e8 * rng.random(n))
    kw = {"grad_bytes": 1e9 * rng.random((n, S))}
    if kind == "updates":
        kw.update(t_opt=rng.random(n) * (rng.random(n) < 0.5), fb_overlap=0.3)
    return args, kw


def _scan(monkeypatch, implementation: str, table, args, kw, mode: str, dtype):
    return simulate(table, *args, mode=mode, backend=f"{implementation}_scan", dtype=dtype, **kw)


def test_native_scan_on_tiles_of_every_size(monkeypatch):
    """Points split into tiles (and across threads) give each point's own result, whatever the tile."""
    table = build_schedule("hanayo", 4, 8)
    rng = np.random.default_rng(3)
    args, kw = _costs(table, "random", rng, n=1000)
    whole = _scan(monkeypatch, "native", table, args, kw, "contention", np.float64)
    for chunk in (1, 7, 64, 333):
        part = simulate(table, *args, mode="contention", backend="native_scan", chunk=chunk, **kw)
        for field in FIELDS:
            assert np.array_equal(getattr(part, field), getattr(whole, field)), (chunk, field)


def test_integer_ties_follow_the_readme_rule(monkeypatch):
    """With every duration 1 and free messages, paths tie everywhere: the tie rule (the worker's
    own path first) gives comm_time 0 for GPipe in overlap, in both implementations."""
    table = build_schedule("gpipe", 4, 6)
    for implementation in ("native", "jax"):
        r = simulate(table, 1.0, 2.0, 0.0, np.inf, 1.0, "overlap", backend=f"{implementation}_scan")
        assert float(r.comm_time) == 0.0 and float(r.t_sim) == table.length


def test_deprecated_scan_variable_narrows_auto_with_a_warning(monkeypatch):
    table = build_schedule("gpipe", 2, 2)
    monkeypatch.setenv(SCAN_ENV, "fast")
    with pytest.raises(ValueError, match=r"PPSWEEP_SCAN: unknown scan 'fast'; accepted: auto, jax, native"):
        simulate(table, 1.0, 2.0, 0.0, 1.0, 1.0)
    for implementation in ("jax", "native"):
        monkeypatch.setenv(SCAN_ENV, implementation)
        with pytest.warns(DeprecationWarning, match="PPSWEEP_SCAN is deprecated"):
            r = simulate(table, 1.0, 2.0, 0.0, 1.0, 1.0)
        assert r.backend == f"{implementation}_scan"
    monkeypatch.delenv(SCAN_ENV)
    with pytest.warns(DeprecationWarning, match=r"method=\.\.\.\) is deprecated"):
        assert simulate(table, 1.0, 2.0, 0.0, 1.0, 1.0, method="envelope").backend == "envelope"


def test_tie_floor_is_one_rounding():
    """The floor of the tie band is contracted into one fused multiply-add, as XLA computes it:
    ``top - tol·|top|`` rounded once (checked exactly with fractions where it differs from two roundings)."""
    from fractions import Fraction

    from ppsweep.engine.native_scan import tie_floor

    rng = np.random.default_rng(0)
    differ = 0
    for top in rng.uniform(0.5, 2.0, 20000):
        for tol in (1e-6, 0.3):  # a wide band makes the product's own rounding visible
            exact = float(Fraction(float(top)) - Fraction(tol) * Fraction(abs(float(top))))
            assert tie_floor(float(top), tol) == exact
            differ += exact != float(top) - tol * abs(float(top))
    assert differ > 0  # the check can tell one rounding from two
