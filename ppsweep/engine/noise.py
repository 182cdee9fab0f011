"""The noise model of a sweep (SPEC section 4a): jitter and stragglers from counter-based keys.

A sweep with ``noise.samples = N > 0`` evaluates every point ``N`` times, each time with
every operation's compute time and every message's time multiplied by a random factor. The
factors are a pure function of integers, never of how the work is cut up:

    factor = F(seed, stream, sample, worker, microbatch, kind, stage)

so a store is bit-identical whatever its tiling, devices, shards or resumes.

Model (each factor has mean 1 where it is a jitter):

- **compute jitter** (``noise.compute``): each operation ``(kind, microbatch, stage)`` on its
  worker lasts ``t · X``, ``X`` drawn from ``dist`` with mean 1 and coefficient of variation
  ``cv``: ``normal`` (``max(0, 1 + cv·Z)``), ``uniform`` (``1 + cv·√3·(2U − 1)``, needs
  ``cv ≤ 1/√3``) or ``lognormal`` (``exp(σZ − σ²/2)``, ``σ² = ln(1 + cv²)``).
- **message jitter** (``noise.message``): every message an operation sends takes
  ``(α + bytes/β) · Y`` and, in ``contention`` and ``ports``, holds its link or ports for
  ``bytes/β · Y``; ``Y`` is drawn like ``X`` with its own ``dist`` and ``cv``.
- **stragglers** (``noise.straggler``): in each sample each worker (of ``workers``, default
  all) is, with probability ``prob``, a straggler for the whole step: every operation it runs
  lasts ``slowdown`` times longer (on top of its jitter).
- **overlapped pairs** F&B: a pair of ``F(j, s)`` and ``B(j', s')`` on worker ``w`` is noised as
  its two halves, each keyed as the same operation on its own: ``X_F`` from ``(w, j, F, s)``,
  ``X_B`` from ``(w, j', B, s')``; it lasts ``(1 - fb_overlap)·t_f·X_F + t_b·X_B`` (the pair rule
  of :func:`ppsweep.tables.ops.pair_time` on the jittered halves) times the straggler factor, and each
  output is a message of its half, with that half's message factor.
- Gradient synchronisations and optimizer updates are not perturbed.

Keying (counter-based, JAX's threefry2x32 through ``jax.random``)::

    K      = jax.random.key(seed, impl="threefry2x32")
    K_op   = fold_in(fold_in(fold_in(fold_in(fold_in(K, stream), worker), microbatch), kind), stage)
    u1, u2 = (bits(fold_in(K_op, sample), (2,), uint32) + 0.5) / 2**32
    Z      = sqrt(-2 ln u1) · cos(2π u2)            (Box–Muller)

with ``stream`` 0 for compute jitter, 1 for message jitter (keyed by the *sending* operation)
and 2 for stragglers (``K_w = fold_in(fold_in(K, 2), worker)``, straggler where ``u1 < prob``),
``kind`` the integer code of :class:`ppsweep.tables.ops.Kind` (F=1, B=2, I=3, W=4) and ``stage`` the
operation's stage on the microbatch's path. Nothing else enters a key: a sample's factors are
the same at every bandwidth, latency, compute value and comm mode of the grid, and two
schedules that run the same ``(worker, microbatch, kind, stage)`` draw the same factor for it
(common random numbers), so differences between schedules and along the grid axes are not
blurred by independent noise. Schedules that place a stage on another worker (Chimera's second
replica, interleaved stages) draw independent factors for those operations.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ppsweep.tables.ops import Kind, Op, dependencies, halves

#: Accepted jitter distributions.
DISTRIBUTIONS = ("normal", "uniform", "lognormal")
#: Key streams (the first value folded into the seed's key).
STREAM_COMPUTE, STREAM_MESSAGE, STREAM_STRAGGLER = 0, 1, 2
#: Keys of the ``noise`` config block.
NOISE_KEYS = ("samples", "seed", "compute", "message", "straggler")
#: Largest accepted values (README, "Uncertainty"): beyond them a sweep is a typo, not a study.
#: ``samples``: a dimension of every per-point variable; ``cv``: a jitter whose factors span many
#: orders of magnitude already at 10; ``slowdown``: a factor on a straggler's compute times.
MAX_SAMPLES, MAX_CV, MAX_SLOWDOWN = 100_000, 10.0, 1000.0


@dataclass(frozen=True)
class Jitter:
    """A multiplicative jitter with mean 1.

    Attributes:
      dist: ``normal``, ``uniform`` or ``lognormal``.
      cv: coefficient of variation (standard deviation / mean), >= 0.
    """

    dist: str = "lognormal"
    cv: float = 0.0

    @classmethod
    def from_mapping(cls, name: str, value: Any) -> "Jitter":
        """Validate ``noise.<name>``: a mapping with ``dist`` and ``cv`` (or null: no jitter).

        Raises:
          ValueError: naming the field and the accepted values.
        """
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise ValueError(f"noise.{name}: must be a mapping with dist and cv, got {value!r}")
        unknown = sorted(set(value) - {"dist", "cv"})
        if unknown:
            raise ValueError(f"noise.{name}: unknown key {unknown[0]!r}; accepted: dist, cv")
        dist = value.get("dist", "lognormal")
        if dist not in DISTRIBUTIONS:
            raise ValueError(f"noise.{name}.dist: unknown distribution {dist!r}; accepted: {', '.join(DISTRIBUTIONS)}")
        cv = _number(f"noise.{name}.cv", value.get("cv", 0.0))
        if not 0 <= cv <= MAX_CV:
            raise ValueError(f"noise.{name}.cv: must be in [0, {MAX_CV:g}], got {cv:g}")
        if dist == "uniform" and cv > 1 / math.sqrt(3):
            raise ValueError(f"noise.{name}.cv: a uniform jitter needs cv <= 1/sqrt(3) = 0.577 (factors >= 0), got {cv}")
        return cls(dist=dist, cv=cv)

    def factor(self, u1: np.ndarray, u2: np.ndarray) -> np.ndarray:
        """The factors of the uniforms ``u1, u2`` in (0, 1) (module docstring), float64."""
        u1, u2 = np.asarray(u1, float), np.asarray(u2, float)
        if self.cv == 0:
            return np.ones(np.broadcast_shapes(u1.shape, u2.shape))
        if self.dist == "uniform":
            return 1.0 + self.cv * math.sqrt(3.0) * (2.0 * u1 - 1.0)
        z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)
        if self.dist == "normal":
            return np.maximum(0.0, 1.0 + self.cv * z)
        s2 = math.log1p(self.cv**2)
        return np.exp(math.sqrt(s2) * z - s2 / 2)


@dataclass(frozen=True)
class NoiseConfig:
    """The validated ``noise`` block of a sweep.

    Attributes:
      samples: samples per point (0: noise off, no ``sample`` dimension).
      seed: non-negative integer seed.
      compute: per-operation compute jitter.
      message: per-message jitter.
      straggler_prob: probability that a worker straggles in one sample (one step).
      straggler_slowdown: factor on every operation of a straggling worker (>= 1).
      straggler_workers: the workers that may straggle (None: every worker).
    """

    samples: int = 0
    seed: int = 0
    compute: Jitter = Jitter()
    message: Jitter = Jitter()
    straggler_prob: float = 0.0
    straggler_slowdown: float = 1.0
    straggler_workers: tuple[int, ...] | None = None

    @property
    def enabled(self) -> bool:
        """True when the sweep has a ``sample`` dimension."""
        return self.samples > 0

    @property
    def is_zero(self) -> bool:
        """True when every factor is exactly 1 (no jitter, no straggler)."""
        return self.compute.cv == 0 and self.message.cv == 0 and (self.straggler_prob == 0 or self.straggler_slowdown == 1)

    @classmethod
    def from_mapping(cls, value: Any) -> "NoiseConfig":
        """Validate the ``noise`` config block (null or a mapping; README, "Uncertainty").

        Raises:
          ValueError: naming the first bad field and what it accepts.
        """
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise ValueError(f"noise: must be a mapping with keys {', '.join(NOISE_KEYS)}, got {value!r}")
        unknown = sorted(set(value) - set(NOISE_KEYS))
        if unknown:
            raise ValueError(f"noise: unknown key {unknown[0]!r}; accepted: {', '.join(NOISE_KEYS)}")
        samples = _integer("noise.samples", value.get("samples", 0))
        if samples > MAX_SAMPLES:
            raise ValueError(f"noise.samples: must be at most {MAX_SAMPLES:,} (a sample dimension of that length), got {samples:,}")
        seed = _integer("noise.seed", value.get("seed", 0))
        if seed >= 2**32:
            raise ValueError(f"noise.seed: must be < 2**32, got {seed}")
        straggler = value.get("straggler") or {}
        if not isinstance(straggler, Mapping):
            raise ValueError(f"noise.straggler: must be a mapping with prob and slowdown, got {straggler!r}")
        unknown = sorted(set(straggler) - {"prob", "slowdown", "workers"})
        if unknown:
            raise ValueError(f"noise.straggler: unknown key {unknown[0]!r}; accepted: prob, slowdown, workers")
        workers = straggler.get("workers")
        if workers is not None:
            if not isinstance(workers, (list, tuple)):
                raise ValueError(f"noise.straggler.workers: must be null (every worker) or a list of worker indices, got {workers!r}")
            workers = tuple(sorted({_integer("noise.straggler.workers[]", w) for w in workers}))
        prob = _number("noise.straggler.prob", straggler.get("prob", 0.0))
        if not 0 <= prob <= 1:
            raise ValueError(f"noise.straggler.prob: must be in [0, 1], got {prob}")
        slowdown = _number("noise.straggler.slowdown", straggler.get("slowdown", 1.0))
        if not 1 <= slowdown <= MAX_SLOWDOWN:
            raise ValueError(f"noise.straggler.slowdown: must be in [1, {MAX_SLOWDOWN:g}] (a factor on the straggler's compute times), got {slowdown:g}")
        compute = Jitter.from_mapping("compute", value.get("compute"))
        message = Jitter.from_mapping("message", value.get("message"))
        if samples == 0:
            given = [f"noise.{k}.cv={j.cv:g}" for k, j in (("compute", compute), ("message", message)) if j.cv > 0]
            given += [f"noise.straggler.prob={prob:g}"] if prob > 0 else []
            if given:
                raise ValueError(
                    f"noise.samples: 0 turns noise off, but {given[0]} is set; give noise.samples=N (N >= 1) to draw N samples, "
                    "or leave the noise settings at 0"
                )
        return cls(
            samples=samples,
            seed=seed,
            compute=compute,
            message=message,
            straggler_prob=prob,
            straggler_slowdown=slowdown,
            straggler_workers=workers,
        )

    def to_mapping(self) -> dict[str, Any]:
        """The config block this was validated from, normalized (round-trips through :meth:`from_mapping`)."""
        return {
            "samples": self.samples,
            "seed": self.seed,
            "compute": {"dist": self.compute.dist, "cv": self.compute.cv},
            "message": {"dist": self.message.dist, "cv": self.message.cv},
            "straggler": {
                "prob": self.straggler_prob,
                "slowdown": self.straggler_slowdown,
                "workers": None if self.straggler_workers is None else list(self.straggler_workers),
            },
        }


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name}: must be a number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {value!r}")
    return x


def _integer(name: str, value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1e9 on the command line
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name}: must be an integer >= 0, got {value!r}")
    return int(value)


# --------------------------------------------------------------------------------------------
# counter-based draws


@functools.lru_cache(maxsize=None)
def _uniforms_fn():
    """The jitted draw: ``(seed, ids (n, L) int, samples (k,)) -> (k, n, 2)`` uniforms in (0, 1).

    Traced and called only inside ``jax.enable_x64(True)`` (:func:`uniforms`): JAX's global flag stays as it was.
    """
    import jax
    import jax.numpy as jnp

    def one(key, sample):
        bits = jax.random.bits(jax.random.fold_in(key, sample), (2,), jnp.uint32)
        return (bits.astype(jnp.float64) + 0.5) / 2.0**32

    def per_id(seed, ids, samples):
        key = jax.random.key(seed, impl="threefry2x32")
        for i in range(ids.shape[0]):
            key = jax.random.fold_in(key, ids[i])
        return jax.vmap(one, in_axes=(None, 0))(key, samples)  # (k, 2)

    @jax.jit
    def draw(seed, ids, samples):
        return jnp.swapaxes(jax.vmap(per_id, in_axes=(None, 0, None))(seed, ids, samples), 0, 1)

    return draw


def uniforms(seed: int, ids: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Counter-based uniform pairs: for each id tuple and sample, ``(u1, u2)`` in (0, 1).

    Args:
      seed: the noise seed (``0 <= seed < 2**32``).
      ids: ``(n, L)`` non-negative integers < 2**32 folded into the seed's key in order (the
        stream first; module docstring).
      samples: ``(k,)`` sample indices.

    Returns:
      ``(k, n, 2)`` float64: a pure function of ``(seed, ids[i], samples[j])``.
    """
    ids = np.asarray(ids, dtype=np.uint32)
    samples = np.asarray(samples, dtype=np.uint32)
    if ids.ndim != 2 or samples.ndim != 1:
        raise ValueError(f"uniforms: ids must be (n, L) and samples (k,), got {ids.shape} and {samples.shape}")
    if ids.shape[0] == 0 or samples.shape[0] == 0:
        return np.zeros((samples.shape[0], ids.shape[0], 2))
    n, k = ids.shape[0], samples.shape[0]
    # Padded to powers of two so that few shapes are ever compiled; padding rows are dropped.
    ids = np.concatenate([ids, np.zeros((_bucket(n) - n, ids.shape[1]), np.uint32)])
    samples = np.concatenate([samples, np.zeros(_bucket(k) - k, np.uint32)])
    import jax

    with jax.enable_x64(True):  # scoped: float64 draws, the process's global flag untouched
        return np.asarray(_uniforms_fn()(np.uint32(seed), ids, samples))[:k, :n]


