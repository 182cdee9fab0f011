"""The in-memory cache of built tables is bounded by cells, not by a count of tables of any size."""

from __future__ import annotations

from ppsweep import build_schedule
from ppsweep.tables import build as build_mod


def test_the_table_cache_keeps_at_most_its_cells(monkeypatch):
    build_mod._build_cached.cache_clear()
    small = build_schedule("1f1b", 4, 8)
    monkeypatch.setattr(build_mod, "KEPT_CELLS", 3 * small.kind.size)
    tables = [build_schedule("1f1b", 4, m) for m in (8, 9, 10, 11)]
    assert tables[0] is small  # kept from before
    kept = list(build_mod._build_cached._kept.values())
    assert sum(t.kind.size for t in kept) <= 3 * small.kind.size
    assert tables[-1] in kept and small not in kept  # the least recently used went first
    assert build_schedule("1f1b", 4, 11) is tables[-1]  # a kept table is the same object
    assert build_schedule("1f1b", 4, 8) is not small  # a dropped one is built again (equal, a new object)
    build_mod._build_cached.cache_clear()


def test_a_table_larger_than_the_budget_is_still_kept_alone(monkeypatch):
    build_mod._build_cached.cache_clear()
    monkeypatch.setattr(build_mod, "KEPT_CELLS", 1)
    table = build_schedule("gpipe", 4, 8)
    assert build_schedule("gpipe", 4, 8) is table
    assert list(build_mod._build_cached._kept.values()) == [table]
    build_mod._build_cached.cache_clear()
