"""The searched schedule as a PyTorch pipeline CSV, checked with PyTorch's own loader.

:func:`export_csv` writes the table in PyTorch's compute-only CSV convention
(:func:`ppsweep.tables.interchange.write_csv`: one row per rank, ``<stage><F|B|I|W><microbatch>``
cells), which ``torch.distributed.pipelining``'s ``_PipelineScheduleRuntime._load_csv`` reads — the
path torchtitan uses for CSV schedules. :func:`check_with_torch` loads the file exactly so, without
a process group: PyTorch validates the actions (every F before its B or I, every I before its W,
stage-to-rank mapping), lowers the schedule to one with send and receive actions, and dry-runs
that lowered schedule with its simulator (``_simulate_comms_compute``, given the compute and
send/receive actions: it does not know the FSDP ones the lowering adds), which raises on a deadlock.
Running it for real is the ``torchval`` harness's job (``ppsweep.measure.torch_runtime.measure_csv_schedule``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ppsweep.tables.interchange import write_csv
from ppsweep.tables.table import ScheduleTable


def export_csv(table: ScheduleTable, path: str | os.PathLike) -> Path:
    """Write ``table`` as a PyTorch pipeline CSV at ``path`` (created or replaced); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_csv(table, path)
    return path


def check_with_torch(path: str | os.PathLike, p: int, n_stages: int, m: int) -> int:
    """Load the CSV with ``_PipelineScheduleRuntime._load_csv`` and dry-run the lowered schedule.

    The runtime object is made without its constructor (which needs stages on a process group);
    only the attributes ``_load_csv`` and ``_simulate`` read are set.

    Args:
      path: the CSV. p: ranks. n_stages: pipeline stages. m: microbatches.

    Returns:
      The number of actions in PyTorch's lowered schedule (compute and communication).

    Raises:
      ImportError: without torch.
      ValueError: PyTorch rejected the file (its message, one line).
    """
    from torch.distributed.pipelining import schedules

    runtime = object.__new__(schedules._PipelineScheduleRuntime)
    runtime.pipeline_order = {}
    runtime.pp_group_size = p
    runtime._num_stages = n_stages
    runtime._n_microbatches = m
    runtime._stages = []
    runtime._defer_pp_recv = False
    kept = {"F", "I", "W", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B"}  # the simulator's actions (no FSDP ones)
    try:
        runtime._load_csv(str(path))
        lowered = {rank: [a for a in actions if a is not None and a.computation_type.value in kept]
                   for rank, actions in runtime.pipeline_order_with_comms.items()}
        schedules._simulate_comms_compute(lowered, lambda s: runtime.stage_index_to_group_rank[s], n_stages)
    except (AssertionError, RuntimeError, ValueError, KeyError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"PyTorch rejected {path}: {first}") from None
    return sum(len(actions) for actions in runtime.pipeline_order_with_comms.values())