def _bucket(n: int) -> int:
    return max(64, 1 << (n - 1).bit_length())


def straggler_factors(noise: NoiseConfig, p: int, samples: np.ndarray) -> np.ndarray:
    """Each worker's straggler factor in each sample: ``slowdown`` where it straggles, else 1.

    Args:
      noise: the noise config.
      p: workers.
      samples: ``(k,)`` sample indices.

    Returns:
      ``(k, p)`` float64.
    """
    samples = np.asarray(samples)
    if noise.straggler_prob == 0 or noise.straggler_slowdown == 1:
        return np.ones((samples.shape[0], p))
    ids = np.stack([np.full(p, STREAM_STRAGGLER), np.arange(p)], axis=1)
    u = uniforms(noise.seed, ids, samples)[..., 0]
    may = np.ones(p, bool) if noise.straggler_workers is None else np.isin(np.arange(p), noise.straggler_workers)
    return np.where((u < noise.straggler_prob) & may, noise.straggler_slowdown, 1.0)


@dataclass(frozen=True)
class OpFactors:
    """Factors of every operation of a table in every sample.

    Attributes:
      compute: ``(k, n_ops)`` factor on each operation's compute time (jitter × straggler).
      message: ``(k, n_ops)`` factor on the time of the messages each operation sends.
    """

    compute: np.ndarray
    message: np.ndarray


