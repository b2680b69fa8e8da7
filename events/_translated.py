"""No driver error crosses the store port.

Each backend says once how its driver's errors read (a function from the
driver's exception to ``StoreUnavailable`` or ``StoreDamaged``, None for
what is no database failure), as the ``_driver_error`` method of its
classes; ``translated`` wraps a class's public methods so that whatever
escapes them, from a plain call, a generator or the body of a ``with`` on
one of its context managers, is the engine's error with the driver's as
its ``__cause__``. What a backend catches of its driver's errors inside
(a unique violation that is an id reused, a full disk that is a
``StorageError``) it still catches first: the translation only sees what
leaves the method.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from ._errors import StoreFailed

C = TypeVar("C", bound=type)


class Translating(Protocol):
    def _driver_error(self, exc: Exception, operation: str) -> StoreFailed | None: ...


def translated(cls: C) -> C:
    """``cls`` with every public method (and ``__init__``) of its own
    translating its driver's errors through ``cls._driver_error``;
    properties and underscored helpers are left alone (they run inside a
    public method, which translates)."""
    for name, member in list(vars(cls).items()):
        if (name.startswith("_") and name != "__init__") or not inspect.isfunction(member):
            continue
        setattr(cls, name, _wrapped(name, member))
    return cls


@contextmanager
def _probe() -> Iterator[None]:
    yield


# what every @contextmanager function runs: tells one from any other wrapper
_CONTEXT_MANAGER_CODE = _probe.__code__


def _wrapped(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    inner = getattr(method, "__wrapped__", None)
    if method.__code__ is _CONTEXT_MANAGER_CODE and inner is not None:
        # a @contextmanager: the generator under it is wrapped, so that what
        # the caller's ``with`` body raises is thrown through it and translated
        return functools.wraps(method)(contextmanager(_generator(name, inner)))
    if inspect.isgeneratorfunction(method):
        return functools.wraps(method)(_generator(name, method))

    @functools.wraps(method)
    def call(self: Translating, *args: Any, **kwargs: Any) -> Any:
        try:
            result = method(self, *args, **kwargs)
        except StoreFailed:
            raise
        except Exception as exc:
            _raise_translated(self, exc, name)
            raise
        if isinstance(result, types.GeneratorType):  # rows read lazily, after the call returned
            return _guarded_iteration(self, name, result)
        return result

    return call


def _generator(name: str, method: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def generator(self: Translating, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return (yield from _guarded_iteration(self, name, method(self, *args, **kwargs)))

    return generator


def _guarded_iteration(self: Translating, name: str, gen: Any) -> Iterator[Any]:
    try:
        return (yield from gen)
    except StoreFailed:
        raise
    except Exception as exc:
        _raise_translated(self, exc, name)
        raise


def _raise_translated(self: Translating, exc: Exception, operation: str) -> None:
    failed = self._driver_error(exc, "open" if operation == "__init__" else operation)
    if failed is not None:
        raise failed from exc
