"""The engine with noise: against the reference simulator on the engine's own draws, and sanity rules."""

from __future__ import annotations

import numpy as np
import pytest


from ppsweep import build_schedule
from ppsweep.engine.core import MODES, simulate
from ppsweep.engine.noise import NoiseConfig

T_F = np.array([1.0e-3, 1.3e-3, 0.8e-3, 1.1e-3])  # per stage (S = 4 for p = 4, one stage per worker)
MSG = 4.0e6
NOISE = NoiseConfig.from_mapping(
    {"samples": 3, "seed": 5, "compute": {"dist": "lognormal", "cv": 0.15}, "message": {"dist": "normal", "cv": 0.3},
     "straggler": {"prob": 0.3, "slowdown": 2.0}}
)


def _stage_times(table):
    S = table.n_stages
    t_f = np.resize(T_F, S)
    return t_f, 2.1 * t_f


@pytest.mark.parametrize("mode", MODES)
def test_straggler_with_probability_one_is_that_worker_slowed(mode):
    table = build_schedule("1f1b", 4, 8)  # worker w runs stage w
    t_f, t_b = _stage_times(table)
    noise = NoiseConfig.from_mapping({"samples": 2, "straggler": {"prob": 1.0, "slowdown": 2.5, "workers": [2]}})
    beta = np.array([1e9, 1e10, 1e11])
    r = simulate(table, t_f, t_b, 1e-6, beta, MSG, mode, noise=noise, backend="scan")
    slow = np.where(np.arange(4) == 2, 2.5, 1.0)
    plain = simulate(table, t_f * slow, t_b * slow, 1e-6, beta, MSG, mode, backend="scan")
    # equal up to rounding: the kernel multiplies by the factor where the plain run had the product
    # (XLA may fuse that multiply into an add)
    for k in range(2):
        np.testing.assert_allclose(r.t_sim[:, k], plain.t_sim, rtol=1e-13)
        np.testing.assert_allclose(r.comm_time[:, k], plain.comm_time, rtol=1e-12)
        np.testing.assert_allclose(r.worker_finish[:, k], plain.worker_finish, rtol=1e-13)
    np.testing.assert_allclose(r.compute_time[:, 0], plain.compute_time, rtol=1e-14)


def test_zero_noise_repeats_the_noise_free_results():
    table = build_schedule("gpipe", 4, 4)
    t_f, t_b = _stage_times(table)
    zero = NoiseConfig.from_mapping({"samples": 4, "compute": {"cv": 0.0}})
    r = simulate(table, t_f, t_b, 1e-6, np.array([1e9, 1e11]), MSG, "overlap", noise=zero)
    plain = simulate(table, t_f, t_b, 1e-6, np.array([1e9, 1e11]), MSG, "overlap")
    np.testing.assert_array_equal(r.t_sim, np.repeat(plain.t_sim[:, None], 4, axis=1))


def test_noisy_results_do_not_depend_on_tiling():
    table = build_schedule("hanayo", 4, 4)
    t_f, t_b = _stage_times(table)
    beta = np.logspace(9, 12, 37)
    whole = simulate(table, t_f, t_b, 1e-6, beta, MSG, "contention", noise=NOISE)
    small = simulate(table, t_f, t_b, 1e-6, beta, MSG, "contention", noise=NOISE, chunk=7)
    part = simulate(table, t_f, t_b, 1e-6, beta[20:23], MSG, "contention", noise=NOISE)
    np.testing.assert_array_equal(whole.t_sim, small.t_sim)
    np.testing.assert_array_equal(whole.t_sim[20:23], part.t_sim)


@pytest.mark.parametrize("name", ["gpipe", "1f1b", "chimera"])
def test_symmetric_jitter_does_not_lower_the_mean_step_time(name):
    # t_sim is a maximum of sums of durations, so E[t_sim] >= t_sim(E[durations]) (Jensen): the
    # sample mean may fall below only by sampling error; allowed: 3 standard errors.
    table = build_schedule(name, 4, 8)
    t_f, t_b = _stage_times(table)
    noise = NoiseConfig.from_mapping({"samples": 400, "compute": {"dist": "uniform", "cv": 0.2}, "message": {"dist": "uniform", "cv": 0.2}})
    beta = np.array([1e9, 3e10, 1e12])
    r = simulate(table, t_f, t_b, 2e-6, beta, MSG, "overlap", noise=noise)
    plain = simulate(table, t_f, t_b, 2e-6, beta, MSG, "overlap", backend="scan")
    mean = r.t_sim.mean(axis=1)
    se = r.t_sim.std(axis=1) / np.sqrt(noise.samples)
    assert np.all(mean >= plain.t_sim - 3 * se)
    assert np.all(mean > plain.t_sim)  # and with this much jitter it is strictly above