def op_factors(noise: NoiseConfig, ops: np.ndarray, p: int, samples: np.ndarray) -> OpFactors:
    """Draw the factors of the operations ``ops`` (module docstring for the keys).

    Args:
      noise: the noise config.
      ops: ``(n_ops, 4)`` integer ``(worker, microbatch, kind, stage)`` of each operation
        (:func:`op_identities`).
      p: workers of the table.
      samples: ``(k,)`` sample indices.

    Returns:
      :class:`OpFactors` with arrays ``(k, n_ops)``.
    """
    ops = np.asarray(ops, dtype=np.int64).reshape(-1, 4)
    samples = np.asarray(samples, dtype=np.int64)
    shape = (samples.shape[0], ops.shape[0])

    def jitter(j: Jitter, stream: int) -> np.ndarray:
        if j.cv == 0:
            return np.ones(shape)
        ids = np.concatenate([np.full((ops.shape[0], 1), stream), ops], axis=1)
        u = uniforms(noise.seed, ids, samples)
        return j.factor(u[..., 0], u[..., 1])

    compute = jitter(noise.compute, STREAM_COMPUTE) * straggler_factors(noise, p, samples)[:, ops[:, 0]]
    return OpFactors(compute=compute, message=jitter(noise.message, STREAM_MESSAGE))


