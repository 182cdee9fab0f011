"""Conformance: every registered engine backend against ``reference``, every table-level implementation
against its reference (issue 29). A backend or an implementation gets all of it by registering.

Backends (:mod:`ppsweep.engine.backend`): every registered schedule and variant at small ``(p, m)``,
each case in two comm modes (rotating: every schedule meets every mode over its two sizes, every
mode every schedule family), four kinds of costs:

- ``per_stage``: unequal random per-stage times (``t_i``, ``t_w`` given apart from ``t_b``), gradient
  bytes, optimizer updates on some points, latency 0 on some, a random F&B overlap credit per point;
- ``grid``: a broadcast grid (scale × bandwidth × latency axes) of one per-stage profile (the cost
  model's shape: what the envelope compiles);
- ``ties``: small integers and free messages, where paths tie and the README's tie rule decides
  ``comm_time``;
- ``noise``: jitter and stragglers (the backends that support noise, on the engine's own draws;
  at p = 2, where every table shares the noisy scan's compiled code);
- two network tiers (docs/contract.md §4b): ``tiers`` (``per_stage`` with random intra-node latency
  and bandwidth per point), ``grid_tiers`` (``grid`` with the intra tier in a fixed ratio: what the
  envelope compiles), ``profile`` (profiled costs, :func:`ppsweep.cost_profile.engine_costs_from_profile`,
  with an intra tier) and, at p = 2, ``noise_tiers``; workers two to a node (:func:`_nodes`; at p = 2
  one node, so every message and synchronisation takes the intra tier).

Each backend runs every case it supports (its ``supports`` reason otherwise) and must agree with
``reference`` within its declared :class:`~ppsweep.engine.backend.Tolerance`, and to the bit with
the backend it names in ``exact_to`` (float64; and float32 at p = 2).

Table-level (:class:`ppsweep.implementations.Implementations`): realize, validate and
compile_program, every registered implementation on every schedule and variant at several slot
settings, equal to the reference's result field for field (errors included).
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest

from conftest import rotated_modes
from ppsweep import SCHEDULES
from ppsweep.cost_profile import engine_costs_from_profile, profile_from_mapping
from ppsweep.engine.backend import backend_names, get_backend
from ppsweep.engine.comm import MODES
from ppsweep.engine.core import simulate
from ppsweep.engine.cost_grid import Costs
from ppsweep.engine.fast_program import PROGRAM
from ppsweep.engine.noise import NoiseConfig
from ppsweep.implementations import REFERENCE
from ppsweep.schedules import get_schedule
from ppsweep.tables.build import build_schedule, resolve_options, why_unsupported
from ppsweep.tables.paths import REALIZE, VALIDATE
from ppsweep.tables.validate import InvalidTableError

#: Options tried beyond each schedule's defaults.
VARIANTS = {"chimera": [{"split": "1:2"}, {"concat": "forward_doubling"}, {"concat": "backward_halving"}], "hanayo": [{"waves": 2}],
            "interleaved_1f1b": [{"v": 3}]}
#: Sizes tried, smallest first; each schedule and variant runs at the first two it supports.
POINTS = [(2, 4), (4, 8), (3, 6), (4, 4), (6, 12), (8, 16)]
FIELDS = ("t_sim", "worker_finish", "comm_time", "compute_time")
KINDS = ("per_stage", "grid", "ties", "tiers", "grid_tiers", "profile", "noise", "noise_tiers")
#: The kinds that run only at p = 2 (noise: module docstring).
P2_KINDS = ("noise", "noise_tiers")
NOISE = NoiseConfig.from_mapping({"samples": 2, "seed": 11, "compute": {"dist": "lognormal", "cv": 0.2},
                                  "message": {"dist": "normal", "cv": 0.3}, "straggler": {"prob": 0.3, "slowdown": 1.5}})


def _cases() -> list[tuple[str, int, int, dict]]:
    cases = []
    for name in sorted(SCHEDULES):
        for options in [{}] + VARIANTS.get(name, []):
            sizes = [(p, m) for p, m in POINTS if why_unsupported(name, p, m, **options) is None][:2]
            cases += [(name, p, m, options) for p, m in sizes]
    return cases


CASES = _cases()


def _case_id(case) -> str:
    name, p, m, options = case
    return f"{name}-p{p}-m{m}" + "".join(f"-{k}={v}" for k, v in options.items())


def _modes_of(cases) -> list[tuple[tuple, str]]:
    """Each case in two modes, rotating along the cases of its schedule and variant (their two sizes
    together meet every mode) and staggered by the variant's ordinal."""
    out, seen = [], {}
    for case in cases:
        key = (case[0], tuple(sorted(case[3].items())))
        ordinal, k = seen.setdefault(key, [len(seen), 0])
        seen[key][1] += 1
        out += [(case, mode) for mode in rotated_modes(MODES, 2 * (ordinal + k) + k)]
    return out


