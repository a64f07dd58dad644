"""Streaming a generation step by step: the engine's ``on_step`` hook read as an iterator.

``engine.generate`` is one synchronous loop; ``Stream`` runs it on a worker thread and hands each
decoding step's committed tokens to the reader through a queue, so the reader sees chunks while
the loop still runs. The loop is the same one every method and the eval run (no second decoding
path); only where its tokens go differs. Closing the iterator early (``break``, ``close()``, an
exception or Ctrl-C in the reader's loop) stops the loop at its next step; an error in the loop is
raised in the reader.

A stream may hold a lock for its run (``take`` / ``give_back``, the decoder's ``Turns``): taken
when the iteration starts, given back when the worker ends, so a stream left unread still frees
its decoder once its loop ends or is cancelled (``cancel``: the loop stops at its next step and
reading on raises ``StreamCancelled``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

R = TypeVar("R")


@dataclass(frozen=True)
class Chunk:
    """One decoding step's committed tokens and the text they add (may be empty while a
    multi-byte character is still incomplete; it then comes with a later chunk)."""

    tokens: list[int]
    text: str


class _Stopped(Exception):
    """Raised by the hook to end a generation whose reader went away."""


class StreamCancelled(RuntimeError):
    """Reading a stream that a later call on its decoder cancelled."""


_DONE = object()


class Stream(Generic[R]):
    """Iterate ``Chunk``s of a running generation; ``result`` holds its return value afterwards.

    Args:
        run: runs the generation, calling its argument with each step's tokens; returns the
            final result (kept in ``result`` once the iteration ends).
        decode: token ids -> text (the whole output so far; chunks carry the differences).
        take, give_back: a lock held for the run (``take(cancel)`` waits for it; ``cancel``
            stops this stream); none by default.
    """

    def __init__(
        self,
        run: Callable[[Callable[[list[int]], None]], R],
        decode: Callable[[list[int]], str],
        *,
        take: Callable[[Callable[[], None]], None] | None = None,
        give_back: Callable[[], None] | None = None,
    ) -> None:
        self._run, self._decode = run, decode
        self._take, self._give_back = take, give_back
        self.result: R | None = None
        self._chunks: Iterator[Chunk] | None = None
        self._stop = threading.Event()
        self._cancelled = False

    def __iter__(self) -> Iterator[Chunk]:
        if self._chunks is not None:
            raise RuntimeError("a Stream can be iterated once")
        self._chunks = self._iterate()
        return self._chunks

    def __enter__(self) -> Stream[R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the generation at its next step (a no-op once it ended); the stream cannot be
        iterated afterwards."""
        if self._chunks is None:
            self._chunks = iter(())
        try:
            getattr(self._chunks, "close", lambda: None)()
        except ValueError:  # another thread is reading it: stop the loop, that reader ends
            self._stop.set()

    def cancel(self) -> None:
        """Stop the generation at its next step from outside the reader; reading on raises
        ``StreamCancelled``."""
        self._cancelled = True
        self._stop.set()

    def _iterate(self) -> Iterator[Chunk]:
        steps: queue.Queue = queue.Queue()
        stop, box = self._stop, {}

        def hook(tokens: list[int]) -> None:
            if stop.is_set():
                raise _Stopped
            steps.put(list(tokens))

        def work() -> None:
            try:
                box["result"] = self._run(hook)
            except _Stopped:
                pass
            except BaseException as err:  # re-raised in the reader
                box["error"] = err
            finally:
                if self._give_back is not None:
                    self._give_back()
                steps.put(_DONE)

        # 1. Wait for the lock (a call on the same decoder in another thread), start the loop.
        if self._take is not None:
            self._take(self.cancel)
        worker = threading.Thread(target=work, name="specdec-stream", daemon=True)
        try:
            worker.start()
        except BaseException:
            if self._give_back is not None:
                self._give_back()
            raise
        # 2. Hand each step's tokens to the reader as they come; stop the loop when it leaves.
        tokens: list[int] = []
        text = ""
        try:
            while (item := steps.get()) is not _DONE:
                self._check_cancelled()
                tokens += item
                new = self._new_text(tokens, text, final=False)
                text += new
                yield Chunk(item, new)
        finally:
            stop.set()
            worker.join()
        self._check_cancelled()
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        self.result = box.get("result")  # type: ignore[assignment]
        rest = self._new_text(tokens, text, final=True)
        if rest:  # text held back until the end (an incomplete character, a re-spaced word)
            yield Chunk([], rest)

    def _check_cancelled(self) -> None:
        if self._cancelled:
            raise StreamCancelled(
                "this stream was cancelled: its thread called the same Decoder "
                "again before reading it to the end; read or close a stream "
                "before the next call"
            )

    def _new_text(self, tokens: list[int], text: str, *, final: bool) -> str:
        """The text ``tokens`` add after ``text``: empty while the decoding so far does not
        extend it, and, unless ``final``, without a trailing incomplete character (U+FFFD)."""
        full = self._decode(tokens)
        ready = full if final else full.rstrip("\ufffd")
        return ready[len(text) :] if ready.startswith(text) else ""
