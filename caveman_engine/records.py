"""Plain record classes: the ``==`` and ``repr`` (and, frozen, the hash and immutability) that
``@dataclass`` gave the engine's value types, without importing dataclasses and inspect and
paying its per-class cost at start-up (every ``compress`` defines several of them). Each class
names its fields in ``_fields`` and writes its ``__init__`` out."""

from __future__ import annotations


class Record:
    """``==`` and ``repr`` over ``_fields``, in order; mutable and so unhashable."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    __hash__ = None  # type: ignore[assignment]

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()  # type: ignore[attr-defined]
        return NotImplemented

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{self.__class__.__qualname__}({args})"


class Frozen(Record):
    """A :class:`Record` that cannot change once built (``_init`` sets the fields), hashable."""

    __slots__ = ()

    def _init(self, *values) -> None:
        for name, value in zip(self._fields, values):
            object.__setattr__(self, name, value)

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")
