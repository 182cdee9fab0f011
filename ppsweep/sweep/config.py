"""The one config path: a Hydra config becomes a validated :class:`SweepSpec` (and a :class:`Plan`).

Every check of a sweep's config lives here, and nothing here imports JAX, so a bad config is
refused before any heavy import. The ways in:

- :func:`load_config` ``(overrides) -> SweepSpec``: compose ``conf/`` with Hydra's compose API
  (``["+sweep=paper", "p=[4]"]``, as on the command line) and validate it; for scripts and tests.
- :func:`load_plan`: the same, with what a run needs besides the grid (store path, resolved YAML
  for the store's attributes, shards, flags).
- :func:`spec_from_config` / :func:`plan_from_config`: an already composed config (the command
  line's, a launcher job's, or a plain mapping) into a spec / plan.

Dimensions: :data:`DIMENSIONS` fixes every dimension a store can have, in store order, with its
units. :meth:`SweepSpec.coords` lists the present ones in that order; everything downstream (the
evaluation, the store's layout and writes) arranges arrays by these names, never by position.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict

from ppsweep.tables.build import check_positive_int, resolve_options
from ppsweep.engine.comm import check_mode
from ppsweep.costs import RECOMPUTE_MODES, ModelConfig, SystemConfig
from ppsweep.engine.noise import NoiseConfig
from ppsweep.schedules import get_schedule

#: Every dimension a results store can have, in store order, with its ``units`` attribute (None:
#: no units). ``schedule``, ``p``, ``m``, ``bandwidth`` and ``latency`` are always present.
DIMENSIONS: dict[str, str | None] = {
    "schedule": None,
    "p": "workers",
    "m": "microbatches",
    "recompute": None,
    "memory_capacity": "bytes",
    "comm": None,
    "compute": "FLOP/s",
    "bandwidth": "bytes/s",
    "latency": "s",
    "sample": None,
}
#: Dimensions of per-table variables (and the first ones of every per-point variable).
TABLE_DIMS = ("schedule", "p", "m")
#: Dimensions no per-point variable has: only ``fits`` (README, "Memory and the fastest schedule that fits").
CAPACITY_DIMS = ("memory_capacity",)
#: Config keys that belong to one job, not to the sweep: left out of the store's ``config``.
JOB_KEYS = ("shard", "finalize", "dry_run")

# ---- the store's identity ------------------------------------------------------------------------
# A store's identity (:func:`ppsweep.store.results.identity`) is built GENERICALLY from every field of the
# resolved :class:`SweepSpec`: a field added to the spec is part of the identity unless it is
# named here. Config keys that never reach the spec are listed in RUN_KEYS; a test composes the
# config and checks that changing any other key changes the identity (tests/test_faults.py).
#: SweepSpec fields that cannot change a stored value, with the reason.
NOT_IN_IDENTITY: dict[str, str] = {
    "name": "names the store's file; the values do not depend on it",
}
#: Config keys (dotted) that never change a stored value; everything else must reach the spec.
RUN_KEYS: dict[str, str] = {
    "name": "the store's file name",
    "results_dir": "where the store is",
    "overwrite": "whether to replace the store",
    "progress": "progress lines",
    "shards": "how the units are split between jobs",
    "shard": "which units this job runs",
    "finalize": "check and mark complete only",
    "dry_run": "print the estimate only",
    "engine.compilation_cache": "JAX's cache of compiled code",
    "engine.workers": "processes evaluating units",
    "limits": "refusal thresholds of the estimate",
    "cluster": "resources of the jobs",
}


# ---- the grid ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep (build it with :func:`spec_from_config` or :func:`load_config`).

    Attributes:
      name: the store is ``<results_dir>/<name>.zarr``.
      schedules: schedule names (the ``schedule`` coordinate).
      schedule_options: options per schedule name.
      p, m: worker and microbatch counts.
      comm: communication modes; a ``comm`` dimension exists when ``comm_axis``.
      compute: peak FLOP/s values of a ``compute`` dimension, or None (the system's, no dimension).
      bandwidth, latency: the network axes, bytes/s and s.
      model, system: cost-model configs.
      f_slots, b_slots: slots of F and B in the idealized tables.
      dtype: engine float dtype.
      chunk: engine scan tile: points per compiled scan call and device.
      method: engine method, ``auto``, ``scan`` or ``envelope`` (:func:`ppsweep.engine.core.simulate`).
      recompute: recomputation modes of a ``recompute`` dimension (each overrides
        ``model.recompute``), or None (the model's; no dimension).
      memory_capacity: bytes per worker of a ``memory_capacity`` dimension (the variable
        ``fits``), or None (no dimension).
      noise: the noise model (:mod:`ppsweep.engine.noise`); with ``noise.samples > 0`` a ``sample``
        dimension comes last.
    """

    name: str
    schedules: tuple[str, ...]
    p: tuple[int, ...]
    m: tuple[int, ...]
    bandwidth: np.ndarray
    latency: np.ndarray
    model: ModelConfig
    system: SystemConfig
    comm: tuple[str, ...] = ("overlap",)
    comm_axis: bool = False
    compute: np.ndarray | None = None
    schedule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    f_slots: int = 1
    b_slots: int = 2
    dtype: str = "float64"
    chunk: int = 1024
    method: str = "auto"
    recompute: tuple[str, ...] | None = None
    memory_capacity: np.ndarray | None = None
    noise: NoiseConfig = NoiseConfig()

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | DictConfig) -> "SweepSpec":
        """Same as :func:`spec_from_config`."""
        return spec_from_config(cfg)

    def coords(self) -> dict[str, np.ndarray]:
        """Coordinate values of every present dimension, in store order (:data:`DIMENSIONS`)."""
        values: dict[str, np.ndarray | None] = {
            "schedule": np.array(self.schedules, dtype=object),
            "p": np.array(self.p, dtype=np.int64),
            "m": np.array(self.m, dtype=np.int64),
            "recompute": None if self.recompute is None else np.array(self.recompute, dtype=object),
            "memory_capacity": None if self.memory_capacity is None else np.asarray(self.memory_capacity, dtype=float),
            "comm": np.array(self.comm, dtype=object) if self.comm_axis else None,
            "compute": None if self.compute is None else np.asarray(self.compute, dtype=float),
            "bandwidth": np.asarray(self.bandwidth, dtype=float),
            "latency": np.asarray(self.latency, dtype=float),
            "sample": np.arange(self.noise.samples, dtype=np.int64) if self.noise.enabled else None,
        }
        return {dim: values[dim] for dim in DIMENSIONS if values[dim] is not None}

    @property
    def point_dims(self) -> tuple[str, ...]:
        """Dimensions of per-point variables, in store order."""
        return tuple(d for d in self.coords() if d not in CAPACITY_DIMS)

    @property
    def nominal_dims(self) -> tuple[str, ...]:
        """Dimensions of noise-free per-point variables (``t_sim_nominal``): ``point_dims`` without ``sample``."""
        return tuple(d for d in self.point_dims if d != "sample")

    @property
    def table_dims(self) -> tuple[str, ...]:
        """Dimensions of per-table variables."""
        return TABLE_DIMS

    def dims_of(self, kind: str) -> tuple[str, ...]:
        """Dimensions of a variable of ``kind``: ``point``, ``nominal`` (a point's noise-free value:
        no ``sample``), ``table``, ``memory`` (a table's memory, per recomputation mode) or ``fits``
        (memory, per capacity)."""
        memory = TABLE_DIMS + (("recompute",) if self.recompute is not None else ())
        return {
            "point": self.point_dims,
            "nominal": self.nominal_dims,
            "table": TABLE_DIMS,
            "memory": memory,
            "fits": memory + CAPACITY_DIMS,
        }[kind]

    def models(self) -> dict[str, ModelConfig]:
        """The model of each recomputation mode of the sweep (the model alone without a ``recompute`` axis)."""
        if self.recompute is None:
            return {self.model.recompute: self.model}
        return {mode: replace(self.model, recompute=mode) for mode in self.recompute}

    def shape(self, dims: Sequence[str]) -> tuple[int, ...]:
        """Lengths of ``dims`` (an absent dimension has length 1)."""
        coords = self.coords()
        return tuple(len(coords[d]) if d in coords else 1 for d in dims)

    def units(self) -> list[tuple[int, int]]:
        """Every unit of work, as (p index, m index), p-major."""
        return [(i, j) for i in range(len(self.p)) for j in range(len(self.m))]

    @property
    def n_points(self) -> int:
        """Points of the whole grid."""
        return int(np.prod(self.shape(self.point_dims)))

    def options_for(self, schedule: str) -> dict[str, Any]:
        """Options of ``schedule`` in this sweep."""
        return dict(self.schedule_options.get(schedule, {}))


