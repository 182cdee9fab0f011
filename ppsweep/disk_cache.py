"""What the on-disk caches share: where they live, the code's version, safe reads and writes.

Two caches use it: built tables (:mod:`ppsweep.tables.cache`) and built envelopes
(:mod:`ppsweep.engine.envelope_cache`). Each is a directory named by an environment variable
(``off`` turns it off) with a default under ``~/.cache/ppsweep``, and holds one file per key
(:data:`SUFFIX`: a JSON header and LZ4-compressed arrays, :func:`pack`). A key includes a hash
of the source of every module that computes what the file holds (:func:`source_version`), so a
code change starts a fresh set of files and nothing stale is ever read. Files are written under a temporary name in the same directory and renamed into
place (:func:`write_entry`), so concurrent writers (shards, worker processes) never expose a
partial file. Every file carries a digest of its content bound to its key
(:func:`content_digest`); a file that cannot be read (damaged, truncated, foreign) or whose content
does not match its digest (edited so that it still loads, or another key's file copied over it)
reads as None (:func:`read_entry`) and its caller rebuilds and replaces it. A cache directory is
therefore safe to share between users and jobs: what is read is what was written under that key
(a digest without a secret: it stops accidents and stale copies, not a writer who recomputes it).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from numcodecs import lz4

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


#: Suffix of every cache file (:func:`write_entry`'s container).
SUFFIX = ".ppc"

#: First bytes of a cache file: the container and its version.
MAGIC = b"ppsweep-cache/2\n"

#: Every array's bytes are one LZ4 block (numcodecs' ``lz4``, which zarr needs too). The design
#: sweep's caches (20,085 files, 5.6 GB of arrays) read back in 3.3 s, against 24 s as ``.npz``
#: files deflated at level 1 (numpy's zip members and array headers cost more than the inflate),
#: for files 1.4x larger on disk (380 MB against 269 MB). Called as functions, not through the
#: ``LZ4`` codec's ``encode``, whose checks of each argument cost more than a small array's block.
_compress, _decompress = lz4.compress, lz4.decompress


def key_name(parts: Any) -> str:
    """The file name of a key: a hash of ``parts`` (JSON-serialisable) and :data:`SUFFIX`."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32] + SUFFIX


#: Key under which :func:`unpack` returns a file's content digest with its header (:func:`content_digest`).
DIGEST = "content_digest"

#: Characters of a content digest (hexadecimal) in a file.
_DIGEST_SIZE = 32