def _keyed(table) -> list[tuple[object, Op]]:
    """Each placed operation of ``table`` in ``(start slot, worker)`` order, with each of its keyed
    operations: the operation itself, or a pair's two halves (forward, then backward)."""
    placed = sorted(table.placed_ops(), key=lambda item: (item.start, item.worker))
    return [(item, half) for item in placed for half in halves(item.op)]


def op_identities(table) -> np.ndarray:
    """``(n_keys, 4)`` ``(worker, microbatch, kind, stage)`` of every keyed operation of ``table``.

    Operations in the order ``(start slot, worker)`` (the engine's wave order); an overlapped pair
    F&B gives two rows, its forward half ``(worker, micro, F, stage)`` then its backward half
    ``(worker, micro2, B, stage2)``: each half is keyed as the same operation run on its own
    (module docstring, "Pairs").
    """
    rows = [(item.worker, half.micro, int(half.kind), half.stage) for item, half in _keyed(table)]
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def pair_sends(table) -> dict[tuple[int, int], tuple[int, ...]]:
    """The order in which each overlapped pair sends its halves' outputs.

    A pair sends, when it ends, one message per half whose output a consumer on another worker
    needs, in the consumers' worker order (ties: the consumer's start slot) -- the rule of the
    engine's program (:mod:`ppsweep.engine.program`) and of the reference simulator.

    Args:
      table: the schedule table.

    Returns:
      ``(worker, start slot) -> halves`` of each pair, each half as its index in
      :func:`ppsweep.tables.ops.halves` (0 forward, 1 backward), in sending order (empty: sends nothing).
    """
    placed = table.placed_ops()
    where = {half: item for item in placed for half in halves(item.op)}
    consumer: dict[Op, tuple[int, int]] = {}  # a pair's half -> (worker, start) of its first remote consumer
    for item in placed:
        for dep in dependencies(item.op, table.n_stages, table.split_backward):
            src = where[dep]
            if src.op.kind == Kind.FB and src.worker != item.worker:
                consumer[dep] = min(consumer.get(dep, (item.worker, item.start)), (item.worker, item.start))
    sends = {}
    for item in placed:
        if item.op.kind == Kind.FB:
            sent = [i for i, half in enumerate(halves(item.op)) if half in consumer]
            sends[(item.worker, item.start)] = tuple(sorted(sent, key=lambda i: consumer[halves(item.op)[i]]))
    return sends


