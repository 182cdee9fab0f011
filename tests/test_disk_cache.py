"""The on-disk caches' container (ppsweep.disk_cache): what is written reads back array for array,
and a file that is foreign, truncated, extended, edited or another key's reads as None."""

from __future__ import annotations

import numpy as np
import pytest

from ppsweep import disk_cache

ARRAYS = {
    "ints": np.arange(-5, 1000, 3, dtype=np.int64).reshape(5, -1),
    "small": np.array([[1, -1], [127, 0]], dtype=np.int8),
    "floats": np.linspace(-1.0, 1e300, 17),
    "flags": np.array([True, False, True]),
    "empty": np.zeros((0, 4), dtype=np.int16),
    "scalar": np.array(2.5),
}
META = {"kind": "test", "nested": {"a": [1, 2]}, "tuple": (3, 4)}


@pytest.fixture
def written(tmp_path):
    path = tmp_path / disk_cache.key_name(["test", 1])
    disk_cache.write_entry(path, META, ARRAYS)
    return path


def test_an_entry_reads_back_array_for_array(written):
    assert written.suffix == disk_cache.SUFFIX
    meta, arrays = disk_cache.read_entry(written)
    assert meta == {"kind": "test", "nested": {"a": [1, 2]}, "tuple": [3, 4]}  # as JSON reads it back
    assert list(arrays) == list(ARRAYS)
    for key, want in ARRAYS.items():
        got = arrays[key]
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), key
        assert got.flags.writeable and got.flags.c_contiguous, key
    assert not list(written.parent.glob("*.tmp"))


@pytest.mark.parametrize("damage", ["foreign", "truncated", "extended", "header"])
def test_a_damaged_file_reads_as_none(written, damage):
    data = written.read_bytes()
    written.write_bytes({"foreign": b"PK\x03\x04 a zip file", "truncated": data[:-7], "extended": data + b"\0",
                         "header": data.replace(b'"test"', b'"tost"')}[damage])
    assert disk_cache.read_entry(written) is None


@pytest.mark.parametrize("header_text", [b"[1, 2]", b'{"meta": 3, "arrays": []}', b'{"arrays": []}'])
def test_a_sealed_file_without_a_metadata_mapping_reads_as_none(written, header_text):
    # its digest is right (sealed as write_entry seals), its header not what a cache file holds
    sealed = disk_cache._joined(header_text, disk_cache.content_digest(written.name, header_text), [])
    written.write_bytes(sealed)
    assert disk_cache.read_entry(written) is None
    damaged = bytearray(sealed)
    damaged[len(disk_cache.MAGIC) + 8] = 0xFF  # the digest's first character, not ASCII
    written.write_bytes(bytes(damaged))
    assert disk_cache.read_entry(written) is None


def test_an_edited_array_or_another_keys_file_reads_as_none(written):
    header, arrays, _ = disk_cache.unpack(written.read_bytes())
    arrays["floats"] = arrays["floats"] * 1.01
    written.write_bytes(disk_cache.pack({k: v for k, v in header.items() if k != "arrays"}, arrays))  # its digest kept
    assert disk_cache.read_entry(written) is None
    disk_cache.write_entry(written, META, ARRAYS)
    other = written.with_name(disk_cache.key_name(["test", 2]))
    other.write_bytes(written.read_bytes())  # a valid file, under another key's name
    assert disk_cache.read_entry(other) is None
    assert disk_cache.read_entry(written) is not None


def test_a_missing_file_or_a_refusing_disk_costs_nothing(tmp_path):
    assert disk_cache.read_entry(tmp_path / "none.ppc") is None
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache wants a directory")
    disk_cache.write_entry(blocked / "x.ppc", META, ARRAYS)  # OSError swallowed: a cache is an optimisation
    assert blocked.read_text().startswith("a file")
