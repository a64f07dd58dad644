"""Which training texts contain an eval prompt, whole or in part (a passage, an article).

``registry.eval_texts`` catches a training prompt equal to an eval prompt; prompts *built* from
passages (summaries, passage QA, retrieved context) can hold an eval prompt's body inside a longer
text. ``EvalGuard`` also rejects a text that shares any ``SHINGLE``-word window (whitespace
normalised, lower case) with an eval prompt, or that contains a whole eval prompt shorter than
that window.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from specdec.data.registry import eval_files, file_turns, norm_text

SHINGLE = 12  # words: long enough that ordinary phrases never match, short enough for a sentence


def _words(text: str) -> list[str]:
    return norm_text(text).lower().split()


def shingles(text: str, size: int = SHINGLE) -> set[int]:
    """Hashes of every ``size``-word window of ``text`` (normalised)."""
    w = _words(text)
    return {hash(" ".join(w[i : i + size])) for i in range(len(w) - size + 1)}


class EvalGuard:
    """Eval prompts ``texts`` as exact keys, word windows and short whole prompts."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.exact: set[str] = set()
        self.windows: set[int] = set()
        self.short: list[str] = []
        for t in texts:
            self.exact.add(norm_text(t))
            win = shingles(t)
            self.windows |= win
            if not win and len(_words(t)) >= 3:
                self.short.append(" ".join(_words(t)))

    @classmethod
    def from_source(cls, source_dir: str | Path, conf: str | Path | None = None) -> EvalGuard:
        """Every registered eval file under ``source_dir`` (those it lacks are skipped)."""
        src = Path(source_dir)
        return cls(
            t for rel in eval_files(conf) if (src / rel).exists() for t in file_turns(src / rel)
        )

    def leaks(self, text: str) -> bool:
        """Whether ``text`` is, or contains, an eval prompt or a ``SHINGLE``-word part of one."""
        if norm_text(text) in self.exact or not self.windows.isdisjoint(shingles(text)):
            return True
        low = " " + " ".join(_words(text)) + " "
        return any(f" {s} " in low for s in self.short)
