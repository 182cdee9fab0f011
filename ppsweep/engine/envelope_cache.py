"""Built envelopes, programs and the compiled scan's steps cached on disk, shared by runs, shards and processes.

An envelope (:func:`ppsweep.engine.envelope.build_envelope`) is a function of the table, the
communication mode, the feature directions (weights and which features are communication), the
cap, and the code that compiles a table and builds its envelope. :func:`cached_envelope` keeps
each built envelope -- or the verdict that the table needs more vectors than the cap, so the
engine's fallback to the scan is decided without building again -- in one file named by a hash
of all of that: the table's content (every field, arrays by their values, not its name alone),
the mode, the weights' and flags' bytes, the cap, the tier of each link and synchronisation
(:meth:`ppsweep.engine.tiers.Tiers.key`; the placement of workers on nodes) and the source of every module that takes part
(:func:`code_version`). A change to any of them reads no old file. A table's compiled
:class:`~ppsweep.engine.program.Program` (:func:`cached_program`), the compiled scan's steps
(:func:`cached_native_steps` in ``ports``; :func:`cached_ordered_steps`, one file for the modes that
share a lane order) and the periodic scan's runs (:func:`cached_periodic_runs`) are kept the same
way, keyed by the table's content (and the mode) and the code: a sweep run again, or another shard,
reads them instead of compiling. Routings are kept in ``ports`` only (:func:`cached_routing`).

Where: ``$PPSWEEP_ENVELOPE_CACHE`` if set, else ``~/.cache/ppsweep/envelopes``;
``PPSWEEP_ENVELOPE_CACHE=off`` turns it off. Writes are atomic and damaged files are rebuilt
(:mod:`ppsweep.disk_cache`, shared with the table cache); a file whose arrays do not fit the
request (shapes, flags, fields) is rebuilt too. Envelopes and steps of programs under
:data:`MIN_WAVES` waves, and programs of tables under ``MIN_CELLS`` cells, are built rather than
read (building them costs about as much as reading). Delete the directory to reclaim the space.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from pathlib import Path
from typing import Any, Callable, Union

import numpy as np

from ppsweep import disk_cache, import_graph
from ppsweep.engine.envelope import Envelope, EnvelopeOverBudget, EnvelopeTooLarge, over_budget_message
from ppsweep.engine.program import Program
from ppsweep.tables.cache import MIN_CELLS
from ppsweep.tables.digest import table_digest  # noqa: F401  (the key of every file here)

#: Environment variable naming the cache directory (``off``: no cache).
CACHE_ENV = "PPSWEEP_ENVELOPE_CACHE"

#: Programs with fewer waves than this build their envelope rather than read it.
MIN_WAVES = 16

#: Modules whose source defines a built envelope, by package.
#: What :func:`cached_envelope` gives: the envelope, or the verdict that it is too large.
Built = Union[Envelope, EnvelopeTooLarge]


def cache_dir() -> Path | None:
    """The cache directory, or None when the cache is off."""
    return disk_cache.cache_dir(CACHE_ENV, "envelopes")


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the source of every module that compiles a table or builds its envelope: the
    engine's compiled form (:mod:`ppsweep.engine.compiled`, the envelope, the compiled scan) and all
    they import (:func:`ppsweep.import_graph.source_version`)."""
    return import_graph.source_version("ppsweep.engine.compiled", "ppsweep.engine.native_scan")


def envelope_key(digest: str, mode: str, weights: np.ndarray, comm: np.ndarray, cap: int, tiers: tuple = ()) -> str:
    """File name of an envelope: a hash of everything that defines it, the code's version included.

    Args:
      digest: the table's :func:`table_digest`.
      mode: communication mode.
      weights: ``(J, raw_size)`` feature weights; comm: ``(J,)`` communication flags.
      cap: largest set kept at a node.
      tiers: the tiers' :meth:`~ppsweep.engine.tiers.Tiers.key` (``()``: every message between nodes).
    """
    weights = np.ascontiguousarray(weights)
    comm = np.ascontiguousarray(comm)
    arrays = hashlib.sha256(weights.tobytes() + comm.tobytes() + b"".join(tiers)).hexdigest()
    return disk_cache.key_name(["envelope", digest, mode, int(cap), weights.dtype.str, list(weights.shape),
                                comm.dtype.str, list(comm.shape), arrays, code_version()])