def unit_region(dims: Sequence[str], p_index: int, m_index: int) -> tuple[slice, ...]:
    """The index of unit ``(p_index, m_index)`` in an array of dimensions ``dims`` (by name)."""
    fixed = {"p": p_index, "m": m_index}
    return tuple(slice(fixed[d], fixed[d] + 1) if d in fixed else slice(None) for d in dims)


def logspace(start: Any, stop: Any, num: Any, field_name: str = "logspace") -> np.ndarray:
    """``num`` log-spaced values from ``start`` to ``stop`` (``${logspace:1e9,1e12,64}`` in a config).

    Raises:
      ValueError: naming ``field_name`` unless ``start > 0``, ``stop > 0`` and ``num`` is an integer >= 1.
    """
    num = check_positive_int(f"{field_name}.num", num, 1)
    try:
        start, stop = float(start), float(stop)
    except (TypeError, ValueError):
        raise ValueError(f"{field_name}: start and stop must be numbers, got {start!r}, {stop!r}") from None
    if not (start > 0 and stop > 0):
        raise ValueError(f"{field_name}: log-spaced range needs start > 0 and stop > 0, got {start}, {stop}")
    return np.logspace(np.log10(start), np.log10(stop), num)


if not OmegaConf.has_resolver("logspace"):
    OmegaConf.register_new_resolver("logspace", lambda start, stop, num: logspace(start, stop, num).tolist())


