"""The searched schedule's Gantt chart next to the best hand-made one's (one figure, two panels).

Each panel is :func:`ppsweep.viz.plots.plot_step_gantt` of one step simulated by the reference
simulator at the region's first point (noise-free), drawn to its own file and stacked here.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ppsweep.search.region import Region


def _record(label: str, p: int, m: int, region: Region):
    from ppsweep.engine.reference import reference_simulate
    from ppsweep.tables.build import build_schedule

    table = build_schedule(label, p, m)
    costs = region.table_costs(table)
    first = (0,) * (len(costs.batch) or 1)
    at = costs.at(tuple(np.array([i]) for i in first), table.n_stages)
    return reference_simulate(table, at.t_f[0], at.t_b[0], float(at.alpha[0]), float(at.beta[0]), float(at.msg_bytes[0]),
                              region.mode, t_i=at.t_i[0], t_w=at.t_w[0], t_opt=float(at.t_opt[0]), record=True).record


def plot_searched_vs_hand_made(searched: str, hand_made: str, p: int, m: int, region: Region, path: str | os.PathLike,
                               titles: tuple[str, str] | None = None) -> Path:
    """Draw the two steps one above the other into ``path`` (PNG); returns the path.

    Args:
      searched, hand_made: schedule labels. p, m: workers, microbatches. region: the costs (its first point).
      path: the PNG to write. titles: the panels' titles (default: the labels).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ppsweep.viz.plots import plot_step_gantt

    titles = titles or (f"searched: {searched}", f"hand-made: {hand_made}")
    with tempfile.TemporaryDirectory() as scratch:
        images = []
        for k, (label, title) in enumerate(zip((searched, hand_made), titles)):
            png = plot_step_gantt(_record(label, p, m, region), Path(scratch) / f"{k}.png", title=title)
            images.append(plt.imread(png))
        width = max(im.shape[1] for im in images)
        fig, axes = plt.subplots(2, 1, figsize=(width / 100, sum(im.shape[0] for im in images) / 100), dpi=100)
        for ax, im in zip(axes, images):
            ax.imshow(im)
            ax.axis("off")
        fig.subplots_adjust(0, 0, 1, 1, 0, 0.02)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
        plt.close(fig)
    return path
