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

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict

from ppsweep.tables.build import check_positive_int, resolve_options
from ppsweep.engine.comm import check_mode
from ppsweep.cost_model import IDENTITY_WHEN_SET, RECOMPUTE_MODES, ModelConfig, SystemConfig
from ppsweep.cost_profile import CostProfile, load_cost_profile
from ppsweep.layout import LayoutOptions
from ppsweep.engine.noise import NoiseConfig
from ppsweep.schedules import get_schedule
from ppsweep.schedules.variants import canonical_label

#: Every dimension a results store can have, in store order, with its ``units`` attribute (None:
#: no units). ``schedule``, ``p``, ``m``, ``bandwidth`` and ``latency`` are always present.
DIMENSIONS: dict[str, str | None] = {
    "schedule": None,
    "p": "workers",
    "m": "microbatches",
    "gpus": "GPUs",
    "tp": "GPUs",
    "dp": "replicas",
    "cp": "GPUs",
    "recompute": None,
    "memory_capacity": "bytes",
    "system": None,
    "comm": None,
    "compute": "FLOP/s",
    "bandwidth": "bytes/s",
    "latency": "s",
    "sample": None,
}
#: Dimensions of per-table variables (and the first ones of every per-point variable).
TABLE_DIMS = ("schedule", "p", "m")
#: Layout dimensions (docs/contract.md §3b), in store order; present only in sweeps that set them.
LAYOUT_DIMS = ("gpus", "tp", "dp", "cp")
#: Dimensions no per-point variable has: only ``fits`` (README, "Memory and the fastest schedule that fits").
CAPACITY_DIMS = ("memory_capacity",)
#: Config keys that belong to one job, not to the sweep: left out of the store's ``config``.
JOB_KEYS = ("shard", "finalize", "dry_run")

# ---- accepted ranges (README, "Sweeps and the results dataset": "Accepted values") ---------------
#: Physical range of the network axes (and of ``system.bandwidth`` / ``system.latency``): a link
#: from 1 MB/s to 1 PB/s, a latency from 0 to 1 s. Outside it a value is a typo (a unit slip).
BANDWIDTH_RANGE = (1.0e6, 1.0e15)
LATENCY_RANGE = (0.0, 1.0)
#: Most values of one axis (a list, or ``${logspace:…}``'s ``num``): building a longer one alone
#: takes minutes in the config library.
MAX_AXIS_VALUES = 10_000
#: Largest ``engine.chunk`` (points per scan tile); its working set grows with it.
MAX_CHUNK = 1 << 22
#: Largest ``slots.f`` / ``slots.b``: a table's length grows with them.
MAX_SLOTS = 64
#: ``engine.workers`` at most this many per core of the machine (each is a process with JAX).
WORKERS_PER_CORE = 4

