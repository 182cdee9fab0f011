"""Shards: one sweep's units of work split across jobs that write disjoint regions of one store.

A sweep of ``U`` units of work (``(p, m)`` pairs: one chunk of every variable of the store, see
:mod:`ppsweep.sweep.evaluate`) splits into ``shards`` shards. Shard ``k`` owns units ``k``, ``k + shards``,
``k + 2·shards``, … of :meth:`SweepSpec.units` (round-robin, so that the expensive large-``p``
units spread over every shard). A shard writes only its units' chunks and their ``done`` flags,
so shards run in any order, at once, on machines that share a filesystem.

This module is the completeness check (README, "Running on a cluster"). The shard arithmetic
(:func:`~ppsweep.sweep.config.shard_units`) and the config (``shards``, ``shard``, ``finalize``) are
:mod:`ppsweep.sweep.config`'s; the Hydra
callback that lays out the store before a ``--multirun`` and the launchers live with the launcher
plugin, ``hydra_plugins/ppsweep_launcher``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppsweep.cli.support import display
from ppsweep.sweep.config import shard_units  # noqa: F401 (the arithmetic lives with its validation; ppsweep.sweep.shards.shard_units kept)

if TYPE_CHECKING:
    from ppsweep.sweep.config import Plan


def missing_by_shard(done, shards: int) -> dict[int, int]:
    """Units not done, per shard that has any, from the store's ``done`` ``(p, m)`` array."""
    flat = [bool(x) for x in done.reshape(-1)]  # the order of SweepSpec.units(): p-major
    missing: dict[int, int] = {}
    for index, finished in enumerate(flat):
        if not finished:
            missing[index % shards] = missing.get(index % shards, 0) + 1
    return missing


def describe_missing(done, shards: int) -> str:
    """``"3 of 16 units missing (shards 1, 5 of 8)"``."""
    missing = missing_by_shard(done, shards)
    count = sum(missing.values())
    text = f"{count} of {done.size} units missing"
    if shards > 1:
        text += f" (shard{'s' if len(missing) > 1 else ''} {', '.join(map(str, sorted(missing)))} of {shards})"
    return text


def finalize(plan: Plan) -> tuple[bool, str]:
    """Check the store of ``plan`` and mark it complete when every unit is done.

    Returns:
      ``(complete, message)``: the message says what is complete, or what is missing and how to
      finish it.

    Raises:
      StoreError: no store there, or another sweep's.
    """
    from ppsweep.store.errors import StoreError
    from ppsweep.store.layout import finish_store
    from ppsweep.store.open import check_store
    from ppsweep.store.units import done_units

    if not plan.path.exists():
        raise StoreError(f"{display(plan.path)}: no such store; run the sweep first (same command without finalize=true)")
    group = check_store(plan.path, plan.spec)
    if finish_store(group, plan.path):
        return True, f"{display(plan.path)} is complete: {plan.spec.n_points:,} points in {len(plan.spec.units())} units"
    done = done_units(group)
    return False, (
        f"{display(plan.path)} is incomplete: {describe_missing(done, plan.shards)}; run the missing shards "
        "(the same command, with shard=K for one), then finalize=true"
    )
