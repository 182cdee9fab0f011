"""Export PyTorch's pipeline schedule orders as small golden CSV files (compute actions only).

Run with a Python that has torch (not a dependency of ppsweep or its tests)::

    /work/torchvenv/bin/python scripts/make_torch_goldens.py [--out tests/golden/torch]

For every schedule class of ``torch.distributed.pipelining.schedules`` that ppsweep mirrors and
every small ``(p, m)`` (and chunk count) the class accepts, it builds the schedule on stand-in
stages (no process group is needed to compute an order), keeps each rank's compute actions
(F, B, I, W and the overlapped pair ``(aF x;bB y)OVERLAP_F_B``) in order, drops idle steps and
communication, and writes one CSV per case: one row per rank, one action per cell, in PyTorch's
own notation (``0F3`` = stage 0, forward, microbatch 3). A pair is written as PyTorch prints it.
Points PyTorch refuses (its constructor raises) are listed in ``refused.txt``.

The tests (``tests/test_torch_goldens.py``) read these files without importing torch.
"""

from __future__ import annotations

import argparse
import csv
import pathlib

import torch
from torch.distributed.pipelining import schedules as S

#: ppsweep name -> (PyTorch class, local stages per rank, options recorded in the file name).
CASES = {
    "gpipe": (S.ScheduleGPipe, 1, {}),
    "1f1b": (S.Schedule1F1B, 1, {}),
    "interleaved_1f1b": (S.ScheduleInterleaved1F1B, 2, {"v": 2}),
    "interleaved_1f1b@v=3": (S.ScheduleInterleaved1F1B, 3, {"v": 3}),
    "looped_bfs": (S.ScheduleLoopedBFS, 2, {"v": 2}),
    "looped_bfs@v=3": (S.ScheduleLoopedBFS, 3, {"v": 3}),
    "interleaved_zb": (S.ScheduleInterleavedZeroBubble, 2, {"v": 2}),
    "zbv": (S.ScheduleZBVZeroBubble, 2, {}),
    "dualpipev": (S.ScheduleDualPipeV, 2, {}),
}
P_VALUES = (2, 3, 4)
M_VALUES = (1, 2, 3, 4, 5, 6, 8, 9, 10, 12)


class StandInStage:
    """What a schedule's constructor reads from a pipeline stage (no model, no process group)."""

    def __init__(self, stage_index: int, num_stages: int, rank: int, group_size: int):
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group_rank = rank
        self.group_size = group_size
        self.is_first = stage_index == 0
        self.is_last = stage_index == num_stages - 1
        self.stage_index_to_group_rank = {}
        self.submod = torch.nn.Identity()


def stages_for(cls, p: int, local: int) -> list[StandInStage] | StandInStage:
    """Rank 0's stages (every rank computes the whole order)."""
    n = p * local
    if local == 1:
        return StandInStage(0, n, 0, p)
    style = "v" if cls in (S.ScheduleZBVZeroBubble, S.ScheduleDualPipeV) else "loop"
    mine = [s for s in range(n) if (s % p if style == "loop" else (s if s < p else 2 * p - 1 - s)) == 0]
    return [StandInStage(s, n, 0, p) for s in mine]


def action_text(action) -> str | None:
    """PyTorch's text of a compute action, None for anything else."""
    if action is None or not action.is_compute_op:
        return None
    return str(action)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/golden/torch")
    out = pathlib.Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    refused = []
    for name, (cls, local, _) in CASES.items():
        for p in P_VALUES:
            for m in M_VALUES:
                try:
                    schedule = cls(stages_for(cls, p, local), m)
                except Exception as error:  # PyTorch's own refusal of this point
                    refused.append(f"{name} p={p} m={m}: {type(error).__name__}: {error}")
                    continue
                rows = [[t for t in map(action_text, schedule.pipeline_order[r]) if t] for r in range(p)]
                with open(out / f"{name}_p{p}_m{m}.csv", "w", newline="") as f:
                    csv.writer(f).writerows(rows)
    (out / "refused.txt").write_text("\n".join(refused) + "\n")
    (out / "VERSION").write_text(f"torch {torch.__version__}\n")
    print(f"torch {torch.__version__}: wrote {len(list(out.glob('*.csv')))} files to {out}, {len(refused)} refused")


if __name__ == "__main__":
    main()
