"""The envelope's evaluation: box pruning (exact to the bit) and the tie-checking form."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep.engine import envelope as env_mod

N_BANDWIDTH, N_LATENCY = 24, 40


def grid_features() -> env_mod.Features:
    """A bandwidth × latency grid as the cost model gives it: a constant compute feature, latency, wire."""
    compute = np.array([[0.25]])
    alpha = np.logspace(-7, -1, N_LATENCY)[None, :]
    wire = np.logspace(-4, 0, N_BANDWIDTH)[:, None]
    return env_mod.Features(arrays=(compute, alpha, wire), weights=np.eye(3), comm=np.array([False, True, True]))


def envelope(vectors: np.ndarray, finish: tuple[np.ndarray, ...]) -> env_mod.Envelope:
    return env_mod.Envelope(t_sim=vectors, finish=finish, compute=np.array([40.0, 0.0, 0.0]),
                            comm=np.array([False, True, True]), depth=50, largest=vectors.shape[0])


def near_tie_vectors(rng: np.random.Generator, k: int, band: float, float32: bool) -> np.ndarray:
    """``k`` vectors whose values at the grid's points come within a few tie bands of each other,
    crossing over the grid (more compute, less communication), so that pruning decides close calls.

    The first two: the second is below the first by about half the tie band at every point, with
    a larger latency coefficient: never the maximum, always within the band, and its communication
    part is the larger, so it sets ``comm_time`` (and, in float64, flags points ambiguous) --
    a pruning that dropped it would change both.
    """
    base = np.array([100.0, 20.0, 20.0])
    shift = rng.uniform(-1.0, 1.0, (k, 1)) * np.array([1.0, -40.0, -10.0])  # trade compute for communication
    tiny = rng.choice([0.0, 1.0, 3.0, 10.0], (k, 1)) * band * 25.0 * rng.uniform(-1, 1, (k, 3))
    vectors = np.maximum(base + shift * rng.choice([0.0, 1e-3, 1e-9], (k, 1)) + tiny, 0.0)
    vectors[0] = base
    vectors[1] = base + np.array([-50.0 * band, 5e-5 if float32 else 1e-9, 0.0])  # compute 0.25: below by 12.5 band
    return vectors


def evaluate_both(env, feats, dtype, finish, monkeypatch):
    """The evaluation as it runs (pruned) and with every vector kept."""
    batch = (N_BANDWIDTH, N_LATENCY)
    tol = 1e-12 if dtype == np.float64 else 1e-6
    pruned = env_mod.evaluate(env, feats, batch, dtype, finish=finish, tie_rtol=tol)
    with monkeypatch.context() as m:
        # every pruning (the step-time vectors' and each worker's finish vectors') goes through _box_keep_each
        m.setattr(env_mod, "_box_keep_each", lambda sets, *args, **kwargs: [None] * len(sets))
        full = env_mod.evaluate(env, feats, batch, dtype, finish=finish, tie_rtol=tol)
    return pruned, full


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pruning_changes_no_bit(dtype, monkeypatch):
    # Vectors within a few tie bands of each other (and a few far below) on a grid: the pruned
    # evaluation equals the unpruned one in every output, ambiguous flags included.
    rng = np.random.default_rng(15)
    feats = grid_features()
    band = 50 * 1e-12 if dtype == np.float64 else 1e-6
    flagged = 0
    for trial in range(6):
        vectors = near_tie_vectors(rng, 8, band, dtype == np.float32)
        vectors[-1] *= 0.5  # far below every other: always dropped
        finish = (vectors[:4], vectors[2:] * 0.9)
        env = envelope(vectors, finish)
        pruned, full = evaluate_both(env, feats, dtype, trial % 2 == 0, monkeypatch)
        for field in ("t_sim", "comm_time", "ambiguous", "compute_time", "finish"):
            a, b = getattr(pruned, field), getattr(full, field)
            assert (a is None) == (b is None), field
            if a is not None:
                np.testing.assert_array_equal(a, b, err_msg=field)
        flagged += int(full.ambiguous.sum())
    assert flagged > 0  # the vectors do come within the tie band somewhere


def test_box_keep_drops_only_vectors_below_the_band():
    lo, hi = np.array([1.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0])
    band = 1e-9
    vectors = np.array([
        [10.0, 1.0, 1.0],  # the maximum everywhere
        [10.0, 1.0, 1.0 - 1e-12],  # within the band of it at every point: kept
        [9.0, 1.0, 1.0],  # below by 1 everywhere: dropped
        [9.0, 3.0, 0.0],  # the maximum where latency is large: kept
        [10.0 - 1e-7, 1.0, 1.0],  # below by 1e-7 > (band + margin) · top = 1.2e-8 everywhere: dropped
    ])
    keep = env_mod._box_keep(vectors, lo, hi, band)
    assert keep.tolist() == [True, True, False, True, False]
    # in float32 (margin 8·(J+2)·eps ≈ 4.8e-6 relative; 10 - 1e-7 rounds to 10) the 1e-7 gap is kept
    assert env_mod._box_keep(vectors, lo, hi, band, np.float32).tolist() == [True, True, False, True, True]
    # an infinite bound decides nothing
    assert env_mod._box_keep(vectors, lo, np.array([1.0, np.inf, 1.0]), band).all()


def box_rule(vectors, lo, hi, band, dtype, margin):
    """The rule of ``_box_keep`` written plainly for one set: row k is dropped where another row i
    exceeds it by more than ``(band + margin) · top`` at every point of the box."""
    rows = vectors.astype(dtype).astype(np.float64)
    keep = np.ones(rows.shape[0], dtype=bool)
    with np.errstate(invalid="ignore", over="ignore"):
        sums = [float(np.maximum(np.abs(r * lo), np.abs(r * hi)).sum()) for r in rows]
        top = float("nan") if any(np.isnan(sums)) else max(sums, default=0.0)  # NaN spreads, as numpy's max
        rounding = 8.0 * (rows.shape[1] + 2) * float(np.finfo(dtype).eps) if margin else 0.0
        for k in range(rows.shape[0]):
            for i in range(rows.shape[0]):
                d = rows[i] - rows[k]
                if np.minimum(d * lo, d * hi).sum() > (band + rounding) * top:
                    keep[k] = False
    return keep


@pytest.mark.parametrize("elements", [None, 200])
def test_box_keep_each_gives_every_set_its_own_rule(elements, monkeypatch):
    # Sets of 0 to 13 rows stacked together (as the workers' finish vectors are): each set's mask is
    # the rule on that set alone, however the others pad it; near ties, zeros, negative rows,
    # infinite bounds, float32 and no margin included; with a small limit, stacked a few at a time.
    if elements is not None:
        monkeypatch.setattr(env_mod, "_BOX_KEEP_ELEMENTS", elements)
    rng = np.random.default_rng(30)
    compared = dropped = 0
    for trial in range(300):
        J = int(rng.choice([1, 3, 5, 9]))
        sets = []
        for _ in range(int(rng.integers(1, 10))):
            v = rng.random((int(rng.integers(0, 14)), J)) * 10.0 ** rng.integers(-3, 3, size=(1, J))
            v[rng.random(v.shape) < 0.2] = 0.0
            if v.shape[0] > 1 and rng.random() < 0.3:
                v[1] = v[0] * (1 + 1e-15)
            sets.append(-v if rng.random() < 0.1 else v)
        lo = rng.random(J) * 10.0 ** rng.integers(-9, 0, size=J)
        hi = lo * (1 + rng.random(J) * rng.choice([0.0, 1.0, 100.0], size=J))
        if rng.random() < 0.05:
            hi[rng.integers(J)] = np.inf
        band, dtype, margin = float(rng.choice([0.0, 1e-12, 1e-3, 0.2])), rng.choice([np.float64, np.float32]), rng.random() < 0.8
        for v, keep in zip(sets, env_mod._box_keep_each(tuple(sets), lo, hi, band, dtype, margin)):
            keep = np.ones(v.shape[0], dtype=bool) if keep is None else keep  # None: a set kept whole
            assert keep.tolist() == box_rule(v, lo, hi, band, dtype, margin).tolist()
            compared += 1
            dropped += int((~keep).sum())
    assert compared > 1000 and dropped > 100  # the rule did drop rows


def test_tie_form_follows_the_vectors_kept():
    comm = np.array([False, True, True])
    one_comm = np.array([[10.0, 1.0, 1.0], [9.0, 1.0, 1.0]])  # same communication part
    two_comm = np.array([[10.0, 1.0, 1.0], [9.0, 2.0, 1.0]])
    assert not env_mod._tie_form(one_comm, comm)
    assert not env_mod._tie_form(two_comm[:1], comm)
    assert env_mod._tie_form(two_comm, comm)
