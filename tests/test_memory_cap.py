"""The memory cap at its boundary: a point is valid while its bottleneck worker needs at most the cap.

Model of tests/test_costs_by_hand.py at p = 4, m = 8 (b = 4). By hand: 1F1B's worker 0 peaks at
4 microbatches × 2 layers × 1,627,389,952 B + 419,463,168 B persistent = 13,438,582,784 B; GPipe's
worker 0 holds all 8: 26,038,239,232 + 419,463,168 = 26,457,702,400 B.
"""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep.sweep.evaluate import SweepSpec, evaluate_unit

ONE_F_ONE_B = 13_438_582_784
GPIPE = 26_457_702_400


def unit(cap: float):
    spec = SweepSpec.from_config({
        "name": "cap", "schedules": ["gpipe", "1f1b"], "p": [4], "m": [8], "bandwidth": [1e10], "latency": [1e-6],
        "model": {"layers": 8, "hidden": 1024, "heads": 16, "sequence": 2048, "vocab": 1000, "global_batch": 32},
        "system": {"peak_flops": 1e15, "memory_bandwidth": 1e14, "bandwidth": 1e10, "latency": 1e-6,
                   "compute_efficiency": 0.5, "memory_capacity": cap},
    })
    return evaluate_unit(spec, 0, 0)


@pytest.mark.parametrize(
    "cap, valid",
    [
        (GPIPE, [True, True]),
        (GPIPE - 1, [False, True]),
        (ONE_F_ONE_B, [False, True]),
        (ONE_F_ONE_B - 1, [False, False]),
    ],
)
def test_cap_boundary(cap, valid):
    out = unit(float(cap))
    assert np.ravel(out["valid"]).tolist() == valid
    for k, ok in enumerate(valid):
        assert np.isfinite(np.ravel(out["t_sim"][k])).all() == ok
        if ok:
            assert float(np.ravel(out["peak_memory_bytes"][k])[0]) == [GPIPE, ONE_F_ONE_B][k]
        else:
            assert np.isnan(np.ravel(out["peak_memory_bytes"][k])).all()
