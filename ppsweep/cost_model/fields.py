"""What the config dataclasses (:class:`~ppsweep.cost_model.model.ModelConfig`,
:class:`~ppsweep.cost_model.system.SystemConfig`) share: building from a mapping with one error per
bad field, the range check of a number, and the field metadata the store's identity reads.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, Mapping

import numpy as np


#: Field metadata of config fields added after stores existed: such a field enters a store's
#: identity only when it differs from its default (:func:`ppsweep.store.identity.identity`).
IDENTITY_WHEN_SET = {"identity": "when_set"}


def config_from_mapping(cls, kind: str, values: Mapping[str, Any]):
    """Build a config dataclass from a mapping, with one clear error per bad field."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"{kind}.{unknown[0]}: unknown field; accepted: {', '.join(sorted(names))}")
    missing = sorted(f.name for f in fields(cls) if f.name not in values and f.default is MISSING)
    if missing:
        raise ValueError(f"{kind}.{missing[0]}: missing")
    config = cls(**values)
    config.check()
    return config


def require_number(field: str, value: Any, positive: bool) -> None:
    """Raise ValueError naming ``field`` unless ``value`` is a finite number ``> 0`` (``positive``) or ``>= 0``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
    ok = ok and (value > 0 if positive else value >= 0)
    if not ok:
        raise ValueError(f"{field}: must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}")

