"""A one-entry memo per thread: the value last computed from some objects, for the next call on them.

A sweep asks for several things of one table in turn (its order read and then checked, its
features and envelope in each mode, its compute time): each is computed once and given again while
the same objects come back. The objects are held weakly and compared by identity, so the memo
neither keeps a table alive nor mistakes a new one at a freed object's address for it; the rest
of the key is compared by equality. One entry per thread: evaluator threads never see each
other's values.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Hashable, Sequence


class LastValue:
    """The last ``(objects, key) -> value`` stored on each thread (:meth:`get`, :meth:`put`)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, objects: Sequence[Any], key: Hashable = ()) -> Any:
        """The value :meth:`put` last stored on this thread, where it was stored for these same
        ``objects`` (identity) and an equal ``key``; else None."""
        last = getattr(self._local, "entry", None)
        if last is None:
            return None
        refs, stored_key, value = last
        if len(refs) != len(objects) or any(ref() is not obj for ref, obj in zip(refs, objects)) or stored_key != key:
            return None
        return value

    def put(self, objects: Sequence[Any], key: Hashable, value: Any) -> Any:
        """Keep ``value`` (not None) as this thread's one entry, for ``objects`` (held weakly) and
        ``key``; returns it."""
        self._local.entry = (tuple(weakref.ref(obj) for obj in objects), key, value)
        return value
