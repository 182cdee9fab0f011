"""The noise config and its counter-based draws (ppsweep.engine.noise)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppsweep import build_schedule
from ppsweep.engine.noise import Jitter, NoiseConfig, op_factors, op_identities, straggler_factors, uniforms


def test_config_defaults_off_and_round_trip():
    assert not NoiseConfig.from_mapping(None).enabled
    cfg = {"samples": 8, "seed": 7, "compute": {"dist": "normal", "cv": 0.05}, "message": {"dist": "uniform", "cv": 0.1},
           "straggler": {"prob": 0.01, "slowdown": 2.0}}
    noise = NoiseConfig.from_mapping(cfg)
    assert noise.enabled and not noise.is_zero
    assert NoiseConfig.from_mapping(noise.to_mapping()) == noise
    assert NoiseConfig.from_mapping({"samples": 3, "straggler": {"prob": 0.5}}).is_zero  # slowdown 1


@pytest.mark.parametrize(
    "cfg, message",
    [
        ({"samples": -1}, "noise.samples: must be an integer >= 0"),
        ({"samples": 2.5}, "noise.samples: must be an integer >= 0"),
        ({"seed": 2**32}, "noise.seed: must be < 2\\*\\*32"),
        ({"jitter": 1}, "noise: unknown key 'jitter'; accepted: samples, seed, compute, message, straggler"),
        ({"compute": {"dist": "gamma", "cv": 0.1}}, "noise.compute.dist: unknown distribution 'gamma'; accepted: normal, uniform, lognormal"),
        ({"compute": {"cv": -0.1}}, r"noise.compute.cv: must be in \[0, 10\]"),
        ({"message": {"dist": "uniform", "cv": 0.6}}, "noise.message.cv: a uniform jitter needs cv <= 1/sqrt"),
        ({"message": {"sigma": 1}}, "noise.message: unknown key 'sigma'; accepted: dist, cv"),
        ({"straggler": {"prob": 1.5}}, "noise.straggler.prob: must be in \\[0, 1\\]"),
        ({"straggler": {"slowdown": 0.5}}, r"noise.straggler.slowdown: must be in \[1, 1000\]"),
        ({"straggler": {"prob": "often"}}, "noise.straggler.prob: must be a number"),
        ("on", "noise: must be a mapping"),
    ],
)
def test_config_errors_name_the_field(cfg, message):
    with pytest.raises(ValueError, match=message):
        NoiseConfig.from_mapping(cfg)


def test_uniforms_are_the_documented_jax_random_chain():
    import jax
    import jax.numpy as jnp

    ids = np.array([[0, 3, 5, 1, 2], [1, 0, 0, 4, 7]])
    got = uniforms(11, ids, np.array([0, 9]))
    for i, row in enumerate(ids):
        key = jax.random.key(11, impl="threefry2x32")
        for v in row:
            key = jax.random.fold_in(key, int(v))
        for j, sample in enumerate([0, 9]):
            bits = np.asarray(jax.random.bits(jax.random.fold_in(key, sample), (2,), jnp.uint32), dtype=np.float64)
            np.testing.assert_array_equal(got[j, i], (bits + 0.5) / 2**32)


def test_draws_do_not_depend_on_how_the_work_is_cut():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, size=(300, 5))
    samples = np.arange(40)
    whole = uniforms(5, ids, samples)
    perm = rng.permutation(300)
    np.testing.assert_array_equal(uniforms(5, ids[perm], samples[25:31]), whole[25:31][:, perm])
    np.testing.assert_array_equal(uniforms(5, ids[:1], samples[7:8]), whole[7:8, :1])
    assert not np.array_equal(uniforms(6, ids, samples), whole)


def test_common_random_numbers_across_schedules():
    noise = NoiseConfig.from_mapping({"samples": 4, "compute": {"cv": 0.1}, "message": {"cv": 0.1}})
    samples = np.arange(4)
    a, b = build_schedule("gpipe", 4, 8), build_schedule("1f1b", 4, 8)
    ia, ib = op_identities(a), op_identities(b)
    fa, fb = op_factors(noise, ia, 4, samples), op_factors(noise, ib, 4, samples)
    # the same (worker, microbatch, kind, stage) runs in both (at different slots): same factors
    order_b = {tuple(r): k for k, r in enumerate(ib.tolist())}
    assert len(order_b) == len(ia)
    k_b = [order_b[tuple(r)] for r in ia.tolist()]
    np.testing.assert_array_equal(fa.compute, fb.compute[:, k_b])
    np.testing.assert_array_equal(fa.message, fb.message[:, k_b])
    # but compute and message factors are independent streams
    assert not np.array_equal(fa.compute, fa.message)


@pytest.mark.parametrize("dist", ["normal", "uniform", "lognormal"])
def test_jitter_has_mean_one_and_the_asked_cv(dist):
    u = uniforms(1, np.array([[0, 1, 2, 3, 4]]), np.arange(20000))[:, 0]
    x = Jitter(dist, 0.2).factor(u[:, 0], u[:, 1])
    # 20,000 draws: the standard error of the mean is 0.2/sqrt(20000) = 0.0014; allow 4 of them
    assert abs(x.mean() - 1) < 0.006
    assert abs(x.std() / x.mean() - 0.2) < 0.01
    assert x.min() >= 0
    if dist == "uniform":
        assert x.max() <= 1 + 0.2 * math.sqrt(3)


def test_straggler_probability_and_factor():
    noise = NoiseConfig.from_mapping({"samples": 1, "straggler": {"prob": 0.25, "slowdown": 3.0}})
    s = straggler_factors(noise, 8, np.arange(5000))
    assert set(np.unique(s)) == {1.0, 3.0}
    share = np.mean(s == 3.0)  # 40,000 Bernoulli(0.25): standard error 0.0022
    assert abs(share - 0.25) < 0.01
    always = NoiseConfig.from_mapping({"samples": 1, "straggler": {"prob": 1.0, "slowdown": 2.0}})
    np.testing.assert_array_equal(straggler_factors(always, 4, np.arange(3)), 2.0)
    f = op_factors(always, op_identities(build_schedule("1f1b", 4, 4)), 4, np.arange(3))
    np.testing.assert_array_equal(f.compute, 2.0)
    np.testing.assert_array_equal(f.message, 1.0)
