"""Sweeps: a grid of points, cut into units of work, each evaluated at all three levels.

A :class:`SweepSpec` is the validated form of a sweep's config. Its grid has the dimensions
``schedule × p × m [× comm] [× compute] × bandwidth × latency``. One **unit** of work is one
``(p, m)`` pair with every schedule, mode, compute value, bandwidth and latency: it builds each
schedule's table once, runs the engine over all the unit's points that share it, and ranks the
schedules point by point. A unit is also one chunk of the store (:mod:`ppsweep.store`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ppsweep.build import UnsupportedPointError, bubble_formula, build_schedule, check_positive_int, resolve_options
from ppsweep.costs import ModelConfig, SystemConfig, memory_figures, stage_costs
from ppsweep.engine import check_method, check_mode, simulate
from ppsweep.noise import NoiseConfig
from ppsweep.ranking import rank_lower_better
from ppsweep.schedules import get_schedule

#: Variables of the results dataset (SPEC section 5): dims kind, units, long name.
#: "table" variables depend on (schedule, p, m); "point" variables on every dimension.
VARIABLES: dict[str, tuple[str, str, str]] = {
    "t_sim": ("point", "s", "simulated step time"),
    "throughput": ("point", "sequences/s", "global batch / step time"),
    "idle_sim": ("point", "1", "idle fraction of the simulated step"),
    "comm_time": ("point", "s", "time the critical path spends in messages"),
    "rank_sim": ("point", "1", "rank by simulated step time among valid schedules (1 = best)"),
    "bubble_formula": ("table", "1", "closed-form bubble ratio"),
    "bubble_table": ("table", "1", "idle cells / cells of the idealized table"),
    "length_table": ("table", "slots", "slots of the idealized table"),
    "peak_activation_bytes": ("table", "bytes", "bottleneck worker's peak activation memory"),
    "persistent_bytes": ("table", "bytes", "bottleneck worker's parameters, gradients, optimizer state"),
    "peak_memory_bytes": ("table", "bytes", "bottleneck worker's peak memory"),
    "rank_formula": ("table", "1", "rank by closed-form bubble among valid schedules (1 = best)"),
    "rank_table": ("table", "1", "rank by table bubble among valid schedules (1 = best)"),
}
VALID = ("table", "1", "schedule can run at this point; other variables are NaN where False")
#: Variables of a sweep with noise besides those (README, "Uncertainty"); "nominal" variables have
#: the point dimensions without ``sample``.
NOISE_VARIABLES: dict[str, tuple[str, str, str]] = {
    "t_sim_nominal": ("nominal", "s", "simulated step time without noise"),
}


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep.

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
      chunk: engine points per compiled call.
      method: engine method, ``auto``, ``scan`` or ``envelope`` (:func:`ppsweep.engine.simulate`).
      noise: the noise model; with ``noise.samples > 0`` a ``sample`` dimension comes last.
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
    chunk: int = 16384
    method: str = "auto"
    noise: NoiseConfig = NoiseConfig()

    # ---- grid ----------------------------------------------------------------------------
    @property
    def point_dims(self) -> tuple[str, ...]:
        """Dimensions of per-point variables, in store order."""
        extra = (("comm",) if self.comm_axis else ()) + (("compute",) if self.compute is not None else ())
        return ("schedule", "p", "m") + extra + ("bandwidth", "latency") + (("sample",) if self.noise.enabled else ())

    @property
    def nominal_dims(self) -> tuple[str, ...]:
        """Dimensions of noise-free per-point variables (the point dimensions without ``sample``)."""
        return tuple(d for d in self.point_dims if d != "sample")

    def variables(self) -> dict[str, tuple[str, str, str]]:
        """The stored variables (``valid`` aside): :data:`VARIABLES`, and :data:`NOISE_VARIABLES` with noise."""
        return {**VARIABLES, **(NOISE_VARIABLES if self.noise.enabled else {})}

    def dims_of(self, kind: str) -> tuple[str, ...]:
        """Dimensions of a variable of ``kind`` (``point``, ``nominal`` or ``table``)."""
        return {"point": self.point_dims, "nominal": self.nominal_dims, "table": self.table_dims}[kind]

    @property
    def table_dims(self) -> tuple[str, ...]:
        """Dimensions of per-table variables."""
        return ("schedule", "p", "m")

    def coords(self) -> dict[str, np.ndarray]:
        """Coordinate values of every dimension."""
        coords: dict[str, np.ndarray] = {
            "schedule": np.array(self.schedules, dtype=object),
            "p": np.array(self.p, dtype=np.int64),
            "m": np.array(self.m, dtype=np.int64),
        }
        if self.comm_axis:
            coords["comm"] = np.array(self.comm, dtype=object)
        if self.compute is not None:
            coords["compute"] = np.asarray(self.compute, dtype=float)
        coords["bandwidth"] = np.asarray(self.bandwidth, dtype=float)
        coords["latency"] = np.asarray(self.latency, dtype=float)
        if self.noise.enabled:
            coords["sample"] = np.arange(self.noise.samples, dtype=np.int64)
        return coords

    def shape(self, dims: Sequence[str]) -> tuple[int, ...]:
        """Lengths of ``dims``."""
        coords = self.coords()
        return tuple(len(coords[d]) for d in dims)

    def units(self) -> list[tuple[int, int]]:
        """Every unit of work, as (p index, m index)."""
        return [(i, j) for i in range(len(self.p)) for j in range(len(self.m))]

    @property
    def n_points(self) -> int:
        """Points of the whole grid."""
        return int(np.prod(self.shape(self.point_dims)))

    def options_for(self, schedule: str) -> dict[str, Any]:
        """Options of ``schedule`` in this sweep."""
        return dict(self.schedule_options.get(schedule, {}))

    # ---- construction ----------------------------------------------------------------------
    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "SweepSpec":
        """Validate a resolved config (a plain mapping, e.g. ``OmegaConf.to_container(cfg)``).

        Raises:
          ValueError: naming the first bad field and what it accepts.
        """
        model = ModelConfig.from_mapping(_mapping(cfg, "model"))
        system = SystemConfig.from_mapping(_mapping(cfg, "system"))
        schedules = tuple(_list(cfg, "schedules"))
        if not schedules:
            raise ValueError("schedules: must name at least one schedule")
        options = dict(cfg.get("schedule_options") or {})
        for name in schedules:
            get_schedule(name)
            resolve_options(name, dict(options.get(name) or {}))
        for name in options:
            get_schedule(name)
        comm = cfg.get("comm") or {}
        modes = comm.get("mode", "overlap") if isinstance(comm, Mapping) else comm
        comm_axis = isinstance(modes, (list, tuple))
        modes = tuple(modes) if comm_axis else (modes,)
        for mode in modes:
            check_mode(mode)
        compute = cfg.get("compute")
        engine = cfg.get("engine") or {}
        slots = cfg.get("slots") or {}
        dtype = engine.get("dtype", "float64")
        if dtype not in ("float64", "float32"):
            raise ValueError(f"engine.dtype: must be float64 or float32, got {dtype!r}")
        spec = cls(
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
            chunk=check_positive_int("engine.chunk", engine.get("chunk", 16384), 1),
            method=check_method(engine.get("method", "auto")),
            noise=NoiseConfig.from_mapping(cfg.get("noise")),
        )
        for dim in ("schedule", "p", "m", "comm", "compute", "bandwidth", "latency"):
            values = spec.coords().get(dim)
            if values is not None and len(set(values.tolist())) != len(values):
                raise ValueError(f"{dim}: values must be distinct, got {values.tolist()}")
        return spec


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
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _axis(field_name: str, value: Any, positive: bool, default: float | None = None) -> np.ndarray:
    """A numeric axis from a number, a list, or ``{start, stop, num}`` (log-spaced)."""
    if value is None:
        value = [default]
    if isinstance(value, Mapping):
        unknown = set(value) - {"start", "stop", "num"}
        if unknown or not {"start", "stop", "num"} <= set(value):
            raise ValueError(f"{field_name}: a range needs exactly start, stop and num (log-spaced), got {dict(value)}")
        num = check_positive_int(f"{field_name}.num", value["num"], 1)
        start, stop = float(value["start"]), float(value["stop"])
        if not (start > 0 and stop > 0):
            raise ValueError(f"{field_name}: log-spaced range needs start > 0 and stop > 0, got {start}, {stop}")
        array = np.logspace(math.log10(start), math.log10(stop), num)
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


def evaluate_unit(spec: SweepSpec, p_index: int, m_index: int) -> dict[str, np.ndarray]:
    """Evaluate one ``(p, m)`` unit at all three levels.

    Returns:
      ``name -> array``: point variables with shape ``spec.shape(spec.point_dims)`` restricted to
      this ``(p, m)`` (length-1 ``p`` and ``m`` axes), table variables and ``valid`` with shape
      ``(n_schedules, 1, 1)``.
    """
    p, m = spec.p[p_index], spec.m[m_index]
    shapes = {kind: (len(spec.schedules), 1, 1) + spec.shape(spec.dims_of(kind)[3:]) for kind in ("point", "nominal", "table")}
    point_shape = shapes["point"]
    out = {name: np.full(shapes[kind], np.nan) for name, (kind, _, _) in spec.variables().items()}
    table_shape = shapes["table"]
    out["valid"] = np.zeros(table_shape, dtype=bool)
    for k, name in enumerate(spec.schedules):
        try:
            table = build_schedule(name, p, m, spec.f_slots, spec.b_slots, **spec.options_for(name))
        except UnsupportedPointError:
            continue
        memory = memory_figures(spec.model, table, m)
        cap = spec.system.memory_capacity
        if cap is not None and memory.peak_memory_bytes > cap:
            continue
        out["valid"][k] = True
        out["bubble_formula"][k] = bubble_formula(name, p, m, **spec.options_for(name))
        out["bubble_table"][k] = table.bubble_ratio()
        out["length_table"][k] = table.length
        out["peak_activation_bytes"][k] = memory.peak_activation_bytes
        out["persistent_bytes"][k] = memory.persistent_bytes
        out["peak_memory_bytes"][k] = memory.peak_memory_bytes
        for name_, value in simulate_table(spec, table).items():
            out[name_][k] = value.reshape(out[name_].shape[1:])
    out["rank_formula"] = rank_lower_better(out["bubble_formula"], axis=0)
    out["rank_table"] = rank_lower_better(out["bubble_table"], axis=0)
    out["rank_sim"] = rank_lower_better(out["t_sim"], axis=0)
    return out


def simulate_table(spec: SweepSpec, table) -> dict[str, np.ndarray]:
    """Engine results of one table over the unit's ``[comm ×] [compute ×] bandwidth × latency [× sample]`` points
    (with noise also ``t_sim_nominal``, without the sample axis)."""
    costs = stage_costs(spec.model, spec.system, table, peak_flops=spec.compute)
    S = table.n_stages
    # Axes: compute (or 1) × bandwidth × latency × stage.
    t_f = costs.t_f[:, None, None, :]
    t_b = costs.t_b[:, None, None, :]
    t_i = costs.t_i[:, None, None, :]
    t_w = costs.t_w[:, None, None, :]
    beta = spec.bandwidth[None, :, None]
    alpha = spec.latency[None, None, :]
    per_mode = []
    for mode in spec.comm:
        run = lambda noise: simulate(  # noqa: E731
            table, t_f, t_b, alpha, beta, costs.msg_bytes, mode,
            t_i=t_i, t_w=t_w, grad_bytes=costs.grad_bytes.reshape(1, 1, 1, S),
            t_opt=spec.system.optimizer_time, dtype=spec.dtype, chunk=spec.chunk,
            method=spec.method, finish=False, noise=noise,
        )
        result = run(spec.noise if spec.noise.enabled else None)
        t_sim = result.t_sim
        values = {
            "t_sim": t_sim,
            "throughput": spec.model.global_batch / t_sim,
            "idle_sim": result.idle_fraction(table.p),
            "comm_time": result.comm_time,
        }
        if spec.noise.enabled:
            values["t_sim_nominal"] = result.t_sim[..., 0] if spec.noise.is_zero else run(None).t_sim
        per_mode.append(values)
    stacked = {}
    for name in per_mode[0]:
        value = np.stack([r[name] for r in per_mode])  # comm × compute × bandwidth × latency
        if not spec.comm_axis:
            value = value[0]
        if spec.compute is None:
            value = value[(0,) if not spec.comm_axis else (slice(None), 0)]
        stacked[name] = value
    return stacked