ENGINE_CASES = _modes_of(CASES)


def _costs(kind: str, n_stages: int, rng: np.random.Generator) -> Costs:
    """The costs of one kind (module docstring) for a table of ``n_stages`` stages."""
    S = n_stages
    if kind == "per_stage":
        n = 3
        t_f = rng.uniform(0.2, 1.0, (n, S))
        t_b = t_f * rng.uniform(1.5, 2.5, (n, S))
        t_i = t_b * rng.uniform(0.3, 0.7, (n, S))
        return Costs.of(S, t_f, t_b, rng.choice([0.0, 1.0], n) * rng.uniform(0, 0.3, n), rng.uniform(2.0, 20.0, n),
                        rng.uniform(0.5, 10.0, n), t_i=t_i, t_w=t_b - t_i * rng.uniform(0.8, 1.2, (n, S)),
                        grad_bytes=rng.uniform(0, 20, (n, S)), t_opt=rng.choice([0.0, 1.0], n) * rng.uniform(0, 0.3, n),
                        fb_overlap=rng.uniform(0, 1, n))
    if kind == "tiers":
        c = _costs("per_stage", S, rng)
        n = c.batch[0]
        return dataclasses.replace(c, alpha_intra=rng.choice([0.0, 1.0], n) * rng.uniform(0, 0.1, n),
                                   beta_intra=rng.uniform(20.0, 200.0, n))
    if kind in ("grid", "noise", "grid_tiers", "noise_tiers"):
        profile = rng.uniform(0.5, 1.5, S)
        scale = np.array([0.5, 2.0])[:, None, None, None]
        beta = np.array([0.5, 50.0])[None, :, None]
        alpha = np.array([0.05])[None, None, :]
        if kind.startswith("noise"):  # two points, each in every sample
            scale, beta = scale[:1], beta[:, :2]
        intra = {"alpha_intra": 0.25 * alpha, "beta_intra": 8.0 * beta} if kind.endswith("tiers") else {}
        return Costs.of(S, scale * profile, 2.1 * scale * profile, alpha, beta, 4.0, grad_bytes=10.0 * profile, t_opt=0.1,
                        fb_overlap=0.4, **intra)
    if kind == "profile":
        t_f = rng.uniform(0.5, 1.5, S)
        t_i = t_f * rng.uniform(0.8, 1.2, S)
        measured = profile_from_mapping({"t_f": t_f.tolist(), "t_i": t_i.tolist(), "t_w": (0.9 * t_f).tolist(),
                                         "grad_bytes": rng.uniform(1, 10, S).tolist(), "message": {"alpha": 0.05, "beta": 2.0, "bytes": 3.0}})
        return engine_costs_from_profile(measured, _Stages(S), alpha=np.array([0.05, 0.2]), alpha_intra=0.01, beta_intra=30.0)
    if kind == "ties":
        n = 2
        ints = lambda low, high, shape: rng.integers(low, high, shape).astype(float)  # noqa: E731
        return Costs.of(S, ints(1, 3, (n, S)), ints(1, 4, (n, S)), ints(0, 2, n), np.ones(n), ints(0, 2, n),
                        grad_bytes=ints(0, 3, (n, S)))
    raise ValueError(kind)


class _Stages:
    """What :func:`ppsweep.cost_profile.engine_costs_from_profile` reads of a table: its stage count."""

    def __init__(self, n_stages: int):
        self.n_stages = n_stages


