"""Regenerate the engine's golden results: ``python scripts/make_golden.py`` -> tests/golden/engine.npz.

The golden file pins the engine's outputs to the bit (``tests/test_golden.py``): a refactor of the
engine must reproduce it exactly. Regenerate it only for a deliberate change of results, and say
so in the commit.

Points: the four seed schedules (Chimera with ``split=1:2``, Hanayo with ``waves=2``) at
``p ∈ {4, 8}``, ``m ∈ {8, 16}``, the baseline model and system, a few bandwidths and latencies,
optimizer time 0 and 1 ms, the three original communication modes, methods ``scan`` and
``envelope``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppsweep import build_schedule  # noqa: E402
from ppsweep.tables.build import why_unsupported  # noqa: E402
from ppsweep.cost_model import ModelConfig, SystemConfig, stage_costs  # noqa: E402
from ppsweep.engine.core import method_backend, simulate  # noqa: E402

#: Where the golden results live.
GOLDEN = ROOT / "tests" / "golden" / "engine.npz"

SCHEDULES = (("gpipe", {}), ("1f1b", {}), ("chimera", {"split": "1:2"}), ("hanayo", {"waves": 2}))
P = (4, 8)
M = (8, 16)
BANDWIDTH = np.array([1e9, 1e10, 5e10, 1e12])  # bytes/s
LATENCY = np.array([1e-7, 5e-6, 1e-5])  # s
T_OPT = np.array([0.0, 1e-3])  # s
#: The modes the golden file was first written with (later modes have their own tests).
MODES = ("overlap", "blocking", "contention")
METHODS = ("scan", "envelope")
FIELDS = ("t_sim", "comm_time", "idle_sim", "worker_finish")


def configs() -> tuple[ModelConfig, SystemConfig]:
    """The baseline model and system of ``conf/``."""
    model = yaml.safe_load((ROOT / "conf" / "model" / "megatron_128l.yaml").read_text())
    system = yaml.safe_load((ROOT / "conf" / "system" / "baseline.yaml").read_text())
    return ModelConfig.from_mapping(model), SystemConfig.from_mapping(system)


def cases() -> list[tuple[str, dict[str, Any], int, int]]:
    """Every supported ``(schedule, options, p, m)``."""
    return [(n, o, p, m) for n, o in SCHEDULES for p in P for m in M if why_unsupported(n, p, m, **o) is None]


def key(name: str, options: dict[str, Any], p: int, m: int, mode: str, method: str, field: str) -> str:
    """The npz entry of one result array."""
    opts = ",".join(f"{k}={v}" for k, v in options.items())
    return f"{name}@{opts}/p{p}/m{m}/{mode}/{method}/{field}"


def compute() -> dict[str, np.ndarray]:
    """Every golden array, by :func:`key`; point axes: t_opt × bandwidth × latency (× worker)."""
    model, system = configs()
    out: dict[str, np.ndarray] = {}
    for name, options, p, m in cases():
        table = build_schedule(name, p, m, **options)
        c = stage_costs(model, system, table)
        beta = BANDWIDTH[None, :, None]
        alpha = LATENCY[None, None, :]
        t_opt = T_OPT[:, None, None]
        for mode in MODES:
            for method in METHODS:
                r = simulate(table, c.t_f[0], c.t_b[0], alpha, beta, c.msg_bytes, mode, t_i=c.t_i[0], t_w=c.t_w[0],
                             grad_bytes=c.grad_bytes, t_opt=t_opt, backend=method_backend(method))
                values = {"t_sim": r.t_sim, "comm_time": r.comm_time, "idle_sim": r.idle_fraction(table.p),
                          "worker_finish": r.worker_finish}
                for field in FIELDS:
                    out[key(name, options, p, m, mode, method, field)] = np.asarray(values[field])
    return out


def main() -> None:
    """Write :data:`GOLDEN`."""
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    arrays = compute()
    np.savez_compressed(GOLDEN, **arrays)
    print(f"{GOLDEN}: {len(arrays)} arrays")


if __name__ == "__main__":
    main()