def cached_envelope(
    digest: Callable[[], str],
    program: Program,
    mode: str,
    weights: np.ndarray,
    comm: np.ndarray,
    cap: int,
    build: Callable[[], Built],
    tiers: tuple = (),
    budget: int | None = None,
) -> Built:
    """The envelope (or too-large verdict) from the cache, or ``build()`` (then stored).

    One file per key whatever the budget: an envelope keeps the least budget its programme passes
    (``need``: its work and pace; over ``budget``: the verdict :class:`EnvelopeOverBudget`, as its
    build with that budget would give), a verdict
    "over budget B" answers every budget up to B (a larger one builds again and replaces it).

    Args:
      digest: gives the table's :func:`table_digest` (called only when the cache is used).
      program: the table's compiled program (its size decides whether the cache is used).
      mode, weights, comm, cap: as in :func:`ppsweep.engine.envelope.build_envelope`.
      build: builds the envelope, returning the :class:`EnvelopeTooLarge` it raises.
      tiers: the tiers' :meth:`~ppsweep.engine.tiers.Tiers.key` it is built for.
      budget: the programme's most work (None: no limit) that ``build`` keeps to.

    Returns:
      What ``build()`` returns, array for array.
    """
    directory = cache_dir()
    if directory is None or program.n_waves < MIN_WAVES:
        return build()
    path = directory / envelope_key(digest(), mode, weights, comm, cap, tiers)
    hit = _read(path, program.p, np.asarray(comm, dtype=bool))
    over = EnvelopeOverBudget(over_budget_message(budget), budget or 0)
    if isinstance(hit, Envelope):
        return over if budget is not None and hit.need > budget else hit
    if isinstance(hit, EnvelopeOverBudget):
        if budget is not None and budget <= hit.budget:
            return over
    elif hit is not None:
        return hit
    built = build()
    _write(path, built)
    return built


