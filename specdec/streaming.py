"""Streaming a generation step by step: the engine's ``on_step`` hook read as an iterator.

``engine.generate`` is one synchronous loop; ``Stream`` runs it on a worker thread and hands each
decoding step's committed tokens to the reader through a queue, so the reader sees chunks while
the loop still runs. The loop is the same one every method and the eval run (no second decoding
path); only where its tokens go differs. Closing the iterator early (``break``) stops the loop
at its next step; an error in the loop is raised in the reader.
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


_DONE = object()


class Stream(Generic[R]):
    """Iterate ``Chunk``s of a running generation; ``result`` holds its return value afterwards.

    Args:
        run: runs the generation, calling its argument with each step's tokens; returns the
            final result (kept in ``result`` once the iteration ends).
        decode: token ids -> text (the whole output so far; chunks carry the differences).
    """

    def __init__(self, run: Callable[[Callable[[list[int]], None]], R],
                 decode: Callable[[list[int]], str]) -> None:
        self._run, self._decode = run, decode
        self.result: R | None = None
        self._started = False

    def __iter__(self) -> Iterator[Chunk]:
        if self._started:
            raise RuntimeError("a Stream can be iterated once")
        self._started = True
        steps: queue.Queue = queue.Queue()
        stop = threading.Event()
        box: dict[str, object] = {}

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
                steps.put(_DONE)

        worker = threading.Thread(target=work, name="specdec-stream", daemon=True)
        worker.start()
        tokens: list[int] = []
        text = ""
        try:
            while (item := steps.get()) is not _DONE:
                tokens += item
                new = self._new_text(tokens, text, final=False)
                text += new
                yield Chunk(item, new)
        finally:
            stop.set()
            worker.join()
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        self.result = box.get("result")  # type: ignore[assignment]
        rest = self._new_text(tokens, text, final=True)
        if rest:  # text held back until the end (an incomplete character, a re-spaced word)
            yield Chunk([], rest)

    def _new_text(self, tokens: list[int], text: str, *, final: bool) -> str:
        """The text ``tokens`` add after ``text``: empty while the decoding so far does not
        extend it, and, unless ``final``, without a trailing incomplete character (U+FFFD)."""
        full = self._decode(tokens)
        ready = full if final else full.rstrip("\ufffd")
        return ready[len(text):] if ready.startswith(text) else ""
