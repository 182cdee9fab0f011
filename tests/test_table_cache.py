"""Tables cached on disk (ppsweep.tables.cache): the same arrays back, keys that separate tables and code."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ppsweep import disk_cache
from ppsweep.tables import build as build_mod
from ppsweep.tables import cache as table_cache
from ppsweep.tables.fast_realize import realize_fast, split_pairs
from ppsweep.tables.digest import table_digest
from ppsweep.tables.op_arrays import _read_ops, table_ops
from ppsweep.schedules import get_schedule


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(table_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(table_cache, "MIN_CELLS", 0)
    build_mod._build_cached.cache_clear()
    yield tmp_path
    build_mod._build_cached.cache_clear()


def fresh(name, p, m, **options):
    build_mod._build_cached.cache_clear()
    return build_mod.build_schedule(name, p, m, **options)


def assert_same(a, b):
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(y, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y and type(x) is type(y), f.name


@pytest.mark.parametrize("name, options", [("1f1b", {}), ("chimera", {"split": "1:2"}), ("hanayo", {"waves": 2}), ("zbv", {}),
                                           ("dualpipe", {}), ("dualpipev", {})])
def test_a_cached_table_reads_back_equal(cache, name, options):
    built = fresh(name, 4, 8, **options)
    assert len(list(cache.glob(f"*{disk_cache.SUFFIX}"))) == 1
    read = fresh(name, 4, 8, **options)
    assert read is not built
    assert_same(read, built)
    expected = realize_fast(get_schedule(name).build_order(4, 8, **options))
    assert_same(read, dataclasses.replace(expected, options=read.options))
    assert not list(cache.glob("*.tmp"))
    # the digest stored beside the table is the one its content hashes to
    assert table_digest(read) == table_digest(dataclasses.replace(read))
    # the operations stored beside the table are those its cells hold, field for field
    stored, from_cells = table_ops(read), _read_ops(read)
    for f in dataclasses.fields(from_cells):
        x, y = getattr(stored, f.name), getattr(from_cells, f.name)
        assert (x is None and y is None) or (x.dtype == y.dtype and np.array_equal(x, y)), f.name


def test_a_set_of_split_backwards_is_hashed_and_stored_by_its_pairs(cache):
    table = fresh("dualpipe", 4, 8)
    pairs = sorted(table.split_backward)
    assert isinstance(table.split_backward, frozenset) and len(pairs) > 1
    assert split_pairs(table.split_backward).tolist() == [list(pair) for pair in pairs]  # in order, whatever the set's
    # the digest follows the set's content, not its order in memory
    assert table_digest(dataclasses.replace(table, split_backward=frozenset(reversed(pairs)))) == table_digest(table)
    assert table_digest(dataclasses.replace(table, split_backward=frozenset(pairs[1:]))) != table_digest(table)
    assert table_digest(dataclasses.replace(table, split_backward=True)) != table_digest(table)
    read = fresh("dualpipe", 4, 8)
    assert read is not table and read.split_backward == table.split_backward
    assert all(type(j) is int and type(s) is int for j, s in read.split_backward)


def test_keys_separate_definitions_and_code(cache, monkeypatch):
    base = table_cache.table_key("1f1b", 4, 8, 1, 2, ())
    assert base != table_cache.table_key("1f1b", 4, 8, 1, 3, ())
    assert base != table_cache.table_key("1f1b", 8, 4, 1, 2, ())
    assert table_cache.table_key("hanayo", 4, 8, 1, 2, (("waves", "int", 1),)) != table_cache.table_key(
        "hanayo", 4, 8, 1, 2, (("waves", "bool", True),)
    )
    monkeypatch.setattr(table_cache, "code_version", lambda: "another version")
    assert base != table_cache.table_key("1f1b", 4, 8, 1, 2, ())


def test_a_damaged_file_is_rebuilt_and_replaced(cache):
    built = fresh("gpipe", 4, 8)
    (path,) = cache.glob(f"*{disk_cache.SUFFIX}")
    path.write_bytes(b"not a table")
    again = fresh("gpipe", 4, 8)
    assert_same(again, built)
    assert table_cache._read(path) is not None


def test_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv(table_cache.CACHE_ENV, "off")
    assert table_cache.cache_dir() is None
    fresh("gpipe", 4, 8)
    assert not list(tmp_path.glob(f"*{disk_cache.SUFFIX}"))
    build_mod._build_cached.cache_clear()


def test_a_file_that_still_loads_but_is_another_keys_or_edited_is_rebuilt(cache):
    """Issue 34: gpipe's table file copied over 1f1b's (peak memory x128 in a sweep), or an array
    edited and the file re-saved under its name: each loads, neither is used."""
    gpipe, one_f = fresh("gpipe", 4, 8), fresh("1f1b", 4, 8)
    key = cache / table_cache.table_key("1f1b", 4, 8, 1, 2, ())
    other = cache / table_cache.table_key("gpipe", 4, 8, 1, 2, ())
    key.write_bytes(other.read_bytes())
    assert disk_cache.unpack(key.read_bytes())[1]["kind"].size  # a valid file, gpipe's
    assert_same(fresh("1f1b", 4, 8), one_f)
    header, arrays, _ = disk_cache.unpack(key.read_bytes())  # edit one array, keep the header (and its digest): re-save
    arrays["micro"] = (arrays["micro"] + 1).astype(arrays["micro"].dtype)
    key.write_bytes(disk_cache.pack({k: v for k, v in header.items() if k != "arrays"}, arrays))
    assert disk_cache.unpack(key.read_bytes())[0][disk_cache.DIGEST] == header[disk_cache.DIGEST]
    assert disk_cache.read_entry(key) is None
    assert_same(fresh("1f1b", 4, 8), one_f)
    assert disk_cache.read_entry(key) is not None  # replaced by the rebuilt table
    assert_same(fresh("gpipe", 4, 8), gpipe)
