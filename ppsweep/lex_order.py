"""The order :func:`numpy.lexsort` gives integer keys, from one stable sort of a combined key.

Tables, programs and routings order their steps by several integer keys (wave, round, worker; port,
position): ``np.lexsort`` sorts once per key, and on the design sweep's largest tables (half a
million steps) that was a third of building a table's scan steps. Packing the keys into one int64
(each key's offset from its least value, times the product of the ranges of the keys before it)
gives the same order from one stable sort: 2-3x faster, and the same indices (both sorts are
stable, and equal combined keys are equal keys).
"""

from __future__ import annotations

import numpy as np

#: Largest product of the keys' ranges packed into one int64 (beyond it: ``np.lexsort``).
_PACKED_LIMIT = 1 << 62


def lex_order(*keys: np.ndarray) -> np.ndarray:
    """``np.lexsort(keys)``: indices sorting by the last key, then the one before it, and so on.

    Args:
      keys: integer arrays of one shape (1-D), least significant first, as ``np.lexsort`` takes them.

    Returns:
      The indices, equal to ``np.lexsort(keys)``.
    """
    arrays = [np.asarray(k) for k in keys]
    if not arrays or arrays[0].size == 0 or any(a.dtype.kind not in "iub" for a in arrays):
        return np.lexsort(arrays)
    packed = np.zeros(arrays[0].shape, dtype=np.int64)
    scale = 1
    for a in arrays:
        least, most = int(a.min()), int(a.max())
        if scale * (most - least + 1) >= _PACKED_LIMIT:
            return np.lexsort(arrays)
        packed += (a.astype(np.int64) - least) * scale
        scale *= most - least + 1
    return np.argsort(packed, kind="stable")
