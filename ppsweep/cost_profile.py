"""Profiled costs: measured per-stage times (and message, memory) from a small file, in place of the cost model.

A profile (format ``ppsweep-costs/1``, README "Bringing your own measurements", docs/contract.md §3a)
gives per-stage seconds per microbatch ``t_f``, ``t_b`` (or ``t_i`` and ``t_w``), optionally the
overlapped pair time ``t_fb``, the per-hop message as ``time`` or as ``alpha``, ``beta``,
``bytes``, and optionally the optimizer time, memory and gradient bytes. YAML, JSON and CSV read
the same keys; :func:`write_cost_profile` writes YAML that reads back equal.

- :func:`load_cost_profile` ``(path) -> CostProfile`` (a bad file: ValueError, one line naming the field);
- :func:`profile_from_mapping`: the same from already parsed data;
- :func:`write_cost_profile` ``(profile, path)``;
- :func:`stage_values`: a profile's per-stage values on a table of another stage count
  (split into ``k`` chunks or ``k`` stages merged; :class:`StageCountError` otherwise);
- :func:`engine_costs_from_profile` ``(profile, table, ...) -> Costs`` for
  ``ppsweep.engine.simulate(table, costs, mode)``;
- :func:`profile_memory`: the bottleneck worker's memory from the profile's bytes.

Rules chosen here (also in the README):

- a scalar applies to every stage; a profile whose per-stage fields are all scalars has no stage
  count and fits any table as is; otherwise every list has the same length ``S_prof``;
- missing ``t_i``/``t_w`` default to ``t_b/2`` each; without ``t_b``, ``t_b = t_i + t_w``;
- ``t_fb`` (a pair of a forward and a backward of the same stage, measured together) becomes one
  overlap credit per point, ``fb_overlap = Σ(t_f + t_b − t_fb) / Σ t_f`` over the table's stages (the
  engine's pair rule, :func:`ppsweep.tables.ops.pair_time`, has one credit); each stage needs
  ``t_b <= t_fb <= t_f + t_b``;
- ``message: {time: T}`` is a latency: ``alpha = T``, no bytes (``msg_bytes = 0``), so no link
  is held and ``contention``/``ports`` equal ``overlap``; ``{alpha, beta, bytes}`` is Hockney's
  ``alpha + bytes/beta``, and a sweep's bandwidth/latency axes override ``beta``/``alpha``;
- ``grad_bytes`` (optional, per stage, 0 by default) is what a replicated stage all-reduces;
- ``microbatch_size`` (optional, sequences per microbatch, default 1) counts the throughput.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: The value of ``format`` (optional in a file; any other is refused).
FORMAT = "ppsweep-costs/1"
#: Per-stage time fields (seconds per microbatch), in file order.
TIME_FIELDS = ("t_f", "t_b", "t_i", "t_w", "t_fb")
#: Per-stage byte fields.
BYTE_FIELDS = ("activation_bytes", "persistent_bytes", "grad_bytes")
#: Top-level keys of a file.
KEYS = ("format", "source", *TIME_FIELDS, "message", "t_opt", "memory", "grad_bytes", "microbatch_size", "spread")
#: Keys of ``message``: one of these two sets.
MESSAGE_TIME = ("time",)
MESSAGE_HOCKNEY = ("alpha", "beta", "bytes")
#: Keys of ``memory``.
MEMORY_KEYS = ("activation_bytes", "persistent_bytes")
#: Columns of a CSV file (one row per stage; message, t_opt and microbatch_size the same on every row).
CSV_COLUMNS = ("stage", *TIME_FIELDS, "msg_time", "alpha", "beta", "msg_bytes", "t_opt",
               *BYTE_FIELDS, "microbatch_size")
SUFFIXES = (".yaml", ".yml", ".json", ".csv")


class StageCountError(ValueError):
    """A profile of ``S_prof`` stages on a table of ``S`` stages where neither divides the other."""


@dataclass(frozen=True)
class CostProfile:
    """Measured costs, seconds per microbatch and bytes (build with :func:`load_cost_profile`).

    Attributes:
      n_stages: the profile's stage count ``S_prof``; None: every per-stage field was a scalar
        (the same on every stage of any table).
      t_f, t_b, t_i, t_w: per-stage seconds, tuples of length ``n_stages`` (1 when None).
      t_fb: per-stage seconds of an overlapped pair (forward and backward of the stage), or None.
      msg_time: per-hop message seconds (everything included), or None where Hockney's form is given.
      alpha, beta, msg_bytes: message latency (s), bandwidth (bytes/s, may be inf) and bytes, or None.
      t_opt: optimizer update seconds per worker, or None (the system's).
      activation_bytes, persistent_bytes: per-stage memory (one stored microbatch-stage; parameters,
        gradients and optimizer state), or None.
      grad_bytes: per-stage gradient bytes (synchronising replicated stages), or None (0).
      microbatch_size: sequences per microbatch (counts the throughput), or None (1).
      source: free text.
      spread: relative spread per field, a number or one per stage (informational; ``nan``: unknown).
    """

    n_stages: int | None
    t_f: tuple[float, ...]
    t_b: tuple[float, ...]
    t_i: tuple[float, ...]
    t_w: tuple[float, ...]
    t_fb: tuple[float, ...] | None = None
    msg_time: float | None = None
    alpha: float | None = None
    beta: float | None = None
    msg_bytes: float | None = None
    t_opt: float | None = None
    activation_bytes: tuple[float, ...] | None = None
    persistent_bytes: tuple[float, ...] | None = None
    grad_bytes: tuple[float, ...] | None = None
    microbatch_size: float | None = None
    source: str = ""
    spread: Mapping[str, float | tuple[float, ...]] = field(default_factory=dict)

    @property
    def has_memory(self) -> bool:
        """Whether the profile gives memory (then a sweep's memory variables come from it)."""
        return self.activation_bytes is not None

    @property
    def message_is_time(self) -> bool:
        """Whether the message is a time alone (``message: {time: ...}``)."""
        return self.msg_time is not None

    def network(self) -> tuple[float, float, float]:
        """``(alpha, beta, msg_bytes)`` of one message: ``(msg_time, inf, 0)`` for a message time."""
        if self.msg_time is not None:
            return self.msg_time, math.inf, 0.0
        return float(self.alpha), float(self.beta), float(self.msg_bytes)

    def to_mapping(self) -> dict[str, Any]:
        """The file's keys (what :func:`write_cost_profile` writes), plain Python data."""

        def values(v: tuple[float, ...] | None) -> Any:
            if v is None:
                return None
            return float(v[0]) if self.n_stages is None else [float(x) for x in v]

        out: dict[str, Any] = {"format": FORMAT}
        if self.source:
            out["source"] = self.source
        for name in TIME_FIELDS:
            if getattr(self, name) is not None:
                out[name] = values(getattr(self, name))
        out["message"] = ({"time": self.msg_time} if self.msg_time is not None
                          else {"alpha": self.alpha, "beta": self.beta, "bytes": self.msg_bytes})
        if self.t_opt is not None:
            out["t_opt"] = self.t_opt
        if self.has_memory:
            out["memory"] = {k: values(getattr(self, k)) for k in MEMORY_KEYS}
        if self.grad_bytes is not None:
            out["grad_bytes"] = values(self.grad_bytes)
        if self.microbatch_size is not None:
            out["microbatch_size"] = self.microbatch_size
        if self.spread:
            out["spread"] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.spread.items()}
        return out


# ---- reading ---------------------------------------------------------------------------------------
def load_cost_profile(path: str | Path) -> CostProfile:
    """Read a profiled-costs file (YAML, JSON or CSV by its suffix).

    Raises:
      ValueError: one line naming the bad field (or the file) and what it accepts.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"costs.profile: {path}: unknown file type {path.suffix!r}; accepted: {', '.join(SUFFIXES)}")
    try:
        text = path.read_text()
    except OSError as error:
        raise ValueError(f"costs.profile: cannot read {path}: {error.strerror or error}") from None
    if suffix == ".csv":
        return profile_from_mapping(_csv_mapping(text))
    try:
        if suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as error:  # noqa: BLE001 - any parse error gets one line
        first = " ".join(str(error).split())[:200]
        raise ValueError(f"costs.profile: {path} is not valid {suffix[1:].upper()}: {first}") from None
    return profile_from_mapping(data)


def profile_from_mapping(data: Any) -> CostProfile:
    """Validate parsed file data (the keys of :data:`KEYS`) into a :class:`CostProfile`.

    Raises:
      ValueError: one line naming the first bad field and what it accepts.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"profile: must be a mapping of {', '.join(KEYS)}, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in KEYS)
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown key; accepted: {', '.join(KEYS)}")
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise ValueError(f"format: must be {FORMAT!r}, got {fmt!r}")
    source = data.get("source", "")
    if not isinstance(source, str):
        raise ValueError(f"source: must be text, got {source!r}")

    raw: dict[str, float | list[float] | None] = {name: _stage_field(name, data.get(name)) for name in TIME_FIELDS}
    memory = data.get("memory")
    if memory is not None:
        if not isinstance(memory, Mapping):
            raise ValueError(f"memory: must be a mapping of {', '.join(MEMORY_KEYS)}, got {memory!r}")
        for key in memory:
            if key not in MEMORY_KEYS:
                raise ValueError(f"memory.{key}: unknown key; accepted: {', '.join(MEMORY_KEYS)}")
        for key in MEMORY_KEYS:
            if memory.get(key) is None:
                raise ValueError(f"memory.{key}: missing; memory needs both {' and '.join(MEMORY_KEYS)} (bytes per stage)")
            raw[key] = _stage_field(f"memory.{key}", memory[key])
    raw["grad_bytes"] = _stage_field("grad_bytes", data.get("grad_bytes"))

    lists = [(name, len(v)) for name, v in raw.items() if isinstance(v, list)]
    n_stages = lists[0][1] if lists else None
    for name, length in lists:
        if length != n_stages:
            raise ValueError(
                f"{name}: has {length} stages but {lists[0][0]} has {n_stages}; every per-stage list needs "
                "the same length (a number: the same on every stage)"
            )
    per_stage = {name: None if v is None else (list(v) if isinstance(v, list) else [v] * (n_stages or 1))
                 for name, v in raw.items()}

    t_f, t_b, t_i, t_w, t_fb = (per_stage[k] for k in TIME_FIELDS)
    if t_f is None:
        raise ValueError("t_f: missing; give the forward seconds per microbatch, per stage (a list) or for all (a number)")
    if t_b is None:
        if t_i is None or t_w is None:
            raise ValueError("t_b: missing; give t_b (full backward seconds), or both t_i and t_w")
        t_b = [i + w for i, w in zip(t_i, t_w)]
    t_i = [b / 2 for b in t_b] if t_i is None else t_i
    t_w = [b / 2 for b in t_b] if t_w is None else t_w
    if t_fb is not None:
        for s, (f, b, fb) in enumerate(zip(t_f, t_b, t_fb)):
            if not b <= fb <= f + b:
                raise ValueError(
                    f"t_fb: stage {s}: a pair's time must lie between t_b and t_f + t_b "
                    f"({b!r} .. {f + b!r} s), got {fb!r}"
                )

    msg_time, alpha, beta, msg_bytes = _message(data.get("message"))
    t_opt = _number("t_opt", data["t_opt"]) if data.get("t_opt") is not None else None
    microbatch = data.get("microbatch_size")
    if microbatch is not None:
        microbatch = _number("microbatch_size", microbatch)
        if microbatch <= 0:
            raise ValueError(f"microbatch_size: must be > 0 (sequences per microbatch), got {microbatch!r}")
    spread = data.get("spread") or {}
    if not isinstance(spread, Mapping):
        raise ValueError(f"spread: must map field names to relative spreads (a number or one per stage), got {spread!r}")
    spread = {str(k): _spread(f"spread.{k}", v) for k, v in spread.items()}

    def tup(v: list[float] | None) -> tuple[float, ...] | None:
        return None if v is None else tuple(v)

    return CostProfile(
        n_stages=n_stages, t_f=tup(t_f), t_b=tup(t_b), t_i=tup(t_i), t_w=tup(t_w), t_fb=tup(t_fb),
        msg_time=msg_time, alpha=alpha, beta=beta, msg_bytes=msg_bytes, t_opt=t_opt,
        activation_bytes=tup(per_stage.get("activation_bytes")), persistent_bytes=tup(per_stage.get("persistent_bytes")),
        grad_bytes=tup(per_stage["grad_bytes"]), microbatch_size=microbatch, source=source, spread=spread,
    )


def _stage_field(name: str, value: Any) -> float | list[float] | None:
    """A per-stage field: a number (every stage) or a non-empty list of numbers >= 0, one per stage."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{name}: an empty list; give one number per stage, or one number for all")
        return [_number(f"{name}[{s}]", v) for s, v in enumerate(value)]
    return _number(name, value)


def _spread(name: str, value: Any) -> float | tuple[float, ...]:
    """An informational spread: a number >= 0 or a list of them (``.nan``: unknown, e.g. one sample)."""
    if isinstance(value, (list, tuple)):
        return tuple(_spread(f"{name}[{s}]", v) for s, v in enumerate(value))
    if isinstance(value, float) and math.isnan(value):
        return value
    return _number(name, value)


def _number(name: str, value: Any, allow_inf: bool = False) -> float:
    """A finite number >= 0 (``inf`` too with ``allow_inf``)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and (math.isfinite(value) or (allow_inf and value == math.inf)) and value >= 0
    if not ok:
        raise ValueError(f"{name}: must be a finite number >= 0{' (or inf)' if allow_inf else ''}, got {value!r}")
    return float(value)


def _message(message: Any) -> tuple[float | None, float | None, float | None, float | None]:
    """``(msg_time, alpha, beta, msg_bytes)`` of the ``message`` key."""
    accepted = "{time: S} or {alpha: S, beta: BYTES_PER_S, bytes: BYTES}"
    if message is None:
        raise ValueError(f"message: missing; give the per-hop message as {accepted}")
    if not isinstance(message, Mapping):
        raise ValueError(f"message: must be {accepted}, got {message!r}")
    keys = set(message)
    if keys == set(MESSAGE_TIME):
        return _number("message.time", message["time"]), None, None, None
    if keys == set(MESSAGE_HOCKNEY):
        beta = _number("message.beta", message["beta"], allow_inf=True)
        if beta <= 0:
            raise ValueError(f"message.beta: must be > 0 bytes/s (inf: free transfers), got {beta!r}")
        return None, _number("message.alpha", message["alpha"]), beta, _number("message.bytes", message["bytes"])
    extra = sorted(str(k) for k in keys - set(MESSAGE_TIME) - set(MESSAGE_HOCKNEY))
    if extra:
        raise ValueError(f"message.{extra[0]}: unknown key; give {accepted}")
    if "time" in keys:
        raise ValueError(f"message: give either time or alpha, beta and bytes, not both; {accepted}")
    missing = sorted(set(MESSAGE_HOCKNEY) - keys)
    raise ValueError(f"message.{missing[0]}: missing; give {accepted}")


def _csv_mapping(text: str) -> dict[str, Any]:
    """A CSV file (one row per stage) as the keys of a YAML file."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows:
        raise ValueError("stage: the CSV file has no rows; give a header and one row per stage")
    columns = [c.strip() for c in rows[0]]
    for column in columns:
        if column not in CSV_COLUMNS:
            raise ValueError(f"{column}: unknown CSV column; accepted: {', '.join(CSV_COLUMNS)}")
    rows = [{k.strip(): (v.strip() if v is not None else "") for k, v in row.items()} for row in rows]
    if "stage" not in columns:
        raise ValueError("stage: missing CSV column; give stage,t_f,t_b,... with one row per stage 0, 1, ...")
    stages = [r["stage"] for r in rows]
    if stages != [str(s) for s in range(len(rows))]:
        raise ValueError(f"stage: rows must be stages 0, 1, ..., {len(rows) - 1} in order, got {', '.join(stages)}")

    def column(name: str) -> list[str] | None:
        if name not in columns:
            return None
        values = [r[name] for r in rows]
        if any(v == "" for v in values):
            raise ValueError(f"{name}: empty cell in stage {values.index('')}; fill every row of the column")
        return values

    def same(name: str) -> str | None:
        values = column(name)
        if values is None:
            return None
        if len(set(values)) != 1:
            raise ValueError(f"{name}: must be the same on every row (one value for the whole pipeline), got {', '.join(values)}")
        return values[0]

    data: dict[str, Any] = {}
    for name in (*TIME_FIELDS, "grad_bytes"):
        if (values := column(name)) is not None:
            data[name] = values
    memory = {k: column(k) for k in MEMORY_KEYS if k in columns}
    if memory:
        data["memory"] = memory
    if (t := same("msg_time")) is not None:
        data["message"] = {"time": t}
    hockney = {k: same(c) for k, c in (("alpha", "alpha"), ("beta", "beta"), ("bytes", "msg_bytes")) if c in columns}
    if hockney:
        data["message"] = {**data.get("message", {}), **hockney}
    for name in ("t_opt", "microbatch_size"):
        if (value := same(name)) is not None:
            data[name] = value
    return data


# ---- writing ---------------------------------------------------------------------------------------
def write_cost_profile(profile: CostProfile, path: str | Path) -> None:
    """Write ``profile`` as YAML (:func:`load_cost_profile` reads it back equal)."""
    import yaml

    Path(path).write_text(yaml.safe_dump(profile.to_mapping(), sort_keys=False, default_flow_style=None))


# ---- on a table ----------------------------------------------------------------------------------
def stage_values(values: Sequence[float], n_prof: int | None, n_stages: int) -> np.ndarray:
    """A profile's per-stage values on a table of ``n_stages`` stages, ``(n_stages,)``.

    ``n_stages == n_prof``: as is. ``n_stages = k·n_prof``: each profiled stage is cut into ``k``
    consecutive chunks of ``1/k`` of its value (times and bytes). ``n_prof = k·n_stages``: ``k``
    consecutive profiled stages merged, values summed. ``n_prof`` None (scalars): the value on
    every stage.

    Raises:
      StageCountError: neither count divides the other.
    """
    values = np.asarray(values, dtype=float)
    if n_prof is None:
        return np.full(n_stages, values[0])
    if n_stages % n_prof == 0:
        k = n_stages // n_prof
        return np.repeat(values / k, k)
    if n_prof % n_stages == 0:
        return values.reshape(n_stages, n_prof // n_stages).sum(axis=1)
    raise StageCountError(
        f"the profile has {n_prof} stages and the table {n_stages}; one must be a multiple of the other"
    )


def fb_overlap_of(profile: CostProfile, n_stages: int) -> float | None:
    """The pair credit ``Σ(t_f + t_b − t_fb) / Σ t_f`` on a table of ``n_stages`` stages (None: no ``t_fb``)."""
    if profile.t_fb is None:
        return None
    t_f, t_b, t_fb = (stage_values(getattr(profile, k), profile.n_stages, n_stages) for k in ("t_f", "t_b", "t_fb"))
    total = float(t_f.sum())
    if total == 0.0:
        return 0.0
    return float(min(1.0, max(0.0, (t_f + t_b - t_fb).sum() / total)))


def engine_costs_from_profile(
    profile: CostProfile,
    table: Any,
    alpha: Any = None,
    beta: Any = None,
    fb_overlap: Any = 0.0,
    t_opt: Any = 0.0,
    alpha_intra: Any = None,
    beta_intra: Any = None,
) -> Any:
    """The engine's :class:`~ppsweep.engine.cost_grid.Costs` of ``table`` from a profile.

    Args:
      profile: the profile.
      table: the schedule table (its ``n_stages``; :func:`stage_values` maps the stages).
      alpha, beta: latency (s) and bandwidth (bytes/s) overriding the profile's (broadcast over
        the points); only for a profile with ``message: {alpha, beta, bytes}``; None: the profile's.
      fb_overlap: the pair credit where the profile has no ``t_fb`` (with ``t_fb``: must be 0).
      t_opt: optimizer seconds per worker where the profile has no ``t_opt`` (with it: must be 0).
      alpha_intra, beta_intra: latency and bandwidth within a node (docs/contract.md §4b; None: as
        between nodes); only for a profile with ``message: {alpha, beta, bytes}``.

    Returns:
      Validated costs for ``ppsweep.engine.simulate(table, costs, mode)``.

    Raises:
      StageCountError: the table's stage count does not fit the profile's.
      ValueError: an override the profile does not allow.
    """
    from ppsweep.engine.cost_grid import Costs

    n = int(table.n_stages)
    own_alpha, own_beta, msg_bytes = profile.network()
    if profile.message_is_time and any(v is not None for v in (alpha, beta, alpha_intra, beta_intra)):
        raise ValueError(
            "alpha/beta: the profile gives the message time (message.time); it cannot take another "
            "latency or bandwidth (give message {alpha, beta, bytes} to sweep them)"
        )
    credit = fb_overlap_of(profile, n)
    if credit is not None and np.any(np.asarray(fb_overlap) != 0):
        raise ValueError("fb_overlap: the profile gives t_fb (the pair's measured time); leave fb_overlap at 0")
    if profile.t_opt is not None and np.any(np.asarray(t_opt) != 0):
        raise ValueError("t_opt: the profile gives t_opt; leave the system's optimizer_time at 0")
    stage = {k: stage_values(getattr(profile, k), profile.n_stages, n) for k in ("t_f", "t_b", "t_i", "t_w")}
    grad = 0.0 if profile.grad_bytes is None else stage_values(profile.grad_bytes, profile.n_stages, n)
    return Costs.of(
        n, stage["t_f"], stage["t_b"],
        own_alpha if alpha is None else alpha,
        own_beta if beta is None else beta,
        msg_bytes,
        t_i=stage["t_i"], t_w=stage["t_w"], grad_bytes=grad,
        t_opt=t_opt if profile.t_opt is None else profile.t_opt,
        fb_overlap=fb_overlap if credit is None else credit,
        alpha_intra=alpha_intra, beta_intra=beta_intra,
    )


def profile_memory(profile: CostProfile, table: Any) -> Any:
    """The bottleneck worker's memory (:class:`ppsweep.cost_model.MemoryFigures`) from the profile's bytes, or None.

    Activations follow the table as in the cost model (an F stores its stage's ``activation_bytes``
    until the B, or the W, frees them); every ``(replica, stage)`` adds its ``persistent_bytes`` to
    the worker holding it.

    Raises:
      StageCountError: the table's stage count does not fit the profile's.
    """
    from ppsweep.cost_model import MemoryFigures

    if not profile.has_memory:
        return None
    n = int(table.n_stages)
    activations = table.peak_activations_per_worker(stage_values(profile.activation_bytes, profile.n_stages, n))
    per_stage = stage_values(profile.persistent_bytes, profile.n_stages, n)
    persistent = np.zeros(table.p)
    for r in range(table.n_replicas):
        for s in range(n):
            persistent[table.placement[r, s]] += per_stage[s]
    w = int(np.argmax(activations + persistent))
    return MemoryFigures(float(activations[w]), float(persistent[w]))


__all__ = [
    "FORMAT",
    "CostProfile",
    "StageCountError",
    "engine_costs_from_profile",
    "fb_overlap_of",
    "load_cost_profile",
    "profile_from_mapping",
    "profile_memory",
    "stage_values",
    "write_cost_profile",
]
