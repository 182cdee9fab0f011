"""Schedule search (issue 28): the best schedules of a parameterized space for a point or a region.

- :mod:`~ppsweep.search.spaces`: the spaces (sets of ``flex`` variants) and their ranges.
- :mod:`~ppsweep.search.region`: the costs (a point, a grid, noise) and the figures of one table.
- :mod:`~ppsweep.search.driver`: ``search`` (exhaustive grid, then local search) and its result.
- :mod:`~ppsweep.search.export`: the winner as a PyTorch pipeline CSV, checked with PyTorch's loader.
- :mod:`~ppsweep.search.cli`: ``python -m ppsweep.search``.

``from ppsweep.search import search, Region`` works (imported on first use).
"""

from ppsweep import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "search": "ppsweep.search.driver", "SearchResult": "ppsweep.search.driver", "INCUMBENTS": "ppsweep.search.driver",
    "Region": "ppsweep.search.region", "SPACES": "ppsweep.search.spaces", "get_space": "ppsweep.search.spaces",
})
