"""The base of every object that owns a library handle: close(), ``with``,
and a finalizer that frees local memory only (never writes to the store)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Optional, Type, TypeVar

from . import _ffi
from ._errors import ClosedError

_C = TypeVar("_C", bound="Closing")
_M = TypeVar("_M", bound="Managed")


class Closing:
    """A context manager whose exit is ``close()`` (``_leave`` says what
    leaving does when it depends on how the block ended)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def _leave(self, ok: bool) -> None:
        self.close()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self._leave(exc_type is None)


class Managed(Closing, ABC):
    """Owns one handle; ``_ptr`` is None once it is closed or consumed."""

    _what = "object"
    _ptr: Any = None

    def _handle(self) -> Any:
        _ffi.ensure_not_forked()
        if self._ptr is None:
            raise ClosedError(f"this {self._what} is closed")
        return self._ptr

    def _take(self) -> Any:
        ptr, self._ptr = self._ptr, None
        return ptr

    @abstractmethod
    def _release(self, ptr: Any) -> None:
        """Gives a live handle back to the library."""

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close(self) -> None:
        """Frees the handle; idempotent."""
        if self._ptr is None:
            return
        _ffi.ensure_not_forked()
        self._release(self._take())

    def __enter__(self: _M) -> _M:
        self._handle()
        return self

    def _succeed(self) -> None:
        """What leaving a `with` block without an exception does."""
        self.close()

    def _leave(self, ok: bool) -> None:
        if self._ptr is None:
            return
        if ok:
            self._succeed()
        else:
            self.close()

    def __del__(self) -> None:
        # A forked child must not enter the library; at interpreter exit the
        # module may already be gone. Either way there is nothing to write.
        try:
            if self._ptr is not None and _ffi.usable():
                self._release(self._take())
        except Exception:
            pass
