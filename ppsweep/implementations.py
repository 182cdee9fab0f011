"""One operation, several implementations giving the same results: a registry and one front door.

The table-level work (realizing an order, validating a table, compiling a table's program, its
activation profile) has a *reference* implementation, written operation by operation, and an
*array* implementation that computes the same results to the bit for the tables it handles.
An :class:`Implementations` holds them with one predicate, ``handles``: whether the array path
handles this input. Calling it picks the array path where ``handles`` holds (``implementation="auto"``),
else the reference; a name picks that one. The conformance harness (``tests/conformance/``) checks
every registered implementation against the reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["REFERENCE", "Implementations"]

#: Name of the reference implementation of every :class:`Implementations`.
REFERENCE = "reference"


@dataclass
class Implementations:
    """Implementations of one operation, the reference first.

    Attributes:
      operation: the operation's name (messages).
      reference: the reference implementation.
      handles: ``(first argument) -> bool``: whether the non-reference implementations handle it.
      others: further implementations by name (:meth:`register`), each giving the reference's
        results, errors included, on every input ``handles`` accepts.
    """

    operation: str
    reference: Callable[..., Any]
    handles: Callable[[Any], bool]
    others: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def register(self, name: str, implementation: Callable[..., Any]) -> Callable[..., Any]:
        """Add ``implementation`` under ``name`` (not ``reference`` or ``auto``); returns it."""
        if name in (REFERENCE, "auto"):
            raise ValueError(f"{self.operation}: implementation name {name!r} is reserved")
        self.others[name] = implementation
        return implementation

    def names(self) -> tuple[str, ...]:
        """``reference`` and every registered implementation's name."""
        return (REFERENCE, *self.others)

    def choose(self, subject: Any, implementation: str = "auto") -> Callable[..., Any]:
        """The implementation that runs on ``subject``: ``auto`` is the first registered one where
        :attr:`handles` accepts ``subject``, else the reference; a name is that one."""
        if implementation == "auto":
            if self.others and self.handles(subject):
                return next(iter(self.others.values()))
            return self.reference
        if implementation == REFERENCE:
            return self.reference
        if implementation not in self.others:
            raise ValueError(f"{self.operation}: unknown implementation {implementation!r}; accepted: auto, {', '.join(self.names())}")
        return self.others[implementation]

    def __call__(self, subject: Any, *args: Any, implementation: str = "auto", **kwargs: Any) -> Any:
        """Run the chosen implementation (:meth:`choose`) on ``subject, *args, **kwargs``."""
        return self.choose(subject, implementation)(subject, *args, **kwargs)
