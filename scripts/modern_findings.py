"""Print the figures the README quotes from the modern sweep's store.

Usage::

    python -m ppsweep +sweep=modern results_dir=/tmp/modern      # writes /tmp/modern/modern.zarr
    python scripts/modern_findings.py /tmp/modern/modern.zarr

Prints: the share of grid points each schedule wins (sim rank 1; ties count for each), overall and
per communication mode and p; the step time of each schedule relative to the best at its point
(median over the points where it is valid); each schedule's bottleneck-worker memory relative to
1F1B; and how often the formula and table winners flip against the simulation.
"""

from __future__ import annotations

import sys

import numpy as np
import xarray as xr

from ppsweep import analysis


def main(path: str) -> None:
    ds = xr.open_zarr(path)
    names = [str(s) for s in ds.schedule.values]
    wins = ds.rank_sim == 1
    points = ds.t_sim.isel(schedule=0).size
    print(f"{points} grid points (p x m x comm x bandwidth x latency), {len(names)} schedules")
    print("\nshare of points won (sim rank 1):")
    share = wins.sum([d for d in wins.dims if d != "schedule"]).values / points
    for name, value in sorted(zip(names, share), key=lambda x: -x[1]):
        print(f"  {name:22s} {100 * value:5.1f} %")
    for dim in ("comm", "p"):
        print(f"\nshare won per {dim}:")
        per = wins.sum([d for d in wins.dims if d not in ("schedule", dim)]) / (points / ds.sizes[dim])
        for name in names:
            row = per.sel(schedule=name).values
            if row.max() > 0:
                print(f"  {name:22s} " + " ".join(f"{v}={100 * x:5.1f}%" for v, x in zip(ds[dim].values, row)))
    best = ds.t_sim.min("schedule")
    print("\nstep time / best at the point (median over valid points; max):")
    ratio = ds.t_sim / best
    for name in names:
        r = ratio.sel(schedule=name).values
        r = r[np.isfinite(r)]
        if r.size:
            print(f"  {name:22s} median {np.median(r):.3f}  max {r.max():.3f}  (valid at {r.size} points)")
    print("\nbottleneck-worker memory / 1F1B's, and activations / 1F1B's (median over (p, m) where valid):")
    mem = ds.peak_memory_bytes / ds.peak_memory_bytes.sel(schedule="1f1b")
    act = ds.peak_activation_bytes / ds.peak_activation_bytes.sel(schedule="1f1b")
    for name in names:
        m_, a_ = mem.sel(schedule=name).values, act.sel(schedule=name).values
        ok = np.isfinite(m_)
        if ok.any():
            print(f"  {name:22s} memory {np.median(m_[ok]):.2f}  activations {np.median(a_[ok]):.2f}")
    st = analysis.stability(ds)
    overall = analysis.summarize(st, by=())
    print("\nwinner flips against the simulation (share of points):")
    for x in ("formula", "table"):
        print(f"  {x:8s} flip {100 * float(overall[f'share_disagree_{x}']):.1f} %, winners differ "
              f"{100 * float(overall[f'share_differ_{x}']):.1f} %, order differs {100 * float(overall[f'share_reordered_{x}']):.1f} %")
    by_comm = analysis.summarize(st, by=("comm",))
    for x in ("formula", "table"):
        values = " ".join(f"{c}={100 * float(v):.1f}%" for c, v in zip(by_comm.comm.values, by_comm[f"share_disagree_{x}"].values))
        print(f"  {x} flips per comm: {values}")


if __name__ == "__main__":
    main(sys.argv[1])
