"""The layout model held against published measurements (README, "Against published measurements").

Inputs come from the papers (``data/published/*.csv``, each with its source); nothing is fitted.
The one assumed parameter per hardware is the system's achieved share of peak FLOP/s
(``compute_efficiency`` of ``conf/system/a100_cluster.yaml``: 0.7), used for every row.

- **Narayanan et al. 2021, Table 1** (:func:`narayanan_rows`): per row the model (``L, h, a``;
  ``s = 2048``, ``V = 51200``), the layout (``t, p``, ``d = gpus/(t·p)``), the global batch;
  microbatch 1 (assumed); full activation recomputation and the scatter/gather of stage-boundary
  messages (the paper's setting); the interleaved schedule (2 chunks a worker) where Megatron
  allows it (``2p`` divides the layers and ``p`` the microbatches), else 1F1B; ``p = 1``: no
  pipeline. Predicted teraFLOP/s per GPU use the paper's own count (its equation 3),
  ``96·B·s·l·h²·(1 + s/(6h) + V/(16lh)) / (t_step · gpus)``, as the measured ones do.
- **The interleaved schedule's gain** (:func:`interleaved_gains`): the paper's abstract measures
  "10+%"; per Table 1 row where the schedule applies, the predicted ``t(1F1B)/t(interleaved) - 1``.
- **vTrain's measured iteration times** (:func:`vtrain_rows`; Bang et al., MICRO 2024): 109
  Megatron-LM runs of 3.6B-175B models on 64-512 A100s, each with its ``t, d, p``, global batch
  and microbatch; 1F1B with full recomputation as their validation configs ran; their network
  (8 GPUs a node, 800 Gb/s a node across, 150 GB/s within) replaces the A100 system's. Reported:
  the error of every row, MAPE, and per model Kendall's tau between measured and predicted times
  (do the predictions order the configurations as the measurements do?) and whether the
  predicted fastest configuration is the measured fastest.
- **Korthikanti et al. 2022** (:func:`korthikanti_rows`): the abstract's model FLOP utilisations of
  the 530B model on 2,240 A100s with full recomputation (42.1 %) and with sequence parallelism and
  selective recomputation (54.2 %); MFU counts the model's FLOPs without recomputation,
  ``72·B·s·l·h²·(1 + s/(6h) + V/(12lh))``, over ``t_step · gpus · 312 TFLOP/s``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ppsweep.cost_model import ModelConfig, SystemConfig
from ppsweep.layout import Layout, LayoutOptions, layout_costs, model_flops_per_step, simulate_layout, unpipelined_step
from ppsweep.tables.build import build_schedule

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "published"
SEQUENCE, VOCAB = 2048, 51200
#: Microbatch size assumed for every row (Table 1 does not give one).
MICROBATCH = 1


def read_table(name: str) -> list[dict[str, str]]:
    """Rows of ``data/published/<name>.csv`` (lines starting with ``#`` are its source notes)."""
    lines = [line for line in (DATA / f"{name}.csv").read_text().splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(lines))


def a100() -> SystemConfig:
    """The A100 system of every comparison: ``conf/system/a100_cluster.yaml``."""
    return SystemConfig.from_mapping(yaml.safe_load((ROOT / "conf" / "system" / "a100_cluster.yaml").read_text()))


@dataclass(frozen=True)
class Comparison:
    """One measured figure and ppsweep's prediction of it."""

    label: str
    measured: float
    predicted: float
    unit: str
    setting: str

    @property
    def error(self) -> float:
        """``predicted / measured - 1``."""
        return self.predicted / self.measured - 1.0


def step_time(model: ModelConfig, system: SystemConfig, layout: Layout, options: LayoutOptions, schedule: str | None,
              microbatch: int = MICROBATCH) -> float:
    """Seconds of one step of ``model`` under ``layout`` (``schedule`` None: ``p = 1``, no pipeline)."""
    m = round(model.global_batch / (layout.dp * microbatch))
    if schedule is None:
        return float(unpipelined_step(model, system, layout, options, m))
    name, _, option = schedule.partition("@")
    kwargs = {"v": int(option.split("=")[1])} if option else {}
    table = build_schedule(name, layout.p, m, **kwargs)
    _, t = simulate_layout(table, layout_costs(model, system, table, layout, options))
    return float(t)


def megatron_schedule(layers: int, p: int, m: int) -> str | None:
    """Megatron's schedule for a Table 1 row: interleaved (2 chunks) where it applies, else 1F1B; None at ``p = 1``."""
    if p == 1:
        return None
    return "interleaved_1f1b@v=2" if layers % (2 * p) == 0 and m % p == 0 else "1f1b"


def _row_model(row: dict[str, str], recompute: str) -> ModelConfig:
    return ModelConfig(layers=int(row["layers"]), hidden=int(row["hidden"]), heads=int(row["heads"]), sequence=SEQUENCE,
                       vocab=VOCAB, global_batch=int(row["batch"]), recompute=recompute, head_compute=True,
                       name=row.get("params_billion", row.get("model", "model")))


def _row_layout(row: dict[str, str]) -> Layout:
    tp, p, gpus = int(row["tp"]), int(row["pp"]), int(row["gpus"])
    return Layout(tp=tp, p=p, dp=gpus // (tp * p))


def _table1_rows() -> list[tuple[dict[str, str], ModelConfig, Layout, int]]:
    """Narayanan et al.'s Table 1, a row at a time: the row, its model (full recomputation), its
    layout and its microbatches per pipeline ``m``."""
    out = []
    for row in read_table("narayanan2021_table1"):
        model, layout = _row_model(row, "full"), _row_layout(row)
        out.append((row, model, layout, model.global_batch // (layout.dp * MICROBATCH)))
    return out


def narayanan_rows(system: SystemConfig | None = None) -> list[Comparison]:
    """Table 1: measured against predicted teraFLOP/s per GPU, row by row."""
    system = a100() if system is None else system
    options = LayoutOptions(scatter_gather=True)
    out = []
    for row, model, layout, m in _table1_rows():
        schedule = megatron_schedule(model.layers, layout.p, m)
        t = step_time(model, system, layout, options, schedule)
        s, h, l, B = SEQUENCE, model.hidden, model.layers, model.global_batch
        flops = 96.0 * B * s * l * h * h * (1 + s / (6 * h) + VOCAB / (16 * l * h))
        out.append(Comparison(f"{row['params_billion']}B on {layout.gpus} GPUs", float(row["tflops_per_gpu"]),
                              flops / (t * layout.gpus) / 1e12, "TFLOP/s per GPU",
                              f"{layout.label}, B={B}, m={m}, {schedule or 'no pipeline'}"))
    return out


def interleaved_gains(system: SystemConfig | None = None) -> list[tuple[str, float]]:
    """Predicted ``t(1F1B) / t(interleaved, 2 chunks) - 1`` of the Table 1 rows where the interleaved schedule applies."""
    system = a100() if system is None else system
    options = LayoutOptions(scatter_gather=True)
    out = []
    for row, model, layout, m in _table1_rows():
        if megatron_schedule(model.layers, layout.p, m) != "interleaved_1f1b@v=2":
            continue
        plain = step_time(model, system, layout, options, "1f1b")
        interleaved = step_time(model, system, layout, options, "interleaved_1f1b@v=2")
        out.append((f"{row['params_billion']}B on {layout.gpus} GPUs ({layout.label}, m={m})", plain / interleaved - 1.0))
    return out


def korthikanti_rows(system: SystemConfig | None = None) -> list[Comparison]:
    """The abstract's MFU of the 530B model with full recomputation and with SP + selective recomputation."""
    system = a100() if system is None else system
    out = []
    for row in read_table("korthikanti2022_abstract"):
        full = row["method"].startswith("full")
        model = _row_model(row, "full" if full else "selective")
        layout = _row_layout(row)
        options = LayoutOptions(sequence_parallel=not full, scatter_gather=True)
        m = model.global_batch // (layout.dp * MICROBATCH)
        schedule = megatron_schedule(model.layers, layout.p, m)
        t = step_time(model, system, layout, options, schedule)
        mfu = model_flops_per_step(model) / (t * layout.gpus * system.peak_flops)
        out.append(Comparison(f"{row['model']} on {layout.gpus} GPUs, {row['method']}", float(row["mfu_percent"]),
                              100.0 * mfu, "% MFU", f"{layout.label}, B={model.global_batch}, m={m}, {schedule}"))
    return out


def vtrain_system(system: SystemConfig | None = None) -> SystemConfig:
    """The A100 system with vTrain's validation network: 800 Gb/s a node across (12.5 GB/s per GPU), 150 GB/s within."""
    from dataclasses import replace

    return replace(a100() if system is None else system, bandwidth=800e9 / 8 / 8, intra_bandwidth=150e9)


def vtrain_rows(system: SystemConfig | None = None, rows: slice = slice(None)) -> list[Comparison]:
    """vTrain's measured iteration times (ms) against predicted ones, row by row (``rows``: a part)."""
    system = vtrain_system(system)
    options = LayoutOptions(scatter_gather=True)
    out = []
    for row in read_table("vtrain_ground_truth_multi")[rows]:
        model = ModelConfig(layers=int(row["# layers"]), hidden=int(row["hidden size"]), heads=int(row["attention heads"]),
                            sequence=int(row["sequence length"]), vocab=VOCAB, global_batch=int(row["global batch"]),
                            recompute="full", head_compute=True, name=row["Parameters (billion)"])
        layout = Layout(tp=int(row["tensor parallelism"]), p=int(row["pipeline parallelism"]), dp=int(row["data parallelism"]))
        b = int(row["micro batch"])
        m = model.global_batch // (layout.dp * b)
        schedule = None if layout.p == 1 else "1f1b"
        t = step_time(model, system, layout, options, schedule, microbatch=b)
        out.append(Comparison(f"{row['Parameters (billion)']}B on {layout.gpus} GPUs, {layout.label}, b={b}",
                              float(row["iteration time (ms)"]), 1e3 * t, "ms", f"m={m}, {schedule or 'no pipeline'}"))
    return out


def ranking_agreement(rows: list[Comparison]) -> list[dict]:
    """Per model (the label's size and GPU count): Kendall's tau-b of measured against predicted, and
    whether the predicted fastest row is the measured fastest."""
    from ppsweep.analysis.stability import kendall_tau

    groups: dict[str, list[Comparison]] = {}
    for r in rows:
        groups.setdefault(r.label.split(",")[0], []).append(r)
    out = []
    for name, part in groups.items():
        measured = np.array([r.measured for r in part])
        predicted = np.array([r.predicted for r in part])
        out.append({"model": name, "rows": len(part), "tau": kendall_tau(measured, predicted),
                    "same_fastest": bool(np.argmin(measured) == np.argmin(predicted)),
                    "mape": float(np.mean(np.abs(predicted / measured - 1)))})
    return out


def summary(rows: list[Comparison]) -> dict[str, float]:
    """Median and largest absolute error of ``rows``."""
    errors = np.abs([r.error for r in rows])
    return {"median_abs_error": float(np.median(errors)), "max_abs_error": float(np.max(errors)),
            "mape": float(np.mean(errors))}
