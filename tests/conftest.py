"""Shared test helpers: small valid tables of every registered schedule."""

from __future__ import annotations

import pytest

from ppsweep import SCHEDULES, build_schedule
from ppsweep.tables.build import why_unsupported

#: (p, m) pairs tried for every schedule; unsupported ones are skipped.
SMALL_POINTS = [(2, 2), (2, 4), (3, 3), (4, 4), (4, 8), (6, 6), (8, 8), (8, 16)]


#: Schedules the engine-wide tests run (compiling a table per mode and method is what costs time):
#: the seed four and a split backward (ZB-H1); the pairs F&B and V placements
#: pairs F&B and mixed backwards. The others' engine runs are in tests/test_fb_engine.py.
ENGINE_SCHEDULES = ("gpipe", "1f1b", "chimera", "hanayo", "zb_h1")


def supported_cases(points=SMALL_POINTS, options_by_schedule=None, names=ENGINE_SCHEDULES):
    """``(name, p, m, options)`` for every schedule of ``names`` (default :data:`ENGINE_SCHEDULES`) at every supported point."""
    options_by_schedule = options_by_schedule or {}
    cases = []
    for name in sorted(n for n in SCHEDULES if n in names):
        for options in options_by_schedule.get(name, [{}]):
            for p, m in points:
                if why_unsupported(name, p, m, **options) is None:
                    cases.append((name, p, m, options))
    return cases


def case_id(case) -> str:
    name, p, m, options = case
    extra = "".join(f"-{k}={v}" for k, v in options.items())
    return f"{name}-p{p}-m{m}{extra}"


@pytest.fixture
def build():
    """``build(name, p, m, **options)``: a validated table."""
    return build_schedule


#: A small model and system whose sweeps run in seconds (the analysis and explorer tests).
SMALL_MODEL = {"layers": 16, "hidden": 1024, "heads": 16, "sequence": 1024, "vocab": 1000, "global_batch": 16}
SMALL_SYSTEM = {"peak_flops": 1e15, "memory_bandwidth": 3e12, "bandwidth": 5e10, "latency": 5e-7}


@pytest.fixture(scope="session")
def small_store(tmp_path_factory):
    """A finished store: gpipe, 1f1b, chimera × p {2, 4} × m {2, 6} (chimera invalid at p=4, m=6)
    × 9 bandwidths 1e8…1e12 × latencies {1e-7, 1e-5}; chimera wins at p=2, m=2 above a crossover bandwidth."""
    from ppsweep.sweep.runner import run_sweep
    from ppsweep.sweep.evaluate import SweepSpec

    path = tmp_path_factory.mktemp("small") / "small.zarr"
    spec = SweepSpec.from_config(
        {
            "name": "small",
            "schedules": ["gpipe", "1f1b", "chimera"],
            "p": [2, 4],
            "m": [2, 6],
            "bandwidth": {"start": 1e8, "stop": 1e12, "num": 9},
            "latency": [1e-7, 1e-5],
            "model": SMALL_MODEL,
            "system": SMALL_SYSTEM,
        }
    )
    run_sweep(spec, path, "", progress=False)
    return path


def mode_cover(cases, modes, full=lambda case: False, per_case=2):
    """``(case, mode)`` pairs covering ``cases`` × ``modes`` with fewer engine compilations.

    A case for which ``full(case)`` holds runs every mode; every other case runs ``per_case`` modes,
    rotating with its place among the cases of the same schedule and options (staggered by the
    variant's ordinal), so that each schedule and variant with two such cases still meets every
    mode, and each mode is met at every size (each mode at a table's shape
    is one JAX compilation, which is what these tests spend their time on).
    """
    pairs, seen = [], {}
    for case in cases:
        name, _, _, options = case
        if full(case):
            pairs += [(case, mode) for mode in modes]
            continue
        key = (name, tuple(sorted(options.items())))
        start = seen.setdefault(key, [len(seen), 0])  # the variant's ordinal staggers the rotation
        k = start[0] + start[1]
        start[1] += 1
        pairs += [(case, mode) for mode in rotated_modes(modes, k, per_case)]
    return pairs


def rotated_modes(modes, k: int, n: int = 2) -> list[str]:
    """The ``k``-th of a rotation of ``n`` modes each: ``modes[k]``, then evenly spaced ones; any
    ``len(modes) // n`` consecutive values of ``k`` together give every mode."""
    step = max(1, len(modes) // n)
    return [modes[(k + j * step) % len(modes)] for j in range(n)]


def cover_ids(pairs) -> list[str]:
    """Test ids of :func:`mode_cover`'s pairs: ``case_id-mode``."""
    return [f"{case_id(case)}-{mode}" for case, mode in pairs]