def _read(path: Path, p: int, comm: np.ndarray) -> Built | None:
    """The stored value, or None where the file is missing, damaged or does not fit the request."""
    read = disk_cache.read_entry(path)
    if read is None:
        return None
    meta, arrays = read
    try:
        if meta["kind"] == "too_large":
            return EnvelopeTooLarge(str(meta["message"]))
        if meta["kind"] == "over_budget":
            return EnvelopeOverBudget(str(meta["message"]), int(meta["budget"]))
        if meta["kind"] != "envelope":
            return None
        t_sim, compute, flags = arrays["t_sim"], arrays["compute"], arrays["comm"]
        rows, counts = arrays["finish_rows"], arrays["finish_counts"]
        J = comm.shape[0]
        fits = (
            t_sim.ndim == 2 and t_sim.shape[1] == J and rows.ndim == 2 and rows.shape[1] == J
            and compute.shape == (J,) and flags.dtype == bool and np.array_equal(flags, comm)
            and counts.shape == (p,) and int(counts.sum()) == rows.shape[0] and (counts >= 0).all()
        )
        if not fits:
            return None
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return Envelope(
            t_sim=t_sim,
            finish=tuple(rows[bounds[w] : bounds[w + 1]] for w in range(p)),
            compute=compute,
            comm=flags,
            depth=int(meta["depth"]),
            largest=int(meta["largest"]),
            work=int(meta["work"]),
            need=int(meta["need"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _write(path: Path, built: Built) -> None:
    """Store an envelope or a too-large or over-budget verdict at ``path`` (atomically)."""
    if isinstance(built, EnvelopeOverBudget):
        disk_cache.write_entry(path, {"kind": "over_budget", "message": str(built), "budget": built.budget}, {})
        return
    if isinstance(built, EnvelopeTooLarge):
        disk_cache.write_entry(path, {"kind": "too_large", "message": str(built)}, {})
        return
    J = built.compute.shape[0]
    rows = np.concatenate([np.reshape(f, (-1, J)) for f in built.finish]) if built.finish else np.zeros((0, J))
    disk_cache.write_entry(
        path,
        {"kind": "envelope", "depth": int(built.depth), "largest": int(built.largest), "work": int(built.work),
         "need": int(built.need)},
        {
            "t_sim": built.t_sim,
            "finish_rows": rows,
            "finish_counts": np.array([np.shape(f)[0] for f in built.finish], dtype=np.int64),
            "compute": built.compute,
            "comm": np.asarray(built.comm, dtype=bool),
        },
    )


def cached_program(digest: Callable[[], str], cells: int, build: Callable[[], Program]) -> Program:
    """A table's program from the cache, or ``build()`` (then stored).

    Args:
      digest: gives the table's :func:`table_digest` (called only when the cache is used).
      cells: the table's cells (tables under ``MIN_CELLS`` are compiled, not read).
      build: compiles the program.

    Returns:
      What ``build()`` returns, array for array.
    """
    directory = cache_dir()
    if directory is None or cells < MIN_CELLS:
        return build()
    return _cached_fields(directory / disk_cache.key_name(["program", digest(), code_version()]), Program, build)


def cached_routing(digest: Callable[[], str], program: Program, mode: str, build: Callable[[], Any]) -> Any:
    """A table's :class:`~ppsweep.engine.comm.Routing` in ``mode`` from the cache, or ``build()`` (then
    stored); a refusal (the NotImplementedError ``build`` raises) is stored and raised again.

    A warm run needs the routing only to know whether ``ports`` runs the table (the scan's steps and
    the envelopes are on disk; the other modes refuse none and are routed only where a table is
    scanned), and ``ports`` orders every message of the table to route it. Only the routings of
    modes that order messages at a port (:attr:`~ppsweep.engine.comm.Mode.sends_in_table_order`)
    are kept: the others take a few milliseconds at p = 64, m = 1,024 (2.4 ms for interleaved 1F1B
    ``v=4`` in ``overlap``, 4.4 ms in ``contention``, against 24 ms in ``ports``), about what their
    file costs to write, and less than it costs to read on small tables.

    Args:
      digest: gives the table's :func:`table_digest` (called only when the cache is used).
      program: the table's program (its size decides whether the cache is used).
      mode: communication mode.
      build: routes the program (:func:`ppsweep.engine.comm.route`).

    Returns:
      What ``build()`` returns, array for array.
    """
    from ppsweep.engine.comm import MODE_RULES, Routing

    directory = cache_dir()
    if directory is None or program.n_waves < MIN_WAVES or not MODE_RULES[mode].sends_in_table_order:
        return build()
    path = directory / disk_cache.key_name(["routing", digest(), mode, code_version()])
    read = disk_cache.read_entry(path)
    if read is not None:
        meta, arrays = read
        try:
            if meta["kind"] == "refused":
                raise NotImplementedError(str(meta["message"]))
            if meta["kind"] == "routing":
                bounds = np.concatenate([[0], np.cumsum(arrays["sync_counts"])]).astype(np.int64)
                flat = arrays["sync_flat"].astype(np.int64).tolist()
                return Routing(mode=MODE_RULES[mode], n_resources=int(meta["n_resources"]),
                               lane_resources=arrays["lane_resources"].astype(np.int64, copy=False),
                               rounds=arrays["rounds"].astype(np.int64, copy=False),
                               sync_resources=tuple(tuple(flat[a:b]) for a, b in zip(bounds[:-1], bounds[1:])))
        except (KeyError, TypeError, ValueError):
            pass
    try:
        built = build()
    except NotImplementedError as err:
        disk_cache.write_entry(path, {"kind": "refused", "message": str(err)}, {})
        raise
    disk_cache.write_entry(path, {"kind": "routing", "n_resources": int(built.n_resources)}, {
        "lane_resources": disk_cache.narrow(np.asarray(built.lane_resources, dtype=np.int64)),
        "rounds": disk_cache.narrow(np.asarray(built.rounds, dtype=np.int64)),
        "sync_counts": np.array([len(r) for r in built.sync_resources], dtype=np.int64),
        "sync_flat": np.array([i for r in built.sync_resources for i in r], dtype=np.int64),
    })
    return built


def cached_native_steps(digest: Callable[[], str], program: Program, mode: str, build: Callable[[], Any]) -> Any:
    """The compiled scan's steps of a table in ``mode`` (:func:`ppsweep.engine.native_scan.native_steps`)
    from the cache, or ``build()`` (then stored). The engine keeps the steps of ``ports`` this way;
    the other modes share their order's (:func:`cached_ordered_steps`).

    Args:
      digest: gives the table's :func:`table_digest` (called only when the cache is used).
      program: the table's program (its size decides whether the cache is used).
      mode: communication mode.
      build: computes the steps.

    Returns:
      What ``build()`` returns, array for array.
    """
    from ppsweep.engine.native_scan import NativeSteps

    return _cached_in_mode("native_steps", NativeSteps, digest, program, mode, build)


def cached_ordered_steps(digest: Callable[[], str], program: Program, build: Callable[[], Any]) -> Any:
    """The steps of a table in the lane order of every mode with one round per wave
    (:func:`ppsweep.engine.native_scan.ordered_steps`): one file for those modes, whose steps differ
    only in their messages' resources (built from the routing, :func:`~ppsweep.engine.native_scan.native_steps`);
    arguments as :func:`cached_native_steps`'."""
    from ppsweep.engine.native_scan import OrderedSteps

    return _cached_in_mode("ordered_steps", OrderedSteps, digest, program, "one_round", build)


def cached_periodic_runs(digest: Callable[[], str], program: Program, mode: str, build: Callable[[], Any]) -> Any:
    """The runs of a table's waves that repeat in ``mode`` (:func:`ppsweep.engine.steady_state.periodic_runs`)
    from the cache, or ``build()`` (then stored); arguments as :func:`cached_native_steps`', but
    ``mode`` is the name the runs are kept under: a mode, or ``no_resources`` for those whose steps
    are the same (:func:`ppsweep.engine.core._runs_shape`)."""
    from ppsweep.engine.steady_state import PeriodicRuns

    return _cached_in_mode("periodic_runs", PeriodicRuns, digest, program, mode, build)


def _cached_in_mode(name: str, kind: type, digest: Callable[[], str], program: Program, mode: str, build: Callable[[], Any]) -> Any:
    """``kind`` (:func:`_cached_fields`) of a table in ``mode``, kept under ``name`` where the table is
    large enough for the cache, else ``build()``."""
    directory = cache_dir()
    if directory is None or program.n_waves < MIN_WAVES:
        return build()
    return _cached_fields(directory / disk_cache.key_name([name, digest(), mode, code_version()]), kind, build)


def _cached_fields(path: Path, kind: type, build: Callable[[], Any]) -> Any:
    """A dataclass or named tuple of arrays and scalars (``kind``) read from ``path``, or built and stored there."""
    names = [f.name for f in dataclasses.fields(kind)] if dataclasses.is_dataclass(kind) else list(kind._fields)
    read = disk_cache.read_entry(path)
    if read is not None:
        meta, arrays = read
        try:
            if meta.get("kind") == kind.__name__ and set(meta["scalars"]) | set(meta["dtypes"]) == set(names):
                # each array is the file's own (disk_cache.unpack): widened where it was narrowed, else kept
                values = {**meta["scalars"], **{k: arrays[k].astype(meta["dtypes"][k], copy=False) for k in meta["dtypes"]}}
                return kind(**values)
        except (KeyError, TypeError, ValueError):
            pass
    built = build()
    values = {name: getattr(built, name) for name in names}
    arrays = {k: v for k, v in values.items() if isinstance(v, np.ndarray)}
    scalars = {k: (bool(v) if isinstance(v, (bool, np.bool_)) else int(v)) for k, v in values.items() if k not in arrays}
    disk_cache.write_entry(path, {"kind": kind.__name__, "scalars": scalars, "dtypes": {k: a.dtype.str for k, a in arrays.items()}},
                         {k: disk_cache.narrow(a) for k, a in arrays.items()})
    return built
