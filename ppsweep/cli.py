"""``python -m ppsweep +sweep=NAME``: run a sweep from Hydra configs into ``results/NAME.zarr``.

The configs live in ``conf/`` at the repository root; it is found next to the package (source
checkout or editable install), or through ``PPSWEEP_CONF_DIR``. Users add their own sweeps with
Hydra's ``--config-dir``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf


def logspace(start: float, stop: float, num: int) -> list[float]:
    """``${logspace:1e9,1e12,64}`` in a config: ``num`` log-spaced values from ``start`` to ``stop``."""
    import numpy as np

    if not (float(start) > 0 and float(stop) > 0 and int(num) >= 1):
        raise ValueError(f"logspace: needs start > 0, stop > 0, num >= 1, got {start}, {stop}, {num}")
    return [float(x) for x in np.logspace(np.log10(float(start)), np.log10(float(stop)), int(num))]


if not OmegaConf.has_resolver("logspace"):
    OmegaConf.register_new_resolver("logspace", logspace)


def find_conf_dir() -> Path:
    """The ``conf/`` directory: ``$PPSWEEP_CONF_DIR``, else the one beside the package."""
    env = os.environ.get("PPSWEEP_CONF_DIR")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parent.parent / "conf", Path.cwd() / "conf"]
    for candidate in candidates:
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SystemExit(
        "error: ppsweep's conf/ directory not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); set PPSWEEP_CONF_DIR"
    )


def run(cfg: DictConfig) -> int:
    """Validate the config, then run the sweep; return the exit status."""
    from ppsweep.runner import configure_jax, run_sweep
    from ppsweep.store import StoreError
    from ppsweep.sweep import SweepSpec

    try:
        container = OmegaConf.to_container(cfg, resolve=True)
        spec = SweepSpec.from_config(container)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    configure_jax(cfg.engine.get("compilation_cache"))
    path = Path(str(cfg.results_dir)) / f"{spec.name}.zarr"
    yaml = OmegaConf.to_yaml(cfg, resolve=True)
    print(f"sweep {spec.name}: {spec.n_points:,} points in {len(spec.units())} units -> {path}", file=sys.stderr)
    try:
        report = run_sweep(spec, path, yaml, overwrite=bool(cfg.overwrite), progress=bool(cfg.progress))
    except StoreError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if report.units_run == 0:
        print(f"{path} is already complete; nothing to do (overwrite=true recomputes it)", file=sys.stderr)
    else:
        print(
            f"wrote {report.points_run:,} points in {report.seconds:.1f} s "
            f"({report.points_per_second:,.0f} points/s end to end) to {path}",
            file=sys.stderr,
        )
    return 0


@hydra.main(config_path=str(find_conf_dir()), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    status = run(cfg)
    if status:
        sys.exit(status)


def main() -> None:
    """Console entry point."""
    _hydra_main()
