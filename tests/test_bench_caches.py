"""``scripts/bench.py``'s cold run starts from empty caches, numba's compiled kernels included.

numba keeps a kernel beside its source unless ``NUMBA_CACHE_DIR`` says otherwise, so a bench that
left numba alone measured a "cold" run with the kernels an earlier run in the same checkout had
compiled. A real run of a small sweep through the bench checks that its kernels land in the bench's
own cache directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench  # noqa: E402


def test_cold_run_compiles_numba_kernels_into_the_bench_caches(tmp_path: Path) -> None:
    caches = tmp_path / "caches"
    figures = bench.bench_sweep("bandwidth", ["schedules=[1f1b]", "p=[4]", "m=[8]", "engine.workers=1"], caches, "cold")
    assert figures["points"] == 64 * 5
    assert figures["probe"] > 0  # the speed probe taken just before the run
    # numba names each kernel's files after its module and function. In one evaluator a kernel is
    # compiled when first used: this sweep's envelopes take the walk's (its points need no scan).
    compiled = {path.name.split("-")[0] for path in (caches / "numba").rglob("*.nbi")}
    assert "native_envelope._waves" in compiled
    # its store is kept until the bench ends (no deletion between the bench's runs)
    assert list(bench._scratch_root().rglob("bandwidth.zarr"))


def test_design_repeats_take_the_median_of_each_kind_of_run(monkeypatch, capsys) -> None:
    # The design sweep takes minutes a run, so its runs are stood in for here: what is tested is the
    # bench's own bookkeeping (each kind of run's median, printed beside every run and its probe).
    walls = iter([(70.0, 40.0, 50.0), (55.0, 30.0, 45.0), (60.0, 35.0, 44.0)])

    def runs(name, extra, kernels_compiled=False):
        assert name == "design" and kernels_compiled
        return [{"wall": w, "probe": 1.0} for w in next(walls)]

    monkeypatch.setattr(bench, "bench_sweep_cold_warm", runs)
    assert bench.bench_design(3) == {"design": 60.0, "design_warm": 35.0, "design_kernels": 45.0}
    out = capsys.readouterr().out
    assert "cold: 70.0 (1.00), 55.0 (1.00), 60.0 (1.00); median 60.0 s" in out
    assert "warm: 40.0 (1.00), 30.0 (1.00), 35.0 (1.00); median 35.0 s" in out
