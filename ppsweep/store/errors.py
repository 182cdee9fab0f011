"""The store's errors: :class:`StoreError` (one line: why, and what to do) and :class:`IncompleteStoreWarning`."""

from __future__ import annotations


class StoreError(RuntimeError):
    """A store that cannot be used as asked; the message says why and what to do."""


class IncompleteStoreWarning(UserWarning):
    """Opening a store whose sweep has not finished."""
