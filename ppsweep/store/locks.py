"""Writers of a store: a ``generation`` per layout, a lock per unit, a registration per run.

A run registers itself (:func:`registered_writer`) and locks each unit while it computes and writes
it (:func:`unit_lock`), in ``.NAME.zarr.locks/`` beside the store; ``overwrite`` refuses while a
writer is registered (:func:`active_writers`, under :func:`registry_lock`); each layout has a new
``generation``, checked before a unit's values and before its done flag (:func:`check_generation`).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import Iterator

import filelock

from ppsweep.store.errors import StoreError


def store_generation(path: str | os.PathLike) -> str | None:
    """The ``generation`` attribute on disk now (a new one each time a layout is created), or None."""
    try:
        with open(Path(path) / "zarr.json", encoding="utf-8") as f:
            return json.load(f).get("attributes", {}).get("generation")
    except (OSError, ValueError):
        return None


def check_generation(path: str | os.PathLike, generation: str) -> None:
    """Raise :class:`StoreError` unless the store at ``path`` is still the layout of ``generation``."""
    if store_generation(path) != generation:
        raise StoreError(
            f"{path}: the store was replaced or removed while this run was writing it (another run with "
            "overwrite=true?); this run stopped before writing into it"
        )


def locks_dir(path: str | os.PathLike) -> Path:
    """Directory of the store's lock files, beside it (``.NAME.zarr.locks``): replacing the store keeps it."""
    path = Path(path)
    return path.with_name(f".{path.name}.locks")


def lock_file(file: Path) -> filelock.BaseFileLock:
    """A lock on ``file`` (its folder made first), not tied to the thread that takes it."""
    file.parent.mkdir(parents=True, exist_ok=True)
    return filelock.FileLock(str(file), thread_local=False)


@contextlib.contextmanager
def registry_lock(path: str | os.PathLike) -> Iterator[None]:
    """Held while a writer registers and while ``overwrite`` checks for writers and replaces."""
    with lock_file(locks_dir(path) / "registry.lock"):
        yield


def active_writers(path: str | os.PathLike) -> int:
    """Runs writing the store at ``path`` now (their registration locks are held); stale files are removed."""
    count = 0
    for file in sorted(locks_dir(path).glob("writer-*.lock")):
        lock = lock_file(file)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            count += 1
            continue
        lock.release()
        with contextlib.suppress(OSError):
            file.unlink()
    return count


@contextlib.contextmanager
def registered_writer(path: str | os.PathLike) -> Iterator[None]:
    """Register this run as a writer of the store at ``path`` for the ``with`` block.

    While registered, ``overwrite=true`` from another run refuses. The registration is a lock
    held by this process: it ends with the process, however that ends.
    """
    path = Path(path)
    with registry_lock(path):
        lock = lock_file(locks_dir(path) / f"writer-{os.getpid()}-{uuid.uuid4().hex[:8]}.lock")
        lock.acquire(timeout=0)
    try:
        yield
    finally:
        lock.release()
        with contextlib.suppress(OSError):
            Path(lock.lock_file).unlink()


def unit_lock(path: str | os.PathLike, p_index: int, m_index: int) -> filelock.BaseFileLock:
    """The lock of unit ``(p_index, m_index)``: held while a run computes and writes it."""
    return lock_file(locks_dir(path) / f"unit-{p_index}-{m_index}.lock")
