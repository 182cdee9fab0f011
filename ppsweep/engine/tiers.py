"""The two-tier network: which tier each message and gradient synchronisation of a table takes.

Pipeline worker ``w`` (``0 … p-1``) lives on node ``worker_node[w]`` (default: every worker on its
own node, ``worker_node[w] = w``). A message between two workers of one node takes the **intra**
tier (``alpha_intra``, ``beta_intra`` of :class:`~ppsweep.engine.cost_grid.Costs`: NVLink/NVSwitch),
any other the **inter** tier (``alpha``, ``beta``: the network between nodes). A directed link
``(src, dst)`` thus has one tier, and a message its link's. A replicated stage's gradient
synchronisation (a ring all-reduce over its holders) takes the intra tier where every holder is on
one node, else the inter tier (docs/contract.md §4).

With the default placement every message crosses nodes: every result is the single-tier one. The
placement depends on no cost, so it is static per compiled table: it decides, per message, which
tier's ``α`` and wire time the engine adds (:data:`INTER` = 0, :data:`INTRA` = 1 index the per-tier
rows of the costs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Tier indices: the rows of the per-tier costs (:meth:`ppsweep.engine.cost_grid.Costs.tier_alpha`).
INTER, INTRA = 0, 1
#: Tiers of the network.
N_TIERS = 2


def check_worker_node(worker_node: Any, p: int) -> tuple[int, ...]:
    """The placement ``worker_node`` as a tuple of ``p`` node indices (None: ``(0, 1, …, p-1)``).

    Raises:
      ValueError: naming ``worker_node`` where it is not ``p`` integers ``>= 0``.
    """
    if worker_node is None:
        return tuple(range(p))
    if isinstance(worker_node, tuple) and len(worker_node) == p and all(type(n) is int and n >= 0 for n in worker_node):
        return worker_node  # already a placement (this function's own result, checked again by its callers)
    array = np.asarray(worker_node)
    if array.shape != (p,) or not (np.issubdtype(array.dtype, np.integer) or array.size == 0) or np.any(array < 0):
        raise ValueError(f"worker_node: must be {p} integers >= 0 (the node of each pipeline worker), got {worker_node!r}")
    return tuple(int(n) for n in array)


def nodes_of(p: int, gpus_per_node: int) -> tuple[int, ...]:
    """Pipeline worker ``w`` on node ``w // gpus_per_node`` (consecutive workers share a node).

    Raises:
      ValueError: naming ``gpus_per_node`` where it is not an integer >= 1.
    """
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, (int, np.integer)) or gpus_per_node < 1:
        raise ValueError(f"system.gpus_per_node: must be an integer >= 1, got {gpus_per_node!r}")
    return tuple(w // int(gpus_per_node) for w in range(p))


@dataclass(frozen=True)
class Tiers:
    """The tier of every link and synchronisation of a compiled table under one placement.

    Attributes:
      worker_node: the node of each worker.
      link_tier: ``(n_links + 1,)`` tier of each directed link (:attr:`ppsweep.engine.program.Program.links`);
        the last entry, for the trash link of lanes that send nothing, is :data:`INTER`.
      sync_tier: ``(n_sync,)`` tier of each synchronisation's ring all-reduce.
    """

    worker_node: tuple[int, ...]
    link_tier: np.ndarray
    sync_tier: np.ndarray

    @property
    def uses_intra(self) -> bool:
        """Whether any message or synchronisation takes the intra tier."""
        return bool((self.link_tier == INTRA).any() or (self.sync_tier == INTRA).any())

    def key(self) -> tuple:
        """Hashable identity of the tiers (what an envelope is built for): ``()`` where every one is inter."""
        if not self.uses_intra:
            return ()
        return (self.link_tier.tobytes(), self.sync_tier.tobytes())

    def lane_tier(self, link: np.ndarray) -> np.ndarray:
        """The tier of each lane's (or step's) message, from its link (the trash link or -1: :data:`INTER`,
        the entry after the links')."""
        if not self.uses_intra:  # every message between nodes: no gather over the lanes
            return np.full(np.shape(link), INTER, dtype=np.int64)
        return self.link_tier[np.minimum(link, self.link_tier.size - 1)].astype(np.int64, copy=False)


def tiers_for(program: Any, worker_node: Any = None) -> Tiers:
    """The :class:`Tiers` of a compiled table (:class:`ppsweep.engine.program.Program`) under ``worker_node``.

    Raises:
      ValueError: naming ``worker_node`` where it is not ``p`` integers ``>= 0``.
    """
    nodes = np.array(check_worker_node(worker_node, program.p), dtype=np.int64)
    links = np.asarray(program.links, dtype=np.int64).reshape(-1, 2)
    link_tier = np.full(links.shape[0] + 1, INTER, dtype=np.int64)
    link_tier[:-1] = np.where(nodes[links[:, 0]] == nodes[links[:, 1]], INTRA, INTER)
    sync_tier = np.array([INTRA if len({int(nodes[w]) for w in row if w >= 0}) == 1 else INTER
                          for row in program.sync_holders], dtype=np.int64)
    return Tiers(tuple(int(n) for n in nodes), link_tier, sync_tier)
