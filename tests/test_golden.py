"""The engine reproduces its golden results to the bit (``scripts/make_golden.py`` wrote them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _golden_module():
    spec = importlib.util.spec_from_file_location("make_golden", ROOT / "scripts" / "make_golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_engine_reproduces_golden_results_bit_for_bit():
    golden = _golden_module()
    with np.load(golden.GOLDEN) as stored:
        want = {k: stored[k] for k in stored.files}
    got = golden.compute()
    assert sorted(got) == sorted(want)
    differ = [k for k in want if not np.array_equal(got[k], want[k])]
    assert not differ, f"{len(differ)} arrays differ from the golden results, first: {differ[:3]}"