def spec_from_config(cfg: Mapping[str, Any] | DictConfig) -> SweepSpec:
    """Validate a config into a :class:`SweepSpec`.

    Args:
      cfg: the composed Hydra config (resolved here), or a plain mapping of the same keys.

    Returns:
      The spec.

    Raises:
      ValueError: naming the first bad field and what it accepts.
    """
    cfg = _container(cfg)
    if isinstance(cfg.get("sweep"), Mapping):
        raise ValueError(
            "sweep: the sweep file's keys landed under 'sweep:' and would be ignored; "
            "make '# @package _global_' its first line (as in conf/sweep/*.yaml)"
        )
    model = ModelConfig.from_mapping(_mapping(cfg, "model"))
    system = SystemConfig.from_mapping(_mapping(cfg, "system"))
    schedules = tuple(_list(cfg, "schedules"))
    if not schedules:
        raise ValueError("schedules: must name at least one schedule")
    options = cfg.get("schedule_options") or {}
    if not isinstance(options, Mapping):
        raise ValueError(f"schedule_options: must map schedule names to options, e.g. {{hanayo: {{waves: 2}}}}, got {options!r}")
    for name in schedules:
        get_schedule(name)
        resolve_options(name, dict(options.get(name) or {}))
    for name in options:
        get_schedule(name)
    comm = cfg.get("comm") or {}
    modes = comm.get("mode", "overlap") if isinstance(comm, Mapping) else comm
    comm_axis = isinstance(modes, (list, tuple))
    modes = tuple(modes) if comm_axis else (modes,)
    if not modes:
        raise ValueError("comm.mode: must name at least one mode (overlap, blocking, contention, ...), got []")
    compute = cfg.get("compute")
    engine = cfg.get("engine") or {}
    slots = cfg.get("slots") or {}
    dtype = engine.get("dtype", "float64")
    if dtype not in ("float64", "float32"):
        raise ValueError(f"engine.dtype: must be float64 or float32, got {dtype!r}")
    spec = SweepSpec(
        name=_name(cfg.get("name", "default")),
        schedules=schedules,
        schedule_options={k: dict(v or {}) for k, v in options.items()},
        p=tuple(check_positive_int("p", v, 2) for v in _list(cfg, "p")),
        m=tuple(check_positive_int("m", v, 1) for v in _list(cfg, "m")),
        comm=modes,
        comm_axis=comm_axis,
        compute=None if compute is None else _axis("compute", compute, positive=True),
        bandwidth=_axis("bandwidth", cfg.get("bandwidth"), positive=True, default=system.bandwidth),
        latency=_axis("latency", cfg.get("latency"), positive=False, default=system.latency),
        model=model,
        system=system,
        f_slots=check_positive_int("slots.f", slots.get("f", 1), 1),
        b_slots=check_positive_int("slots.b", slots.get("b", 2), 1),
        dtype=dtype,
        chunk=check_positive_int("engine.chunk", engine.get("chunk", 1024), 1),
        method=engine.get("method", "auto"),
        recompute=_recompute_axis(cfg.get("recompute"), system),
        memory_capacity=None if cfg.get("memory_capacity") is None else _axis("memory_capacity", cfg["memory_capacity"], positive=True),
        noise=NoiseConfig.from_mapping(cfg.get("noise")),
    )
    for dim, values in spec.coords().items():
        if len(set(values.tolist())) != len(values):
            raise ValueError(f"{dim}: values must be distinct, got {values.tolist()}")
    for mode in modes:
        check_mode(mode)
    # Last: the engine's names of methods (importing the engine imports JAX).
    from ppsweep.engine.core import check_method

    check_method(spec.method)
    return spec


