"""The scan's tiles: results are the same to the bit whatever the tile size, with and without noise."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep import build_schedule
from ppsweep.engine import core
from ppsweep.engine.compiled import compiled_for
from ppsweep.engine.core import MODES, simulate
from ppsweep.engine.noise import NoiseConfig
from ppsweep.engine.program import n_duration_rows

NOISE = NoiseConfig.from_mapping(
    {"samples": 3, "seed": 9, "compute": {"dist": "lognormal", "cv": 0.2}, "message": {"dist": "normal", "cv": 0.3},
     "straggler": {"prob": 0.3, "slowdown": 1.5}}
)
FIELDS = ("t_sim", "comm_time", "compute_time", "worker_finish")

#: A schedule with replicated stages (synchronisations), one with a split backward, one with
#: overlapped pairs F&B, and the plain one; each in one mode, every mode met once.
CASES = [("chimera", 4, 4, "overlap"), ("zb_h1", 4, 8, "blocking"), ("dualpipe", 4, 8, "ports"), ("1f1b", 4, 6, "contention")]


def _grid(table, n: int, seed: int = 0):
    """Random per-stage and per-point costs at ``n`` points (messages from far above compute to far below)."""
    rng = np.random.default_rng(seed)
    S = table.n_stages
    t_f = rng.uniform(1e-4, 2e-3, (n, S))
    costs = dict(t_f=t_f, t_b=t_f * rng.uniform(1.5, 2.5, (n, S)), alpha=rng.uniform(1e-7, 1e-4, n),
                 beta=10 ** rng.uniform(8, 12, n), msg_bytes=rng.uniform(1e5, 1e8, n))
    options = dict(grad_bytes=rng.uniform(0, 1e9, (n, S)), t_opt=rng.choice([0.0, 1e-4], n), fb_overlap=rng.uniform(0, 1, n))
    return costs, options


def _run(table, costs, options, mode, backend="scan", **kw):
    return simulate(table, costs["t_f"], costs["t_b"], costs["alpha"], costs["beta"], costs["msg_bytes"], mode,
                    backend=backend, **options, **kw)


def _assert_same_bits(a, b):
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


@pytest.mark.parametrize("backend", ["jax_scan", "native_scan"])
@pytest.mark.parametrize("name, p, m, mode", CASES)
def test_noisy_results_are_the_same_bits_whatever_the_tile(name, p, m, mode, backend):
    # tiles of the largest size and of 6 points (JAX: two groups of 3 samples; the compiled loop:
    # 7 points, groups cut across tiles); and a slice of the grid on its own
    table = build_schedule(name, p, m)
    costs, options = _grid(table, 90)
    whole = _run(table, costs, options, mode, backend, noise=NOISE)
    assert whole.t_sim.shape == (90, 3)
    _assert_same_bits(whole, _run(table, costs, options, mode, backend, noise=NOISE, chunk=7))
    part = _run(table, {k: v[40:47] for k, v in costs.items()}, {k: v[40:47] for k, v in options.items()}, mode, backend,
                noise=NOISE, chunk=7)
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(whole, field)[40:47], getattr(part, field), err_msg=field)
    # the samples really differ (the noise is on)
    assert np.ptp(whole.t_sim, axis=1).max() > 0


@pytest.mark.parametrize("implementation", ["jax", "native"])
@pytest.mark.parametrize("name, p, m, mode", CASES)
def test_noise_free_results_are_the_same_bits_whatever_the_tile(name, p, m, mode, implementation, monkeypatch):
    backend = f"{implementation}_scan"
    table = build_schedule(name, p, m)
    costs, options = _grid(table, 600, seed=1)
    whole = _run(table, costs, options, mode, backend)  # tiles by the tile rule
    monkeypatch.setattr(core, "TILE_BYTES", 0)  # the smallest tiles (JAX 256 points, native 64), whatever the table
    _assert_same_bits(whole, _run(table, costs, options, mode, backend))


def test_tile_rule_keeps_a_tile_s_rows_within_the_budget():
    # p=8, m=32: tables whose carried state and duration table differ in size
    rows_and_tiles = []
    for name in ("gpipe", "chimera", "hanayo", "dualpipe"):
        table = build_schedule(name, 8, 32)
        for mode in MODES:
            shape = compiled_for(table).lanes(mode).shape
            state = shape.p + shape.n_regs + 2 + shape.n_resources + 1 + shape.n_sync * shape.p + 1
            rows = 2 * state + n_duration_rows(table.n_stages)
            tile = core._tile_points(shape, n_duration_rows(table.n_stages), 0)
            assert tile >= 256 and tile & (tile - 1) == 0  # a power of two, at least 256
            assert tile == 256 or tile * rows * 8 <= core.TILE_BYTES  # fits, unless the smallest
            assert 2 * tile * rows * 8 > core.TILE_BYTES  # and is the largest that fits
            rows_and_tiles.append((rows, tile))
            # with noise: the duration table is one column per group of samples, and a block of
            # waves' products (three rows per lane and wave) joins the rows
            noisy_rows = 2 * state + n_duration_rows(table.n_stages) / 64 + 3 * shape.p * core.NOISY_BLOCK
            noisy = core._tile_points(shape, n_duration_rows(table.n_stages), 64)
            assert noisy >= 256 and noisy & (noisy - 1) == 0
            assert noisy == 256 or noisy * noisy_rows * 8 <= core.TILE_BYTES
    # tables with more rows get tiles no larger
    rows_and_tiles.sort()
    tiles = [t for _, t in rows_and_tiles]
    assert tiles == sorted(tiles, reverse=True)
    assert tiles[0] > tiles[-1]


@pytest.mark.parametrize("name, p, m", [("gpipe", 4, 4), ("zb_h1", 4, 8), ("1f1b", 4, 40)])  # 1f1b: two blocks of waves
def test_noisy_products_are_rounded_on_their_own(name, p, m):
    # The reference simulator multiplies each duration and message time by its factor in Python
    # (each product rounded on its own), then adds. The scan must do the same to the bit: a
    # multiply fused into the add that consumes it (one rounding instead of two) changes last bits.
    from ppsweep.engine.noise import op_factors, op_identities, reference_inputs
    from ppsweep.engine.reference import reference_simulate
    from ppsweep.tables.ops import Kind

    table = build_schedule(name, p, m)
    t_f = np.resize(np.array([1.0e-3, 1.3e-3, 0.8e-3, 1.1e-3]), table.n_stages)
    t_b = 2.1 * t_f
    beta, alpha, msg = np.array([1e8, 2e9, 5e10]), 3e-6, 4e6
    f = op_factors(NOISE, op_identities(table), table.p, np.arange(NOISE.samples))
    durations = {Kind.F: t_f, Kind.B: t_b, Kind.I: t_b / 2, Kind.W: t_b / 2}
    for mode in ("overlap", "contention"):
        r = simulate(table, t_f, t_b, alpha, beta, msg, mode, noise=NOISE, backend="scan")
        for b, bw in enumerate(beta):
            for k in range(NOISE.samples):
                ops, msgs = reference_inputs(table, f, k, durations, alpha, msg / bw)
                ref = reference_simulate(table, t_f, t_b, alpha, bw, msg, mode, op_durations=ops, message_times=msgs)
                assert r.t_sim[b, k] == ref.t_sim
                np.testing.assert_array_equal(r.worker_finish[b, k], ref.worker_finish)


@pytest.mark.parametrize("mode", MODES)
def test_tables_of_any_length_share_one_compiled_block_of_waves(mode, monkeypatch):
    # 1F1B at p=4 with m = 8, 40, 72: one, two and four blocks of WAVE_BLOCK waves; every
    # block's waves run by the same compiled kernel, and the results follow the reference
    # simulator across the blocks' seams.
    from ppsweep.engine.compiled import WAVE_BLOCK
    from ppsweep.engine.jax_scan import _scan_waves
    from ppsweep.engine.reference import reference_simulate

    tables = [build_schedule("1f1b", 4, m) for m in (8, 40, 72)]
    blocks = [len(compiled_for(t).lanes(mode).blocks) for t in tables]
    waves = [compiled_for(t).program.n_waves for t in tables]
    assert blocks == [-(-w // WAVE_BLOCK) for w in waves] == [1, 2, 4]
    kernels = []
    for table in tables:
        costs, options = _grid(table, 5, seed=3)
        got = _run(table, costs, options, mode, "jax_scan")  # the JAX scan's compiled blocks
        kernels.append(_scan_waves._cache_size())
        for i in range(5):
            want = reference_simulate(table, costs["t_f"][i], costs["t_b"][i], costs["alpha"][i], costs["beta"][i],
                                      costs["msg_bytes"][i], mode, grad_bytes=options["grad_bytes"][i], t_opt=options["t_opt"][i],
                                      fb_overlap=options["fb_overlap"][i])
            assert got.t_sim[i] == pytest.approx(want.t_sim, rel=1e-12)
            np.testing.assert_allclose(got.worker_finish[i], want.worker_finish, rtol=1e-12)
    assert kernels[0] == kernels[1] == kernels[2] > 0  # no new compilation for the longer tables
