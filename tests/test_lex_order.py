"""lex_order gives np.lexsort's indices: packed keys, negative keys, ties, and the fall-backs."""

import numpy as np
import pytest

from ppsweep.lex_order import lex_order


@pytest.mark.parametrize("seed", range(5))
def test_random_keys_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = 5_000
    keys = (rng.integers(-3, 4, n), rng.integers(0, 50, n), np.sort(rng.integers(-1_000, 1_000, n)))
    np.testing.assert_array_equal(lex_order(*keys), np.lexsort(keys))


def test_bools_and_narrow_types():
    rng = np.random.default_rng(7)
    keys = (rng.integers(0, 2, 300).astype(bool), rng.integers(0, 100, 300).astype(np.int16),
            rng.integers(0, 7, 300).astype(np.uint8))
    np.testing.assert_array_equal(lex_order(*keys), np.lexsort(keys))


def test_ranges_too_wide_to_pack_fall_back():
    rng = np.random.default_rng(3)
    wide = rng.integers(-(1 << 40), 1 << 40, 1_000)
    keys = (wide, rng.integers(0, 1 << 30, 1_000), rng.integers(0, 4, 1_000))
    np.testing.assert_array_equal(lex_order(*keys), np.lexsort(keys))


def test_empty_and_single_key():
    assert lex_order(np.array([], dtype=np.int64)).size == 0
    a = np.array([3, 1, 2, 1, 3])
    np.testing.assert_array_equal(lex_order(a), np.lexsort((a,)))