def _recompute_axis(value: Any, system: SystemConfig) -> tuple[str, ...] | None:
    """The ``recompute`` dimension's modes (None: no dimension), checked."""
    if value is None:
        return None
    modes = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    for mode in modes:
        if mode not in RECOMPUTE_MODES:
            raise ValueError(f"recompute: must be one of {', '.join(RECOMPUTE_MODES)} (or a list of them), got {mode!r}")
    if system.memory_capacity is not None:
        raise ValueError(
            "system.memory_capacity: with a recompute dimension give the caps as the sweep's "
            "memory_capacity list (a dimension and the variable fits) instead"
        )
    return modes


def _container(cfg: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    if isinstance(cfg, DictConfig):
        container = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)
        return container
    return dict(cfg)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value or "/" in value or value.startswith("."):
        raise ValueError(f"name: must be a plain file name (no '/'), got {value!r}")
    return value


def _mapping(cfg: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = cfg.get(key)
    if not isinstance(value, Mapping):
        raise ValueError(f"{key}: missing; choose one of the configs in conf/{key}/ (e.g. {key}=...)")
    return value


def _list(cfg: Mapping[str, Any], key: str) -> list[Any]:
    value = cfg.get(key)
    if value is None:
        raise ValueError(f"{key}: missing; give a list, e.g. {key}=[4,8]")
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"{key}: must list at least one value, e.g. {key}=[4,8], got []")
    return values


def _axis(field_name: str, value: Any, positive: bool, default: float | None = None) -> np.ndarray:
    """A numeric axis from a number, a list, or ``{start, stop, num}`` (log-spaced)."""
    if value is None:
        value = [default]
    if isinstance(value, Mapping):
        if set(value) != {"start", "stop", "num"}:
            raise ValueError(f"{field_name}: a range needs exactly start, stop and num (log-spaced), got {dict(value)}")
        array = logspace(value["start"], value["stop"], value["num"], field_name)
    else:
        try:
            array = np.atleast_1d(np.asarray(value, dtype=float))
        except (TypeError, ValueError):
            raise ValueError(f"{field_name}: must be numbers, got {value!r}") from None
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"{field_name}: must be a non-empty list of finite numbers, got {value!r}")
    if positive and not np.all(array > 0):
        raise ValueError(f"{field_name}: must be > 0, got {array.tolist()}")
    if not positive and not np.all(array >= 0):
        raise ValueError(f"{field_name}: must be >= 0, got {array.tolist()}")
    return array


# ---- a run: the grid plus where and how ---------------------------------------------------------
def shard_units(spec: SweepSpec, shards: int, shard: int | None) -> list[tuple[int, int]]:
    """The ``(p index, m index)`` units of shard ``shard`` of ``shards`` (all units if ``shard`` is None)."""
    units = spec.units()
    shards, shard = check_shards(shards, shard, len(units))
    return units if shard is None else units[shard::shards]


def check_shards(shards: Any, shard: Any, n_units: int) -> tuple[int, int | None]:
    """Validate ``shards`` and ``shard`` against a sweep of ``n_units`` units.

    Returns:
      ``(shards, shard)`` as ints (``shard`` None: every unit).

    Raises:
      ValueError: naming the bad key and the values it accepts.
    """
    if isinstance(shards, bool) or not isinstance(shards, (int, float)) or shards != int(shards) or shards < 1:
        raise ValueError(f"shards: must be an integer >= 1, got {shards!r}")
    shards = int(shards)
    if shards > n_units:
        raise ValueError(
            f"shards: {shards} is more than the sweep's {n_units} units of work ((p, m) pairs); use shards <= {n_units}"
        )
    if shard is None:
        return shards, None
    if isinstance(shard, bool) or not isinstance(shard, (int, float)) or shard != int(shard) or not 0 <= shard < shards:
        raise ValueError(f"shard: must be an integer from 0 to {shards - 1} (shards={shards}), got {shard!r}")
    return shards, int(shard)


