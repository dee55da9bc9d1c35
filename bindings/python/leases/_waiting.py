"""Waiting without blocking Python's own interruptions: the canceller (a
sticky flag another thread sets to end waits at once) and the slices every
wait runs in, so that Ctrl-C and signal handlers run between two C calls."""

from __future__ import annotations

import ctypes
import time
from typing import Any, Callable, Optional

from . import _ffi
from ._managed import Managed

# A C call cannot be interrupted by a Python signal handler: it runs when the
# call returns. 100 ms slices put Ctrl-C within 200 ms of its arrival, and a
# slice after a quiet one costs the library no read (docs/workers.md).
SLICE_US = 100_000


class Canceller(Managed):
    """Ends the waits it is given (``claim(..., wait=..., canceller=c)``,
    ``lease.wait_lost(..., canceller=c)``, a ``work()`` loop) with
    ``InterruptedError``, at once, from any thread. It stays cancelled: every
    later wait given it ends at once too. Closing it (``with``, ``close()``)
    frees it; close it only after the waits it was given have returned."""

    _what = "canceller"

    def __init__(self) -> None:
        _ffi.ensure_not_forked()
        out = _ffi.CancellerPtr()
        _ffi.call(_ffi.lib.leases_canceller_new, ctypes.byref(out))
        self._ptr = out
        self._cancelled = False

    def _release(self, ptr: Any) -> None:
        _ffi.lib.leases_canceller_free(ptr)

    def cancel(self) -> None:
        """Ends every wait given this canceller, now and later. Safe from
        any thread and from a Python signal handler (which runs in the main
        thread, between two C calls); idempotent."""
        self._cancelled = True
        _ffi.call(_ffi.lib.leases_canceller_cancel, self._handle())

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def __repr__(self) -> str:
        state = "closed" if self._ptr is None else ("cancelled" if self._cancelled else "armed")
        return f"<leases.Canceller {state}>"


def canceller_handle(canceller: Optional[Canceller]) -> Any:
    """The C handle of an optional canceller (NULL for None)."""
    if canceller is None:
        return None
    if not isinstance(canceller, Canceller):
        raise TypeError(f"canceller must be a leases.Canceller, not {type(canceller).__name__}")
    return canceller._handle()


def in_slices(wait_us: Optional[int], attempt: Callable[[int], bool]) -> None:
    """Calls attempt(slice_us) until it returns True or wait_us (None: no
    bound) has passed on this host's monotonic clock; always at least once,
    with 0 for a wait of 0. Python's signal handlers (Ctrl-C's
    KeyboardInterrupt) run between two attempts."""
    if wait_us == 0:
        attempt(0)
        return
    deadline = None if wait_us is None else time.monotonic_ns() + wait_us * 1000
    while True:
        if deadline is None:
            if attempt(SLICE_US):
                return
            continue
        remaining = (deadline - time.monotonic_ns()) // 1000
        if attempt(max(0, min(SLICE_US, remaining))) or remaining <= SLICE_US:
            return