def _nodes(kind: str, p: int) -> list[int] | None:
    """The node of each worker for costs of ``kind``: two workers to a node for the two-tier kinds, else None."""
    return [w // 2 for w in range(p)] if kind in ("tiers", "grid_tiers", "profile", "noise_tiers") else None


def _run(table, costs, mode, backend, noise, dtype=np.float64, worker_node=None):
    return simulate(table, costs, mode, backend=backend, noise=noise, dtype=dtype, worker_node=worker_node)


def _within(got, want, rtol: float, where: str) -> None:
    t = np.broadcast_to(np.abs(want.t_sim), want.comm_time.shape)
    for field in ("t_sim", "worker_finish", "compute_time"):
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=rtol, atol=0, err_msg=f"{where}: {field}")
    assert np.all(np.abs(got.comm_time - want.comm_time) <= rtol * t), f"{where}: comm_time"


def _bits(a, b, where: str) -> None:
    for field in FIELDS:
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f"{where}: {field}"


@pytest.mark.parametrize("case, mode", ENGINE_CASES, ids=[f"{_case_id(c)}-{mode}" for c, mode in ENGINE_CASES])
def test_every_backend_agrees_with_the_reference(case, mode):
    name, p, m, options = case
    table = build_schedule(name, p, m, **options)
    rng = np.random.default_rng(zlib.crc32(f"{_case_id(case)}-{mode}".encode()))
    ran = {}
    # noise and float32 where p = 2 (their compiled scans are shared by every such table: the cost is the reference's)
    for kind in KINDS if p == 2 else [k for k in KINDS if k not in P2_KINDS]:
        costs = _costs(kind, table.n_stages, rng)
        noise = NOISE if kind in P2_KINDS else None
        nodes = _nodes(kind, p)
        want = _run(table, costs, mode, "reference", noise, worker_node=nodes)
        assert want.backend == "reference"
        results = {}
        for backend in backend_names():
            b = get_backend(backend)
            if backend == "reference" or b.supports(table, costs, mode, noise, cap=64, worker_node=nodes) is not None:
                continue
            got = results[backend] = _run(table, costs, mode, backend, noise, worker_node=nodes)
            assert got.backend == backend and got.t_sim.shape == want.t_sim.shape
            _within(got, want, b.tolerance.rtol, f"{backend} {kind}")
            ran.setdefault(backend, []).append(kind)
        for backend, got in results.items():
            twin = get_backend(backend).tolerance.exact_to
            if twin is None or twin not in results:
                continue
            _bits(got, results[twin], f"{backend} = {twin}, {kind}")
            if kind == "per_stage" and p == 2:  # and in float32
                _bits(_run(table, costs, mode, backend, noise, np.float32), _run(table, costs, mode, twin, noise, np.float32),
                      f"{backend} = {twin}, {kind}, float32")
            if kind == "noise_tiers":  # the tiers in float32 too
                _bits(_run(table, costs, mode, backend, noise, np.float32, nodes), _run(table, costs, mode, twin, noise, np.float32, nodes),
                      f"{backend} = {twin}, {kind}, float32")
    # every case is run by the scans unless its compiled form refuses the mode (ports: a send order the waves cannot keep)
    refused = get_backend("jax_scan").supports(table, _costs("grid", table.n_stages, rng), mode, None, cap=64)
    if refused is None:
        assert {"jax_scan", "native_scan"} <= set(ran), ran
        assert ("noise" in ran["jax_scan"]) == ("noise" in ran["native_scan"]) == (p == 2)
        assert all({"tiers", "profile"} <= set(ran[b]) for b in ("jax_scan", "native_scan")), ran
        assert ("noise_tiers" in ran["native_scan"]) == (p == 2)


def test_the_envelope_runs_two_tiers():
    """The envelope takes the tiers (not declining them): on the ``grid_tiers`` costs it runs most cases."""
    b = get_backend("envelope")
    ran = 0
    for case, mode in ENGINE_CASES:
        table = build_schedule(case[0], case[1], case[2], **case[3])
        costs = _costs("grid_tiers", table.n_stages, np.random.default_rng(0))
        ran += b.supports(table, costs, mode, None, cap=64, worker_node=_nodes("grid_tiers", case[1])) is None
    # the intra tier's features make some envelopes larger than on one tier: measured 57 of 72 within the cap
    assert ran >= 0.75 * len(ENGINE_CASES), (ran, len(ENGINE_CASES))