# ---- the store's identity ------------------------------------------------------------------------
# A store's identity (:func:`ppsweep.store.results.identity`) is built GENERICALLY from every field of the
# resolved :class:`SweepSpec`: a field added to the spec is part of the identity unless it is
# named here. Config keys that never reach the spec are listed in RUN_KEYS; a test composes the
# config and checks that changing any other key changes the identity (tests/test_faults.py).
#: SweepSpec fields that cannot change a stored value, with the reason.
NOT_IN_IDENTITY: dict[str, str] = {
    "name": "names the store's file; the values do not depend on it",
}
#: SweepSpec fields left out of the identity while None (their default), so that the stores written
#: before the field existed keep their fingerprint; any other value is in the identity.
ABSENT_WHEN_NONE: dict[str, str] = {
    "profile": "costs=model (the cost model); a profile's values are in the identity",
}
#: Config keys (dotted) whose value, when not null, names an input file (absolute or relative to the
#: directory ppsweep runs in): its absolute path and content digest go into ``SweepSpec.inputs``, and
#: so into the store's identity. A key added to the config that names a file belongs here.
INPUT_FILE_KEYS: tuple[str, ...] = ("costs.profile",)
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
    "engine.cluster": "where units are evaluated (a dask.distributed cluster)",
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
      profile: profiled costs (``costs=profile``, :mod:`ppsweep.cost_profile`) in place of the cost
        model's, or None (the model's).
      gpus: GPU totals of a ``gpus`` dimension (docs/contract.md §3b): every ``tp · p · dp · cp =
        gpus`` split, ``dp`` derived (the variable ``dp``); None: no dimension.
      tp, dp, cp: degrees of the ``tp``, ``dp``, ``cp`` dimensions (``dp`` only without ``gpus``;
        with ``gpus``, ``tp`` and ``cp`` default to ``(1,)``); None: no dimension (degree 1).
      layout: how the layout's collectives run (:class:`ppsweep.layout.LayoutOptions`); None
        unless the sweep has a layout dimension or ``systems``.
      systems: the systems of a ``system`` dimension (their names its coordinate); None: ``system``.
      inputs: every file the values depend on besides the package's code: user schedules (a CSV
        file, a ``module:function``'s module) and the files named by :data:`INPUT_FILE_KEYS`,
        as ``label -> {"path": absolute path, "sha256": content digest}`` (:func:`input_files`).

    The layout fields and ``systems`` enter the store's identity only when set.
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
    profile: CostProfile | None = None
    gpus: tuple[int, ...] | None = field(default=None, metadata=IDENTITY_WHEN_SET)
    tp: tuple[int, ...] | None = field(default=None, metadata=IDENTITY_WHEN_SET)
    dp: tuple[int, ...] | None = field(default=None, metadata=IDENTITY_WHEN_SET)
    cp: tuple[int, ...] | None = field(default=None, metadata=IDENTITY_WHEN_SET)
    layout: LayoutOptions | None = field(default=None, metadata=IDENTITY_WHEN_SET)
    systems: tuple[SystemConfig, ...] | None = field(default=None, metadata=IDENTITY_WHEN_SET)
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)


    @property
    def has_layout(self) -> bool:
        """Whether the sweep has a layout dimension or a ``system`` dimension (evaluated by :mod:`ppsweep.sweep.layout_eval`)."""
        return self.layout is not None

    @property
    def layout_dims(self) -> tuple[str, ...]:
        """The layout dimensions present, in store order."""
        return tuple(d for d in LAYOUT_DIMS if getattr(self, d) is not None)

    def system_list(self) -> tuple[SystemConfig, ...]:
        """The systems of the ``system`` dimension, or ``(system,)``."""
        return self.systems if self.systems is not None else (self.system,)

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
            **{d: None if getattr(self, d) is None else np.array(getattr(self, d), dtype=np.int64) for d in LAYOUT_DIMS},
            "recompute": None if self.recompute is None else np.array(self.recompute, dtype=object),
            "memory_capacity": None if self.memory_capacity is None else np.asarray(self.memory_capacity, dtype=float),
            "system": None if self.systems is None else np.array([s.name for s in self.systems], dtype=object),
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
        """Dimensions of per-table variables (``valid``): ``schedule, p, m`` and the layout dimensions."""
        return TABLE_DIMS + self.layout_dims

    def dims_of(self, kind: str) -> tuple[str, ...]:
        """Dimensions of a variable of ``kind``: ``point``, ``nominal`` (a point's noise-free value:
        no ``sample``), ``table``, ``memory`` (a table's memory, per recomputation mode) or ``fits``
        (memory, per capacity)."""
        table = TABLE_DIMS + self.layout_dims
        memory = table + (("recompute",) if self.recompute is not None else ())
        return {
            "point": self.point_dims,
            "nominal": self.nominal_dims,
            "table": table,
            "memory": memory,
            "fits": memory + CAPACITY_DIMS,
            "layout": ("p", "m") + self.layout_dims,
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
    num = check_positive_int(f"{field_name}.num", num, 1, MAX_AXIS_VALUES)
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
    check_keys(cfg)
    model = ModelConfig.from_mapping(_mapping(cfg, "model"))
    _check_system_lists(_mapping(cfg, "system"))
    system = SystemConfig.from_mapping(_mapping(cfg, "system"))
    schedules = tuple(canonical_label(label) for label in _list(cfg, "schedules"))
    if not schedules:
        raise ValueError("schedules: must name at least one schedule")
    options = cfg.get("schedule_options") or {}
    if not isinstance(options, Mapping):
        raise ValueError(f"schedule_options: must map schedule names to options, e.g. {{hanayo: {{waves: 2}}}}, got {options!r}")
    p_values = tuple(check_positive_int("p", v, 2) for v in _list(cfg, "p"))
    m_values = tuple(check_positive_int("m", v, 1) for v in _list(cfg, "m"))
    for name in options:
        get_schedule(name)
    for name in schedules:
        resolved = resolve_options(name, dict(options.get(name) or {}))
        # Option values are checked by the schedule itself (waves >= 1, split 'a:b', ...): before
        # any store or table exists. Cheap: no table is built.
        try:
            get_schedule(name).why_unsupported(p_values[0], m_values[0], **resolved)
        except (ValueError, TypeError) as error:
            raise ValueError(f"schedule {name!r}: {error}") from None
    comm = cfg.get("comm") or {}
    modes = comm.get("mode", "overlap") if isinstance(comm, Mapping) else comm
    comm_axis = isinstance(modes, (list, tuple))
    modes = tuple(modes) if comm_axis else (modes,)
    if not modes:
        raise ValueError("comm.mode: must name at least one mode (overlap, blocking, contention, ...), got []")
    compute = cfg.get("compute")
    profile = _profile(cfg.get("costs"))
    if profile is not None:
        _check_profile_sweep(cfg, profile, system)
    engine = cfg.get("engine") or {}
    slots = cfg.get("slots") or {}
    dtype = engine.get("dtype", "float64")
    if dtype not in ("float64", "float32"):
        raise ValueError(f"engine.dtype: must be float64 or float32, got {dtype!r}")
    spec = SweepSpec(
        name=_name(cfg.get("name", "default")),
        schedules=schedules,
        schedule_options={k: dict(v or {}) for k, v in options.items()},
        p=p_values,
        m=m_values,
        comm=modes,
        comm_axis=comm_axis,
        compute=None if compute is None else _axis("compute", compute, positive=True),
        bandwidth=_in_range("bandwidth", _axis("bandwidth", cfg.get("bandwidth"), positive=True, default=_network_default(profile, "beta", system.bandwidth)), BANDWIDTH_RANGE, "bytes/s"),
        latency=_in_range("latency", _axis("latency", cfg.get("latency"), positive=False, default=_network_default(profile, "alpha", system.latency)), LATENCY_RANGE, "s"),
        model=model,
        system=system,
        f_slots=check_positive_int("slots.f", slots.get("f", 1), 1, MAX_SLOTS),
        b_slots=check_positive_int("slots.b", slots.get("b", 2), 1, MAX_SLOTS),
        dtype=dtype,
        chunk=check_positive_int("engine.chunk", engine.get("chunk", 1024), 1, MAX_CHUNK),
        method=engine.get("method", "auto"),
        recompute=_recompute_axis(cfg.get("recompute"), system),
        memory_capacity=None if cfg.get("memory_capacity") is None else _axis("memory_capacity", cfg["memory_capacity"], positive=True),
        noise=NoiseConfig.from_mapping(cfg.get("noise")),
        profile=profile,
        **_layout_fields(cfg),
        inputs=input_files(cfg, schedules),
    )
    if spec.systems is not None:  # null axes: every system's own inter-node value
        for axis, key in (("bandwidth", "bandwidth"), ("latency", "latency")):
            if cfg.get(axis) is None:
                spec = replace(spec, **{axis: np.unique([getattr(s, key) for s in spec.systems]).astype(float)})
    if spec.has_layout and spec.noise.enabled:
        raise ValueError("noise.samples: layout sweeps (gpus, tp, dp, cp, systems) run without noise; set noise.samples=0")
    if spec.has_layout and spec.compute is not None:
        raise ValueError("compute: layout sweeps take the compute of each system (systems); set compute=null")
    if spec.has_layout and spec.profile is not None:
        raise ValueError("costs: layout sweeps (gpus, tp, dp, cp, systems) use the cost model; set costs=model")
    for dim, values in spec.coords().items():
        if len(set(values.tolist())) != len(values):
            raise ValueError(f"{dim}: values must be distinct, got {values.tolist()}")
    for mode in modes:
        check_mode(mode)
    workers = spec.noise.straggler_workers
    if spec.noise.enabled and workers and max(workers) >= max(spec.p):
        raise ValueError(
            f"noise.straggler.workers: worker {max(workers)} exists at no p of this sweep (workers are 0 … p-1, "
            f"largest p = {max(spec.p)}); name workers below {max(spec.p)}, or null for every worker"
        )
    # The engine's names of methods and scans, from a module that does not import the engine (nor JAX):
    # the evaluators a run spawns after this check then import JAX while this process does.
    from ppsweep.engine.methods import check_method, scan_implementation

    check_method(spec.method)
    scan_implementation()  # PPSWEEP_SCAN: refused here, before any store, not inside a unit
    return spec


def _layout_fields(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The layout fields of a :class:`SweepSpec` (``gpus``, ``tp``, ``dp``, ``cp``, ``layout``, ``systems``), checked."""
    out: dict[str, Any] = {}
    for dim in LAYOUT_DIMS:
        value = cfg.get(dim)
        if value is not None:
            values = value if isinstance(value, (list, tuple)) else [value]
            if not values:
                raise ValueError(f"{dim}: must list at least one value, e.g. {dim}=[1,2], got []")
            out[dim] = tuple(check_positive_int(dim, v, 1) for v in values)
    if "gpus" in out:
        if "dp" in out:
            raise ValueError("dp: with gpus the data-parallel degree follows (gpus / (tp·p·cp)); leave dp unset")
        out.setdefault("tp", (1,))
        out.setdefault("cp", (1,))
    systems = cfg.get("systems")
    if systems is not None:
        if not isinstance(systems, Mapping) or not systems:
            raise ValueError("systems: must map names to system configs (defaults: - /system@systems.NAME: FILE)")
        out["systems"] = tuple(SystemConfig.from_mapping({**dict(v), "name": str(k)}) for k, v in systems.items())
        for system in out["systems"]:
            if system.memory_capacity is not None:
                raise ValueError(f"systems.{system.name}.memory_capacity: give the caps as the sweep's memory_capacity list")
    options = cfg.get("layout")
    if out or options is not None:
        out["layout"] = LayoutOptions.from_mapping(options)
    return out


def profile_path(costs: Any, base_dir: str | os.PathLike | None = None) -> Path | None:
    """The absolute path of ``costs.profile`` (relative: to ``base_dir``, default the current directory), or None (``costs=model``).

    Raises:
      ValueError: ``costs`` is not a mapping, or ``costs.profile`` is missing or not a path.
    """
    if costs is None:
        return None
    if not isinstance(costs, Mapping):
        raise ValueError(f"costs: choose costs=model or costs=profile costs.profile=FILE, got {costs!r}")
    unknown = sorted(set(costs) - {"profile"})
    if unknown:
        raise ValueError(f"costs.{unknown[0]}: unknown key; accepted: profile (with costs=profile)")
    if "profile" not in costs:
        return None
    path = costs["profile"]
    if path in (None, "???") or not isinstance(path, str) or not path:
        raise ValueError("costs.profile: missing; give the profiled-costs file, costs=profile costs.profile=path.yaml")
    path = Path(os.path.expanduser(path))
    return (Path(base_dir) / path if base_dir is not None and not path.is_absolute() else path).absolute()


def _profile(costs: Any) -> CostProfile | None:
    """The profile named by ``costs.profile`` (None: ``costs=model``); a bad file: ValueError naming the file and the field."""
    path = profile_path(costs)
    if path is None:
        return None
    try:
        return load_cost_profile(path)
    except ValueError as error:
        message = str(error)
        raise ValueError(message if message.startswith("costs.profile") else f"costs.profile: {path}: {message}") from None


def _check_profile_sweep(cfg: Mapping[str, Any], profile: CostProfile, system: SystemConfig) -> None:
    """Refuse the keys a profile replaces or cannot serve (docs/contract.md §3a)."""
    if cfg.get("compute") is not None:
        raise ValueError("compute: scales the cost model's roofline; with costs=profile the times are measured: set compute=null")
    if cfg.get("recompute") is not None:
        raise ValueError("recompute: the cost model's recomputation modes; with costs=profile the times are measured with one: set recompute=null")
    if not profile.has_memory:
        for key, value in (("memory_capacity", cfg.get("memory_capacity")), ("system.memory_capacity", system.memory_capacity)):
            if value is not None:
                raise ValueError(f"{key}: needs the profile's memory (memory: {{activation_bytes, persistent_bytes}}); set {key}=null or add it to the file")
    if profile.message_is_time:
        for key in ("bandwidth", "latency"):
            if cfg.get(key) is not None:
                raise ValueError(
                    f"{key}: the profile gives the message time (message.time), so bandwidth and latency cannot be swept; "
                    "set bandwidth=null latency=null, or give the profile's message as {alpha, beta, bytes}"
                )
    if profile.message_is_time:
        for key in ("intra_latency", "intra_bandwidth"):
            if getattr(system, key, None) is not None:
                raise ValueError(
                    f"system.{key}: the profile gives the message time (message.time) of every hop; set system.{key}=null, "
                    "or give the profile's message as {alpha, beta, bytes}"
                )
    if profile.t_fb is not None and system.fb_overlap != 0:
        raise ValueError("system.fb_overlap: the profile gives t_fb (the pair's measured time); set system.fb_overlap=0")
    if profile.t_opt is not None and system.optimizer_time != 0:
        raise ValueError("system.optimizer_time: the profile gives t_opt; set system.optimizer_time=0")


def _network_default(profile: CostProfile | None, name: str, system_value: float) -> float:
    """The bandwidth (``beta``) or latency (``alpha``) a sweep takes when it does not set the axis.

    The system's under the cost model; the profile's ``alpha``/``beta``; for a message time
    (``message: {time: T}``), latency ``T`` and the system's bandwidth (no bytes: it has no effect).
    """
    if profile is None:
        return system_value
    alpha, beta, _ = profile.network()
    if profile.message_is_time:
        return alpha if name == "alpha" else system_value
    value = alpha if name == "alpha" else beta
    if not np.isfinite(value):
        raise ValueError(f"bandwidth: the profile's message.beta is {value}; give the sweep's bandwidth=[...] (finite bytes/s)")
    return value


def _dotted(cfg: Mapping[str, Any], key: str) -> Any:
    value: Any = cfg
    for part in key.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def input_files(cfg: Mapping[str, Any], schedules: Sequence[str]) -> dict[str, dict[str, str]]:
    """The files a sweep's values depend on besides the code, resolved once to absolute paths.

    Args:
      cfg: the config (for :data:`INPUT_FILE_KEYS`).
      schedules: the schedule names (user schedules: :func:`ppsweep.schedules.user.schedule_file`).

    Returns:
      ``label -> {"path", "sha256"}``: a user schedule's name, or the config key.

    Raises:
      ValueError: naming the key or schedule whose file is missing or not a file.
    """
    from ppsweep.disk_cache import file_digest
    from ppsweep.schedules import SCHEDULES
    from ppsweep.schedules.user import schedule_file
    from ppsweep.schedules.variants import split_label

    files: dict[str, Path] = {}
    for name in schedules:
        base = split_label(name)[0]
        if base not in SCHEDULES:
            path = schedule_file(base)
            if path is not None:
                files[base] = path
    for key in INPUT_FILE_KEYS:
        value = _dotted(cfg, key)
        if value is None:
            continue
        path = Path(os.path.expanduser(str(value))).absolute()
        if not path.is_file():
            raise ValueError(f"{key}: {value!r} is {'a directory' if path.is_dir() else 'not found'}; name a file")
        files[key] = path
    return {label: {"path": str(path), "sha256": file_digest(path)} for label, path in sorted(files.items())}


def _in_range(field_name: str, values: np.ndarray, bounds: tuple[float, float], unit: str) -> np.ndarray:
    """``values``, or a ValueError naming ``field_name`` when one is outside ``bounds`` (physical range)."""
    low, high = bounds
    bad = values[(values < low) | (values > high)]
    if bad.size:
        raise ValueError(
            f"{field_name}: {bad[0]:g} {unit} is outside the physical range {low:g} … {high:g} {unit} "
            f"(a unit slip?); see README, \"Accepted values\""
        )
    return values


#: Keys whose value is a mapping of free keys (checked where they are used), not a config block.
FREE_KEYS = ("schedule_options", "bandwidth", "latency", "compute", "memory_capacity")


@functools.lru_cache(maxsize=1)
def known_keys() -> dict[str, Any]:
    """Every key a config may hold, as a tree (a mapping: a config block; None: a value), derived in
    one place from the schema: ``conf/config.yaml``'s keys, and the fields of the dataclasses the
    ``model`` and ``system`` groups become (:class:`ppsweep.costs.ModelConfig`,
    :class:`~ppsweep.costs.SystemConfig`). A key added to either is accepted without being named here.
    """
    from dataclasses import fields as dataclass_fields

    def tree(node: Any) -> Any:
        if isinstance(node, Mapping):
            return {str(k): tree(v) for k, v in node.items()}
        return None

    base = OmegaConf.to_container(OmegaConf.load(find_conf_dir() / "config.yaml"), resolve=False)
    assert isinstance(base, dict)
    base.pop("defaults", None)
    known = tree(base)
    known["model"] = {f.name: None for f in dataclass_fields(ModelConfig)}
    known["system"] = {f.name: None for f in dataclass_fields(SystemConfig)}
    for group in sorted(d for d in find_conf_dir().iterdir() if d.is_dir() and d.name not in ("hydra", "sweep", "model", "system")):
        # another config group (costs=...): the keys of any of its options
        known[group.name] = {str(k): None for f in group.glob("*.yaml") for k in (OmegaConf.to_container(OmegaConf.load(f)) or {})}
    for key in FREE_KEYS:
        known[key] = None
    return known


def check_keys(cfg: Mapping[str, Any], known: Mapping[str, Any] | None = None, prefix: str = "") -> None:
    """Raise a ValueError naming the first key of ``cfg`` that is no config key, with the closest ones.

    Hydra's ``+foo=1`` and ``+engine.bogus=1`` add keys silently; they end here, before any store
    exists. The accepted keys come from :func:`known_keys`.
    """
    import difflib

    known = known_keys() if known is None else known
    for key, value in cfg.items():
        key = str(key)
        if not prefix and key in ("hydra", "sweep"):  # Hydra's own block; a misplaced sweep file (spec_from_config)
            continue
        if key not in known:
            names = [f"{prefix}{k}" for k in known]
            close = difflib.get_close_matches(f"{prefix}{key}", names, n=3, cutoff=0.5)
            hint = f"closest: {', '.join(close)}" if close else f"valid keys{' under ' + prefix[:-1] if prefix else ''}: {', '.join(sorted(names))}"
            raise ValueError(f"{prefix}{key}: unknown config key; {hint}")
        if isinstance(known[key], Mapping) and isinstance(value, Mapping):
            check_keys(value, known[key], f"{prefix}{key}.")


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
        from omegaconf.errors import OmegaConfBaseException

        try:
            container = OmegaConf.to_container(cfg, resolve=True)
        except OmegaConfBaseException as error:  # a resolver's error (${logspace:...}): one line naming the key
            cause: BaseException = error
            while (cause.__cause__ or cause.__context__) is not None:
                cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
            key = getattr(error, "full_key", None)
            message = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
            raise ValueError(f"{key}: {message}" if key else message) from None
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


#: System fields that a sweep varies through a top-level axis: ``system.<field>`` -> the axis's key.
SYSTEM_FIELD_AXES = {"bandwidth": "bandwidth", "latency": "latency", "memory_capacity": "memory_capacity", "peak_flops": "compute"}


def _check_system_lists(system: Mapping[str, Any]) -> None:
    """A list given to a system field names the top-level key that sweeps it (one line)."""
    for name, axis in SYSTEM_FIELD_AXES.items():
        value = system.get(name)
        if isinstance(value, (list, tuple)):
            raise ValueError(
                f"system.{name}: one number per system, got a list {list(value)!r}; a list of values to sweep "
                f"is the top-level {axis!r} key ({axis}={list(value)!r})"
            )


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
    if array.size > MAX_AXIS_VALUES:
        raise ValueError(f"{field_name}: at most {MAX_AXIS_VALUES:,} values per axis, got {array.size:,}")
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
      cluster: ``engine.cluster``: a dask.distributed scheduler (``dask://HOST:PORT``) whose
        workers evaluate the units (:mod:`ppsweep.sweep.cluster`), or None: this machine.
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
    cluster: str | None = None
    dry_run: bool = False
    limits: dict[str, float | None] = field(default_factory=dict)

    @property
    def units(self) -> tuple[tuple[int, int], ...]:
        """The ``(p index, m index)`` units this job owns (every unit without a shard)."""
        if self.shard is None:
            return tuple(self.spec.units())
        return tuple(shard_units(self.spec, self.shards, self.shard))


#: Accepted forms of ``engine.cluster`` (README, "Running on a dask cluster").
CLUSTER_SCHEMES = ("dask://", "tcp://", "tls://")


def scheduler_address(cluster: str) -> str:
    """The scheduler's address of ``engine.cluster``: ``dask://HOST:PORT`` → ``tcp://HOST:PORT``.

    Raises:
      ValueError: naming ``engine.cluster`` and the accepted forms.
    """
    if not isinstance(cluster, str) or not cluster.startswith(CLUSTER_SCHEMES) or ":" not in cluster.split("://", 1)[1]:
        raise ValueError(f"engine.cluster: must be null or dask://HOST:PORT (tcp://, tls:// too), got {cluster!r}")
    scheme, rest = cluster.split("://", 1)
    return f"{'tcp' if scheme == 'dask' else scheme}://{rest}"


def config_yaml(cfg: Mapping[str, Any] | DictConfig) -> str:
    """The resolved config as YAML, without ``hydra`` and the job-only keys: the store's ``config``."""
    stored = OmegaConf.create(_container(cfg))
    with open_dict(stored):
        for key in ("hydra", *JOB_KEYS):
            stored.pop(key, None)
        if not stored.get("costs"):  # costs=model: the config as before profiles existed
            stored.pop("costs", None)
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
    path = profile_path(container.get("costs"), base_dir)
    if path is not None:  # resolved once, recorded absolute (the store's config, every shard's job)
        container["costs"] = {**container["costs"], "profile": str(path)}
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
    elif workers > WORKERS_PER_CORE * (os.cpu_count() or 1):
        raise ValueError(
            f"engine.workers: at most {WORKERS_PER_CORE} per core of this machine ({WORKERS_PER_CORE * (os.cpu_count() or 1)}; "
            f"each is a process with its own JAX), got {workers}; use auto"
        )
    cluster = (container.get("engine") or {}).get("cluster")
    if cluster is not None:
        scheduler_address(cluster)  # raises naming engine.cluster
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
        cluster=cluster,
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
    """The ``conf/`` directory: ``$PPSWEEP_CONF_DIR``, else the package's own (``ppsweep/conf``: in a
    checkout a link to the repository's ``conf/``, in a wheel its copy as package data), else ``./conf``.

    Raises:
      SystemExit: with one ``error:`` line when none is found.
    """
    env = os.environ.get("PPSWEEP_CONF_DIR")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parents[1] / "conf", Path.cwd() / "conf"]
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