def reference_inputs(table, factors: OpFactors, sample: int, durations: Mapping, alpha: float, wire: float,
                     intra: tuple[float, float] | None = None, worker_node: Sequence[int] | None = None) -> tuple[dict, dict]:
    """Explicit per-operation durations and message times of one sample, for the reference simulator.

    Args:
      table: the schedule table.
      factors: the table's :func:`op_factors` (keys in :func:`op_identities` order).
      sample: row of ``factors`` to use.
      durations: ``Kind -> per-stage`` noise-free compute times (lists of length S).
      alpha: message latency, s.
      wire: bytes/β of one message, s.
      intra: ``(alpha, wire)`` of a message between two workers of one node of ``worker_node``
        (:mod:`ppsweep.engine.tiers`); None, or no ``worker_node``: every message takes ``alpha``, ``wire``.
      worker_node: the node of each worker.

    Returns:
      ``(op_durations, message_times)``: ``Op -> seconds`` and ``Op -> (hold, total)`` seconds,
      keyed by each operation or, for a pair, by each of its halves (the reference combines a
      pair's halves with :func:`ppsweep.tables.ops.pair_time`; a half's message is its output's).
    """
    op_durations, message_times = {}, {}
    receiver = {} if intra is None or worker_node is None else message_receivers(table)
    for i, (item, op) in enumerate(_keyed(table)):
        op_durations[op] = float(durations[op.kind][op.stage] * factors.compute[sample, i])
        y = float(factors.message[sample, i])
        a, w = alpha, wire
        if op in receiver and worker_node[item.worker] == worker_node[receiver[op]]:
            a, w = intra
        message_times[op] = (w * y, (a + w) * y)
    return op_durations, message_times


def message_receivers(table) -> dict[Op, int]:
    """The worker that receives each operation's (or pair half's) output message: its first consumer
    on another worker in ``(start slot, worker)`` order; operations that send nothing are absent
    (the engine's program sends an output to at most one other worker)."""
    placed = sorted(table.placed_ops(), key=lambda item: (item.start, item.worker))
    where = {half: item for item in placed for half in halves(item.op)}
    receiver: dict[Op, int] = {}
    for item in placed:
        for dep in dependencies(item.op, table.n_stages, table.split_backward):
            if where[dep].worker != item.worker:
                receiver.setdefault(dep, item.worker)
    return receiver