def test_the_envelope_runs_the_cost_model_s_grids():
    """The envelope must not pass the harness by declining: on the ``grid`` costs it runs most cases."""
    b = get_backend("envelope")
    ran = 0
    for case, mode in ENGINE_CASES:
        table = build_schedule(case[0], case[1], case[2], **case[3])
        ran += b.supports(table, _costs("grid", table.n_stages, np.random.default_rng(0)), mode, None, cap=64) is None
    assert ran >= 0.8 * len(ENGINE_CASES), (ran, len(ENGINE_CASES))


# ---------------------------------------------------------------------------------------------
# table-level implementations

SLOTS = [(1, 2), (1, 1), (2, 3)]
TABLE_CASES = [(slots, case) for case in CASES for slots in (SLOTS if case[1] <= 4 else SLOTS[:1])]


def _fields_equal(a, b, where: str) -> None:
    """Every field of two dataclasses (tables, programs) equal; arrays also in dtype and shape."""
    for f in dataclasses.fields(b):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(y, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f"{where}: {f.name}"
        else:
            assert x == y, f"{where}: {f.name}"


def _outcome(run):
    """``("ok", value)`` or ``("error", type, message)`` of ``run()``."""
    try:
        return ("ok", run())
    except (ValueError, NotImplementedError) as err:
        return ("error", type(err), str(err))


@pytest.mark.parametrize("slots, case", TABLE_CASES, ids=[f"f{s[0]}b{s[1]}-{_case_id(c)}" for s, c in TABLE_CASES])
def test_every_table_level_implementation_equals_its_reference(slots, case):
    name, p, m, options = case
    order = get_schedule(name).build_order(p, m, **resolve_options(name, options))
    ref_table = REALIZE(order, *slots, implementation=REFERENCE)
    for impl in REALIZE.names()[1:]:
        _fields_equal(REALIZE(order, *slots, implementation=impl), ref_table, f"realize {impl}")
    assert REALIZE.handles(order)  # every registered schedule's order is the array path's
    for impl in VALIDATE.names():
        VALIDATE(ref_table, implementation=impl)  # valid: no error from any
    assert VALIDATE.handles(ref_table)
    bad = dataclasses.replace(ref_table, micro=np.where(ref_table.micro == m - 1, m, ref_table.micro))  # out of range
    errors = {impl: _outcome(lambda: VALIDATE(bad, implementation=impl)) for impl in VALIDATE.names()}
    assert errors[REFERENCE][:2] == ("error", InvalidTableError) and len({e[1:] for e in errors.values()}) == 1, errors
    want = _outcome(lambda: PROGRAM(ref_table, implementation=REFERENCE))
    for impl in PROGRAM.names()[1:]:
        got = _outcome(lambda: PROGRAM(ref_table, implementation=impl))
        if want[0] == "ok":
            _fields_equal(got[1], want[1], f"compile_program {impl}")
        else:
            assert got == want


def test_the_checks_catch_a_backend_outside_its_tolerance():
    """The harness's comparisons can fail: a result off by a little more than the bound, or by one ulp
    where the bits must be equal, is caught."""
    table = build_schedule("1f1b", 2, 4)
    costs = _costs("per_stage", table.n_stages, np.random.default_rng(0))
    want = _run(table, costs, "contention", "reference", None)
    got = _run(table, costs, "contention", "jax_scan", None)
    _within(got, want, 1e-12, "as computed")
    off = dataclasses.replace(got, t_sim=got.t_sim * (1 + 3e-12))
    with pytest.raises(AssertionError):
        _within(off, want, 1e-12, "t_sim off")
    off = dataclasses.replace(got, comm_time=got.comm_time + 3e-12 * got.t_sim)
    with pytest.raises(AssertionError):
        _within(off, want, 1e-12, "comm_time off")
    with pytest.raises(AssertionError):
        _bits(dataclasses.replace(got, worker_finish=np.nextafter(got.worker_finish, np.inf)), got, "one ulp")
