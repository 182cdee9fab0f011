"""Named overlap credits (``system.fb_overlap=NAME``): measured values of :func:`ppsweep.tables.ops.pair_time`'s credit.

``deepseek_compute`` and ``deepseek_a2a`` come from DeepSeek's profile of one overlapped DualPipe pair
(``ppsweep/data/deepseek_overlap.yaml``, with its source and the spans used; README "DualPipe's
overlap credit, measured"; ``scripts/deepseek_overlap.py`` recomputes them from the trace).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

#: The committed measurements.
DATA = Path(__file__).resolve().parent / "data" / "deepseek_overlap.yaml"


@lru_cache(maxsize=1)
def named_credits() -> dict[str, float]:
    """``name -> fb_overlap`` of every named credit."""
    import yaml

    data = yaml.safe_load(DATA.read_text())
    return {name: float(entry["fb_overlap"]) for name, entry in data["credits"].items()}


def resolve_fb_overlap(value: Any, field: str = "system.fb_overlap") -> Any:
    """``value`` with a credit's name replaced by its number (numbers and anything else unchanged).

    Raises:
      ValueError: an unknown name, naming the accepted ones.
    """
    if not isinstance(value, str):
        return value
    credits = named_credits()
    if value not in credits:
        raise ValueError(f"{field}: must be a number in [0, 1] or one of {', '.join(credits)}, got {value!r}")
    return credits[value]