@dataclass(frozen=True)
class Plan:
    """What one ``python -m ppsweep`` process (or one job of a multirun) is asked to do.

    Attributes:
      spec: the sweep.
      path: its store, absolute (``results_dir`` is relative to the directory ppsweep was started in).
      shards, shard: the split, and this job's shard (None: every unit).
      config_yaml: the resolved config without the job-only keys, for the store's attributes.
      overwrite, finalize, progress: the flags of the same names.
      compilation_cache: JAX's persistent compilation cache directory, or None.
      workers: processes evaluating units (``engine.workers``); None: ``auto``
        (:func:`ppsweep.sweep.parallel.default_workers`). Never part of a store's identity.
      dry_run: print the estimate (:mod:`ppsweep.sweep.estimate`) and stop.
      limits: ``memory_gb``, ``store_gb``, ``hours``: the estimate's refusal thresholds (None:
        this machine's memory, the free disk space, no limit).
    """

    spec: SweepSpec
    path: Path
    shards: int
    shard: int | None
    config_yaml: str
    overwrite: bool
    finalize: bool
    progress: bool
    compilation_cache: str | None
    workers: int | None = None
    dry_run: bool = False
    limits: dict[str, float | None] = field(default_factory=dict)

    @property
    def units(self) -> tuple[tuple[int, int], ...]:
        """The ``(p index, m index)`` units this job owns (every unit without a shard)."""
        if self.shard is None:
            return tuple(self.spec.units())
        return tuple(shard_units(self.spec, self.shards, self.shard))


def config_yaml(cfg: Mapping[str, Any] | DictConfig) -> str:
    """The resolved config as YAML, without ``hydra`` and the job-only keys: the store's ``config``."""
    stored = OmegaConf.create(_container(cfg))
    with open_dict(stored):
        for key in ("hydra", *JOB_KEYS):
            stored.pop(key, None)
    return OmegaConf.to_yaml(stored)


def plan_from_config(cfg: DictConfig, base_dir: str | os.PathLike | None = None) -> Plan:
    """Validate a composed ppsweep config into a :class:`Plan`.

    Args:
      cfg: the composed config.
      base_dir: the directory a relative ``results_dir`` is taken from: the one ppsweep was
        started in (Hydra's ``hydra.runtime.cwd``), whatever directory a job runs in; None: the
        current directory.

    Returns:
      The plan.

    Raises:
      ValueError: naming the first bad field.
    """
    container = _container(cfg)
    container.pop("hydra", None)
    spec = spec_from_config(container)
    shards, shard = check_shards(container.get("shards", 1), container.get("shard"), len(spec.units()))
    flags = {}
    for key in ("overwrite", "finalize", "progress", "dry_run"):
        value = container.get(key, key == "progress")
        if not isinstance(value, bool):
            raise ValueError(f"{key}: must be true or false, got {value!r}")
        flags[key] = value
    results_dir = container.get("results_dir", "results")
    if not isinstance(results_dir, str) or not results_dir:
        raise ValueError(f"results_dir: must be a directory name, got {results_dir!r}")
    cache = (container.get("engine") or {}).get("compilation_cache")
    if cache is not None and (not isinstance(cache, str) or not cache):
        raise ValueError(f"engine.compilation_cache: must be a directory or null, got {cache!r}")
    workers = (container.get("engine") or {}).get("workers", "auto")
    if workers == "auto":
        workers = None
    elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"engine.workers: must be auto or an integer >= 1, got {workers!r}")
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    directory = base / os.path.expanduser(results_dir)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"results_dir: {results_dir!r} is a file, not a directory; name a directory (results_dir=results)")
    return Plan(
        spec=spec,
        path=(base / os.path.expanduser(results_dir) / f"{spec.name}.zarr").absolute(),
        shards=shards,
        shard=shard,
        config_yaml=config_yaml(container),
        overwrite=flags["overwrite"],
        finalize=flags["finalize"],
        progress=flags["progress"],
        compilation_cache=cache,
        workers=workers,
        dry_run=flags["dry_run"],
        limits=check_limits(container.get("limits")),
    )


#: The estimate's refusal thresholds (``limits.KEY`` in the config) and their defaults.
LIMIT_KEYS = {"memory_gb": None, "store_gb": None, "hours": None}


