"""`lazy`: an attribute computed on its first read and kept on the instance, without a
lock.

functools.cached_property on Python 3.11 (the benchmarks' interpreter; 3.12 dropped
it, gh-87634) computes under one RLock per property, shared by every instance and
every thread: the resume workers and the projection, each decoding the events it
read (StoredEvent.fact, three or four a run), queued on that one lock while another
thread decoded, about 12 us a first read in a 1,000-run event wait. Here two threads
that read the same instance's attribute at once may both compute it and the later
store wins, harmless for a value that depends only on the instance's own immutable
fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class lazy(Generic[T]):
    """Decorate a method of one argument: its result replaces the attribute in the
    instance's `__dict__` on first read (a non-data descriptor, so later reads never
    reach it). The class needs a `__dict__` (no `__slots__`); frozen dataclasses work,
    as with cached_property."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> lazy[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | lazy[T]:
        if instance is None:
            return self
        value = self.func(instance)
        instance.__dict__[self.name] = value
        return value