def content_digest(name: str, header_text: bytes, *payload: bytes) -> str:
    """Digest of a cache file's content bound to its key: the file name, the header as the file holds
    it (JSON: metadata and every array's name, type, shape and stored size) and the stored bytes
    (``payload``: in one piece or in the arrays' pieces, the same digest). :func:`read_entry`
    recomputes it from the file's own bytes, so a file edited so that it still loads, or one key's
    file copied over another's, is rebuilt and never used."""
    digest = hashlib.blake2b(name.encode(), digest_size=_DIGEST_SIZE // 2)
    digest.update(b"\0")
    digest.update(header_text)
    digest.update(b"\0")
    for piece in payload:
        digest.update(piece)
    return digest.hexdigest()


def _encoded(arrays: dict[str, np.ndarray]) -> tuple[list[list[Any]], list[bytes]]:
    """Each array's ``[name, dtype, shape, stored bytes]`` and its C-order bytes compressed
    (:data:`_compress`; nothing for an empty array)."""
    specs, blobs = [], []
    for key, value in arrays.items():
        a = np.asarray(value, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        if a.dtype.hasobject:
            raise ValueError(f"cache array {key!r}: object arrays are not stored")
        blob = _compress(a) if a.nbytes else b""
        specs.append([key, a.dtype.str, list(a.shape), len(blob)])
        blobs.append(blob)
    return specs, blobs


def _joined(header_text: bytes, digest: str, blobs: list[bytes]) -> bytes:
    """:data:`MAGIC`, the header's length (8 bytes, little-endian), the content digest (ASCII
    hexadecimal, :data:`_DIGEST_SIZE` bytes), the header (JSON), the blobs."""
    return b"".join([MAGIC, len(header_text).to_bytes(8, "little"), digest.encode("ascii"), header_text, *blobs])


def _parts(data: bytes) -> tuple[str, memoryview, memoryview]:
    """A file's content digest, header text and payload (the stored array bytes), without copies.

    Raises:
      ValueError: not such a file, or one shorter than its header's length says.
    """
    if not data.startswith(MAGIC):
        raise ValueError("not a ppsweep cache file")
    view = memoryview(data)
    at = len(MAGIC)
    size = int.from_bytes(view[at:at + 8], "little")
    text_at = at + 8 + _DIGEST_SIZE
    if len(data) < text_at + size:
        raise ValueError("truncated cache file")
    return bytes(view[at + 8:text_at]).decode("ascii"), view[text_at:text_at + size], view[text_at + size:]


def pack(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    """The bytes of a cache file holding ``header`` (JSON-serialisable; each array's
    ``[name, dtype, shape, stored bytes]`` is added under ``"arrays"``) and ``arrays``, compressed.
    Nothing is sealed here: the file keeps ``header[DIGEST]`` as its digest where there is one
    (as :func:`unpack` returned it), else zeros; :func:`write_entry` computes the digest."""
    specs, blobs = _encoded(arrays)
    fields = {k: v for k, v in header.items() if k != DIGEST}
    return _joined(json.dumps({**fields, "arrays": specs}).encode(), str(header.get(DIGEST, "0" * _DIGEST_SIZE)), blobs)


def unpack(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray], bytes]:
    """The header (its content digest under :data:`DIGEST`), the arrays (each a writable array of
    its own) and the stored array bytes of a file :func:`pack` wrote.

    Raises:
      ValueError: not such a file, or truncated, or an array that does not decode to its shape.
    """
    digest, text, payload = _parts(data)
    header = json.loads(bytes(text))
    return {**header, DIGEST: digest}, _decoded(header["arrays"], payload), bytes(payload)


def _decoded(specs: list[list[Any]], payload: memoryview) -> dict[str, np.ndarray]:
    """The arrays of a file's ``specs`` (its header's ``"arrays"``) from its payload.

    Raises:
      ValueError: a payload shorter or longer than the specs say, or an array that does not decode to its shape.
    """
    arrays, offset = {}, 0
    for key, dtype, shape, stored in specs:
        blob = payload[offset:offset + stored]
        if len(blob) != stored:
            raise ValueError("truncated cache file")
        offset += stored
        out = np.empty(tuple(shape), dtype=np.dtype(dtype))
        if out.nbytes:
            _decompress(blob, out)
        arrays[key] = out
    if offset != len(payload):
        raise ValueError("cache file longer than its header says")
    return arrays


def read_entry(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The metadata and arrays of a file :func:`write_entry` wrote, or None where it cannot be read.

    Args:
      path: the file.

    Returns:
      ``(meta, arrays)``, each array writable and its own; None for a missing, damaged,
      truncated or foreign file, or one whose content does not match its digest (the caller
      rebuilds it).
    """
    try:
        digest, text, payload = _parts(path.read_bytes())
        if digest != content_digest(path.name, text, payload):
            return None  # edited, or another key's file copied over this one: rebuilt, never used
        header = json.loads(bytes(text))
        if not isinstance(header, dict) or not isinstance(header.get("meta"), dict):
            return None
        return header["meta"], _decoded(header["arrays"], payload)
    except (OSError, ValueError, TypeError, KeyError, RuntimeError):
        return None


#: Directories :func:`write_entry` has made (or found) in this process: one ``mkdir`` each, not one a file.
_MADE: set[Path] = set()

#: Numbers of this process's temporary files (:func:`write_entry`): with the process's id, a name
#: no other live process or thread uses, so no random name nor exclusive create is needed.
_TEMPORARY = itertools.count()


def write_entry(path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write ``meta`` (JSON) and ``arrays`` to ``path`` atomically: a temporary file in the same
    directory, then a rename. A disk that refuses (read-only, full) is ignored: a cache is an
    optimisation only. The file is :func:`pack`'s, sealed with :func:`content_digest`.

    Args:
      path: the file; its directory is created if needed.
      meta: JSON-serialisable metadata.
      arrays: the arrays.
    """
    specs, blobs = _encoded(arrays)
    text = json.dumps({"meta": meta, "arrays": specs}).encode()
    data = _joined(text, content_digest(path.name, text, *blobs), blobs)
    try:
        if path.parent not in _MADE:
            path.parent.mkdir(parents=True, exist_ok=True)
            _MADE.add(path.parent)
        # A name of this process's own (a file left under it by a dead process of the same id is
        # overwritten; never a link followed), with the permissions of any new file (the umask's).
        tmp = f"{path}.{os.getpid()}-{next(_TEMPORARY)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0), 0o666)
        try:
            left = memoryview(data)
            while left:
                left = left[os.write(fd, left):]
            os.close(fd)
            fd = -1
            os.replace(tmp, path)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        _MADE.discard(path.parent)  # removed meanwhile, perhaps: made again at the next write


def narrow(a: np.ndarray) -> np.ndarray:
    """An integer array in the smallest integer type that holds it (the caller restores the type)."""
    if a.dtype.kind != "i" or a.size == 0:
        return a
    small = np.promote_types(np.min_scalar_type(int(a.min())), np.min_scalar_type(int(a.max())))
    return a.astype(small) if small.kind in "iu" and small.itemsize < a.dtype.itemsize else a
