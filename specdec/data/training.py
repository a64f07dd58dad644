"""Where training prompts come from, and which texts they must never include.

``training_prompts``: user turns of the training splits of registered datasets (each dataset's
``source.train`` reader in ``conf/dataset/<name>.yaml``; GSM8K train and the Alpaca train files
by default) minus every eval prompt (``specdec.data.registry.eval_texts``: every registered
dataset's ``eval_files``, compared after whitespace normalisation, ``norm_text``), interleaved by
a stable hash (``hash_text``) so a ``limit`` keeps both sets. ``training_pairs``: the same
prompts with their reference answers; ``reference_texts``: the reference answers (token counts
for the reduced draft vocabulary).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from specdec.data.leakage import EvalGuard
from specdec.data.registry import eval_texts, norm_text
from specdec.data.sources import TrainRow, training_rows
from specdec.errors import MissingInput

__all__ = [
    "eval_texts",
    "hash_text",
    "norm_text",
    "reference_texts",
    "training_pairs",
    "training_prompts",
]
DEFAULT_SETS = ("gsm8k", "alpaca")  # registered datasets whose training splits are read by default
PASSAGE_WORDS = 150  # a prompt this long (an article) is also screened for eval passages inside it
HINT = "set train_data_dir (env SPECDEC_SHARED_DATA) to a folder laid out like shared/data"


class _Banned:
    """Eval prompts as exact keys; a prompt of ``PASSAGE_WORDS`` words or more is also refused
    when it holds any passage of one (``leakage.EvalGuard``: an article re-wrapped or extended)."""

    def __init__(self, source_dir: str | Path) -> None:
        self.exact, self.guard = eval_texts(source_dir), None
        self.source_dir = source_dir

    def __contains__(self, key: str) -> bool:
        if key in self.exact:
            return True
        if len(key.split()) < PASSAGE_WORDS:
            return False
        self.guard = self.guard or EvalGuard.from_source(self.source_dir)
        return self.guard.leaks(key)


def _rows(source_dir: str | Path, datasets: Sequence[str]) -> dict[str, list[TrainRow]]:
    """Each dataset's training rows; a missing folder or file names the setting to change."""
    try:
        return {name: training_rows(name, source_dir) for name in datasets}
    except MissingInput as e:
        raise MissingInput(f"training prompts not found under {source_dir} ({e}); {HINT}") from e


def training_prompts(
    source_dir: str | Path, datasets: Sequence[str] = DEFAULT_SETS, limit: int | None = None
) -> list[str]:
    """User turns from the training splits only, eval prompts excluded, in hash order.

    Raises:
        MissingInput: naming the folder and the setting to change.
        BadInput: an unknown dataset or one without a training split.
    """
    banned, per_set = _Banned(source_dir), _rows(source_dir, datasets)
    prompts: list[str] = []
    for name in datasets:
        seen: set[str] = set()  # duplicates within a set are dropped, across sets kept
        for row in per_set[name]:
            text = row.turn("\n")
            key = norm_text(text)
            if key and key not in banned and key not in seen:
                seen.add(key)
                prompts.append(text)
    # interleave deterministically so a `limit` keeps both sets
    prompts.sort(key=lambda t: hash_text(t))
    return prompts[:limit] if limit else prompts


def training_pairs(
    source_dir: str | Path, datasets: Sequence[str] = DEFAULT_SETS
) -> list[tuple[str, str]]:
    """``(prompt, reference answer)`` of the training splits, eval prompts excluded, hash order
    (a prompt met twice, in any set, is kept once)."""
    banned, per_set = _Banned(source_dir), _rows(source_dir, datasets)
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for name in datasets:
        for row in per_set[name]:
            prompt = row.turn("\n")
            key = norm_text(prompt)
            if key and key not in banned and key not in seen:
                seen.add(key)
                out.append((prompt, row.answer))
    out.sort(key=lambda pa: hash_text(pa[0]))
    return out


def hash_text(text: str) -> int:
    """A stable (process-independent) hash of a string."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def reference_texts(source_dir: str | Path, datasets: Sequence[str] = DEFAULT_SETS) -> list[str]:
    """Reference answers of the training splits (GSM8K train answers, Alpaca outputs)."""
    per_set = _rows(source_dir, datasets)
    return [row.answer for name in datasets for row in per_set[name] if row.answer is not None]


def split_of(prompt_id: str, val_fraction: float, test_fraction: float) -> str:
    """Deterministic split of a prompt id (a hash bucket), so a prompt never spans two splits."""
    u = int.from_bytes(hashlib.sha256(prompt_id.encode()).digest()[:8], "little") / 2**64
    if u < test_fraction:
        return "test"
    return "validation" if u < test_fraction + val_fraction else "train"