def check_limits(limits: Any) -> dict[str, float | None]:
    """Validate the ``limits`` block: each of :data:`LIMIT_KEYS` null or a number > 0.

    Raises:
      ValueError: naming the bad key.
    """
    limits = {} if limits is None else limits
    if not isinstance(limits, Mapping):
        raise ValueError(f"limits: must map {', '.join(LIMIT_KEYS)} to numbers or null, got {limits!r}")
    unknown = sorted(set(limits) - set(LIMIT_KEYS))
    if unknown:
        raise ValueError(f"limits.{unknown[0]}: unknown limit; accepted: {', '.join(LIMIT_KEYS)}")
    out: dict[str, float | None] = {}
    for key, default in LIMIT_KEYS.items():
        value = limits.get(key, default)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise ValueError(f"limits.{key}: must be a number > 0 or null, got {value!r}")
        out[key] = None if value is None else float(value)
    return out


# ---- composing conf/ -------------------------------------------------------------------------------
def find_conf_dir() -> Path:
    """The ``conf/`` directory: ``$PPSWEEP_CONF_DIR``, else the one beside the package, else ``./conf``.

    Raises:
      SystemExit: with one ``error:`` line when none is found.
    """
    env = os.environ.get("PPSWEEP_CONF_DIR")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parents[2] / "conf", Path.cwd() / "conf"]
    for candidate in candidates:
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SystemExit(
        "error: ppsweep's conf/ directory not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); set PPSWEEP_CONF_DIR"
    )


def available_sweeps(config_dirs: Sequence[str | os.PathLike] = ()) -> list[str]:
    """Names of the sweeps in ``conf/sweep/`` and in ``sweep/`` of every extra config directory."""
    dirs = [find_conf_dir(), *(Path(d) for d in config_dirs)]
    return sorted({f.stem for d in dirs for f in (d / "sweep").glob("*.yaml")})


def check_sweep_names(names: Sequence[str], config_dirs: Sequence[str | os.PathLike] = ()) -> None:
    """Raise a ValueError naming the available sweeps unless every name in ``names`` is one."""
    known = available_sweeps(config_dirs)
    for name in names:
        if name not in known:
            raise ValueError(
                f"sweep: unknown sweep {name!r}; available: {', '.join(known)} "
                "(conf/sweep/, and sweep/NAME.yaml under --config-dir DIR)"
            )


def compose_config(overrides: Sequence[str] = (), config_dirs: Sequence[str | os.PathLike] = ()) -> DictConfig:
    """Compose ``conf/config.yaml`` with command-line style overrides (Hydra's compose API).

    Args:
      overrides: as on the command line, e.g. ``["+sweep=bandwidth", "p=[4]"]``.
      config_dirs: extra config directories (the command line's ``--config-dir``).

    Returns:
      The composed config (unresolved, without ``hydra``).

    Raises:
      ValueError: an unknown ``+sweep=`` name (naming the available ones).
    """
    from hydra import compose, initialize_config_dir

    overrides = list(overrides)
    sweeps = [o.split("=", 1)[1] for o in overrides if o.lstrip("+~").split("=", 1)[0] == "sweep" and "=" in o]
    check_sweep_names(sweeps, config_dirs)
    if config_dirs:
        paths = ",".join(f"file://{Path(d).absolute()}" for d in config_dirs)
        overrides.append(f"hydra.searchpath=[{paths}]")
    with initialize_config_dir(config_dir=str(find_conf_dir()), version_base="1.3"):
        return compose("config", overrides=overrides)


def load_plan(overrides: Sequence[str] = (), config_dirs: Sequence[str | os.PathLike] = (), base_dir: str | os.PathLike | None = None) -> Plan:
    """Compose and validate a run: :func:`compose_config`, then :func:`plan_from_config`."""
    return plan_from_config(compose_config(overrides, config_dirs), base_dir)


def load_config(overrides: Sequence[str] = (), config_dirs: Sequence[str | os.PathLike] = ()) -> SweepSpec:
    """Compose and validate a sweep, e.g. ``load_config(["+sweep=paper", "p=[4]"])``.

    Args:
      overrides: command-line style overrides.
      config_dirs: extra config directories (``--config-dir``).

    Returns:
      The validated :class:`SweepSpec`.

    Raises:
      ValueError: naming the first bad field (or an unknown sweep).
    """
    return spec_from_config(compose_config(overrides, config_dirs))
