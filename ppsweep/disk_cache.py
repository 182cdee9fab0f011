"""What the on-disk caches share: where they live, the code's version, safe reads and writes.

Two caches use it: built tables (:mod:`ppsweep.tables.cache`) and built envelopes
(:mod:`ppsweep.engine.envelope_cache`). Each is a directory named by an environment variable
(``off`` turns it off) with a default under ``~/.cache/ppsweep``, and holds one ``.npz`` file
per key. A key includes a hash of the source of every module that computes what the file holds
(:func:`source_version`), so a code change starts a fresh set of files and nothing stale is
ever read. Files are written under a temporary name in the same directory and renamed into
place (:func:`write_npz`), so concurrent writers (shards, worker processes) never expose a
partial file. Every file carries a digest of its content bound to its key
(:func:`content_digest`); a file that cannot be read (damaged, truncated, foreign) or whose content
does not match its digest (edited so that it still loads, or another key's file copied over it)
reads as None (:func:`read_npz`) and its caller rebuilds and replaces it. A cache directory is
therefore safe to share between users and jobs: what is read is what was written under that key
(a digest without a secret: it stops accidents and stale copies, not a writer who recomputes it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

#: Values of a cache's environment variable that turn it off (case-insensitive, trimmed).
OFF_VALUES = ("off", "0", "false", "none", "")


def cache_dir(env: str, default_name: str) -> Path | None:
    """The directory of one cache, or None when it is off.

    Args:
      env: the environment variable naming the directory (``off``: no cache).
      default_name: the directory under ``~/.cache/ppsweep`` when the variable is not set.

    Returns:
      The directory (not created here), or None.
    """
    value = os.environ.get(env)
    if value is not None and value.strip().lower() in OFF_VALUES:
        return None
    return Path(value).expanduser() if value else Path.home() / ".cache" / "ppsweep" / default_name


def source_version(paths: Iterable[Path]) -> str:
    """A hash of the names and contents of ``paths`` (the source that defines a cached value) and
    of this module (which defines how it is stored).

    Args:
      paths: the source files, in a fixed order.

    Returns:
      16 hexadecimal digits.
    """
    digest = hashlib.sha256()
    for path in [*paths, Path(__file__).resolve()]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


#: Folders of the package whose code computes no stored or cached value (figures, reports, the command line).
NOT_COMPUTING = ("analysis", "viz", "paper", "cli")


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """:func:`source_version` of every module of the package that computes a stored value (all but
    :data:`NOT_COMPUTING`): part of a results store's identity, so a store is never resumed,
    sharded or repaired under other code."""
    package = Path(__file__).resolve().parent
    files = sorted(
        (f for f in package.rglob("*.py") if f.relative_to(package).parts[0] not in NOT_COMPUTING),
        key=lambda f: f.relative_to(package).as_posix(),
    )
    return source_version(files)


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (32 hexadecimal digits): an input file in a store's identity."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:32]


def key_name(parts: Any) -> str:
    """The file name of a key: a hash of ``parts`` (JSON-serialisable) and ``.npz``."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32] + ".npz"


def read_npz(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The metadata and arrays of a file :func:`write_npz` wrote, or None where it cannot be read.

    Args:
      path: the file.

    Returns:
      ``(meta, arrays)``, every array read into memory; None for a missing, damaged, truncated
      or foreign file (the caller rebuilds it).
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            arrays = {key: data[key] for key in data.files if key != "meta"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError):
        return None
    if not isinstance(meta, dict) or meta.pop(DIGEST, None) != content_digest(path.name, meta, arrays):
        return None  # edited, or another key's file copied over this one: rebuilt, never used
    return meta, arrays


#: Key of a file's content digest in its metadata (:func:`content_digest`).
DIGEST = "content_digest"


def content_digest(name: str, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    """Digest of a cache file's content bound to its key: the file name, the metadata and every
    array's name, type, shape and bytes. :func:`read_npz` recomputes it, so a file edited so
    that it still loads, or one key's file copied over another's, is rebuilt and never used."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(name.encode() + b"\0" + json.dumps(meta, sort_keys=True).encode())
    for key in sorted(arrays):
        array = np.ascontiguousarray(arrays[key])
        digest.update(f"\0{key}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


#: Deflate level of the cache files: level 1 writes the design sweep's largest files 3.6x faster
#: than numpy's default (6), for files a third larger (measured on 40 table and engine files).
COMPRESS_LEVEL = 1


def write_npz(path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write ``meta`` (JSON) and ``arrays`` to ``path`` atomically: a temporary file in the same
    directory, then a rename. A disk that refuses (read-only, full) is ignored: a cache is an
    optimisation only. The file is an ``.npz`` compressed with deflate at level :data:`COMPRESS_LEVEL`:
    tables, programs and step arrays are mostly repeated values, and shrink 13-50x on the design
    sweep's largest files, while a read costs about 1.5x an uncompressed one (a few milliseconds).

    Args:
      path: the file; its directory is created if needed.
      meta: JSON-serialisable metadata.
      arrays: the arrays (no key ``meta``).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.stem, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                plain = json.loads(json.dumps(meta))  # as read back (tuples as lists, keys as strings)
                sealed = {**plain, DIGEST: content_digest(path.name, plain, arrays)}
                with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL) as archive:
                    for key, value in {"meta": np.array(json.dumps(sealed)), **arrays}.items():
                        with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                            np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass


def narrow(a: np.ndarray) -> np.ndarray:
    """An integer array in the smallest integer type that holds it (the caller restores the type)."""
    if a.dtype.kind != "i" or a.size == 0:
        return a
    small = np.promote_types(np.min_scalar_type(int(a.min())), np.min_scalar_type(int(a.max())))
    return a.astype(small) if small.kind in "iu" and small.itemsize < a.dtype.itemsize else a
