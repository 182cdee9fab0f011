"""The zero-bubble paper's tables from its own inputs (Qi et al., ICLR 2024, arXiv 2401.10241).

The paper publishes measured ``T_F``, ``T_B``, ``T_W``, ``T_comm`` (its Table 9), the bubble rates
they give (Table 5) and measured throughput (Table 4); ``ppsweep/data/zero_bubble_qi2024.yaml``
holds them with their source. This module runs ppsweep's schedules on those inputs:

- every stage costs ``t_f = T_F``, ``t_i = T_B``, ``t_w = T_W`` (1F1B's full backward
  ``T_B + T_W``); messages take ``T_comm`` per hop (``overlap``, ``alpha = T_comm``,
  ``beta = inf``); no optimizer time;
- the paper's bubble rate is ``(cost - m(T_F+T_B+T_W)) / cost`` with cost "the largest execution
  time of all stages": the post-validated step
  (:func:`ppsweep.engine.reference.post_validated_step`, the longest worker span), which is also
  ppsweep's isolated step ``t_sim`` for 1F1B and ZB-H1;
- a measured throughput ratio X/1F1B is held against ``cost(1F1B) / cost(Y)`` for the ppsweep
  schedule ``Y`` with X's activation memory: ZB-1p (memory ``p·M_B``) against ZB-H1, ZB-2p
  (``2p·M_B``) against ZB-H2 (``(2p-1)·M_B``); and against the ratio the paper's own Table 5
  bubble rates give, ``(1 - bubble(X)) / (1 - bubble(1F1B))``.

``python scripts/zero_bubble_paper.py`` prints the tables; ``tests/test_zero_bubble_paper.py``
checks Table 5's 1F1B, ZB-H1 and ZB-H2 columns to 4 decimals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

from ppsweep.engine.reference import post_validated_step, reference_simulate
from ppsweep.schedules.variants import split_label
from ppsweep.tables.build import build_schedule

#: The published tables.
DATA = Path(__file__).resolve().parents[1] / "data" / "zero_bubble_qi2024.yaml"

#: ppsweep schedule evaluated for each of the paper's Table 5 columns it has (reproduced to 4 decimals).
SCHEDULES = {"1f1b": "1f1b", "zb_h1": "zb_h1", "zb_h2": "zb_h2"}

#: More columns the script prints: ppsweep's former ZB-H2 order, and Megatron's interleaved 1F1B
#: (1F1B-I, one chunk per layer: ``(layers + 2) / p`` chunks per stage, each ``1/v`` of the stage's times).
EXTRA = {"zb_h2@lag=1": "zb_h2@lag=1", "1f1b_i": "interleaved_1f1b"}

#: Measured schedule of Table 4 -> the ppsweep schedule with its activation memory.
PROXIES = {"zb_1p": "zb_h1", "zb_2p": "zb_h2"}

#: With the extra columns: Megatron's 1F1B-I, measured, against ppsweep's interleaved 1F1B.
EXTRA_PROXIES = {"1f1b_i": "1f1b_i"}


@dataclass(frozen=True)
class Setting:
    """One row of the paper's Table 9 (inputs), with its Table 5 and Table 4 entries.

    Attributes:
      model: model name (``"1.5B"``). layers: transformer layers (Table 3). p: stages (GPUs).
        b: microbatch size. m: microbatches.
      t_f, t_b, t_w, t_comm: the profiled times (the paper's unit, unstated).
      bubble: Table 5's bubble rate by column (``"1f1b"``, ``"zb_h2"``, ...).
      throughput: Table 4's samples per GPU per second by column (``"zb_2p"``, ``"1f1b"``, ...).
    """

    model: str
    layers: int
    p: int
    b: int
    m: int
    t_f: float
    t_b: float
    t_w: float
    t_comm: float
    bubble: dict[str, float]
    throughput: dict[str, float]

    @property
    def busy(self) -> float:
        """``m(T_F+T_B+T_W)``: one worker's compute in a step."""
        return self.m * (self.t_f + self.t_b + self.t_w)


@lru_cache(maxsize=1)
def settings(path: Path = DATA) -> tuple[Setting, ...]:
    """The paper's twelve settings, in Table 9's order."""
    data = yaml.safe_load(Path(path).read_text())
    table, bubble, throughput = data["settings"], data["bubble_rate"], data["throughput"]
    rows = []
    for k, row in enumerate(table["rows"]):
        fields = dict(zip(table["columns"], row))
        rows.append(Setting(
            model=str(fields["model"]), layers=int(fields["layers"]), p=int(fields["p"]), b=int(fields["b"]), m=int(fields["m"]),
            t_f=float(fields["t_f"]), t_b=float(fields["t_b"]), t_w=float(fields["t_w"]), t_comm=float(fields["t_comm"]),
            bubble=dict(zip(bubble["columns"], map(float, bubble["rows"][k]))),
            throughput=dict(zip(throughput["columns"], map(float, throughput["rows"][k]))),
        ))
    return tuple(rows)


@dataclass(frozen=True)
class Step:
    """One schedule at one setting: the isolated step ``t_sim`` and the post-validated step."""

    t_sim: float
    post_validated: float


def step(label: str, s: Setting) -> Step:
    """Simulate ``label`` (a ppsweep schedule, ``name@option=value``) on the setting's inputs (module docstring).

    ``interleaved_1f1b`` gets the paper's 1F1B-I chunks: ``v = (layers + 2) / p``, each chunk
    ``1/v`` of the stage's ``T_F`` and ``T_B + T_W``.
    """
    v = (s.layers + 2) // s.p if split_label(label)[0] == "interleaved_1f1b" else 1
    table = build_schedule(label, s.p, s.m, **({"v": v} if v > 1 else {}))
    result = reference_simulate(table, s.t_f / v, (s.t_b + s.t_w) / v, s.t_comm, math.inf, 0.0, "overlap",
                                t_i=s.t_b / v, t_w=s.t_w / v, record=True)
    return Step(t_sim=result.t_sim, post_validated=post_validated_step(result))


def bubble_rate(cost: float, s: Setting) -> float:
    """The paper's bubble rate ``(cost - m(T_F+T_B+T_W)) / cost``."""
    return (cost - s.busy) / cost


@dataclass(frozen=True)
class Comparison:
    """Every number the script prints, per setting (rows in Table 9's order).

    Attributes:
      steps: ``steps[column][k]``: the :class:`Step` of the schedule of Table 5's ``column`` (and of
        :data:`EXTRA`'s columns where asked for).
      bubble: ``bubble[column][k]``: ppsweep's bubble rate (post-validated cost).
      bubble_isolated: the same with the isolated step ``t_sim`` as cost.
      ratio_measured: ``ratio_measured[x][k]``: Table 4's throughput of ``x`` over 1F1B's.
      ratio_ppsweep: ``cost(1F1B) / cost(proxy of x)`` (:data:`PROXIES`, with ``extra`` also
        :data:`EXTRA_PROXIES`), post-validated costs.
      ratio_paper: ``(1 - bubble(x)) / (1 - bubble(1F1B))`` from the paper's Table 5.
    """

    steps: dict[str, list[Step]]
    bubble: dict[str, np.ndarray]
    bubble_isolated: dict[str, np.ndarray]
    ratio_measured: dict[str, np.ndarray]
    ratio_ppsweep: dict[str, np.ndarray]
    ratio_paper: dict[str, np.ndarray]


def compare(rows: tuple[Setting, ...] | None = None, extra: bool = False) -> Comparison:
    """Run the three schedules (and with ``extra`` the columns of :data:`EXTRA`) on every setting."""
    rows = settings() if rows is None else rows
    columns = {**SCHEDULES, **(EXTRA if extra else {})}
    steps = {col: [step(name, s) for s in rows] for col, name in columns.items()}
    bubble = {col: np.array([bubble_rate(st.post_validated, s) for st, s in zip(steps[col], rows)]) for col in steps}
    isolated = {col: np.array([bubble_rate(st.t_sim, s) for st, s in zip(steps[col], rows)]) for col in steps}
    proxies = {**PROXIES, **(EXTRA_PROXIES if extra else {})}
    measured = {x: np.array([s.throughput[x] / s.throughput["1f1b"] for s in rows]) for x in proxies}
    predicted = {x: np.array([a.post_validated / b.post_validated for a, b in zip(steps["1f1b"], steps[proxies[x]])])
                 for x in proxies}
    paper = {x: np.array([(1 - s.bubble[x]) / (1 - s.bubble["1f1b"]) for s in rows]) for x in proxies}
    return Comparison(steps, bubble, isolated, measured, predicted, paper)
