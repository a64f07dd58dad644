"""Turns: one generation at a time on a ``Decoder``, the others wait.

A decoder's pair, caches and drafter hold the state of the one generation running on them, so
two generations at once corrupt each other. ``Turns`` is the decoder's lock: a call takes the
turn (waiting while another thread holds it) and gives it back when it ends, however it ends. A
stream holds the turn from its first chunk until its worker ends (iterated to the end, closed,
or collected), so another thread's call waits for it.

One case cannot wait: the thread that opened a stream calls the decoder again while its stream is
still open (a stream abandoned after Ctrl-C, or a call inside the loop that reads it). That
thread is the only one that could finish the stream, so waiting would never end; the open stream
is cancelled instead (its worker stops at its next step and gives the turn back) and reading it
further raises ``StreamCancelled``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Turns:
    """The lock of one decoder: ``hold`` a turn for a call, ``take``/``give_back`` for a stream."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._owner: int | None = None  # the thread that took the turn
        self._cancel: Callable[[], None] | None = None  # a stream's, until it is called
        self._streaming = False  # whether a stream holds the turn

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the turn for the body (a call in this thread)."""
        self.take()
        try:
            yield
        finally:
            self.give_back()

    def take(self, cancel: Callable[[], None] | None = None) -> None:
        """Wait for the turn and take it for this thread.

        Args:
            cancel: for a stream, stops it; called if this thread asks for the turn again while
                the stream still holds it.
        """
        me = threading.get_ident()
        with self._cond:
            while self._busy:
                # 1. This thread's own open stream: cancel it, then wait for its worker to end.
                if self._owner == me and self._cancel is not None:
                    self._cancel()
                    self._cancel = None
                elif self._owner == me and not self._streaming:
                    raise RuntimeError(
                        "Decoder.generate was called again inside a running call "
                        "in the same thread; a Decoder runs one call at a time"
                    )
                # 2. Another thread's call or stream: wait for it to give the turn back.
                self._cond.wait()
            self._busy, self._owner, self._cancel = True, me, cancel
            self._streaming = cancel is not None

    def give_back(self) -> None:
        """End the current turn and wake the callers waiting for one."""
        with self._cond:
            self._busy, self._owner, self._cancel, self._streaming = False, None, None, False
            self._cond.notify_all()
