"""Where training prompts come from, and which texts they must never include.

``training_prompts``: user turns of the training splits (GSM8K train, Alpaca train files) minus
every eval prompt (``eval_texts``: the benchmark files of ``EVAL_FILES``, compared after
whitespace normalisation, ``norm_text``), interleaved by a stable hash (``hash_text``) so a
``limit`` keeps both sets. ``reference_texts``: the reference answers of those splits (token
counts for the reduced draft vocabulary).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from specdec.errors import MissingInput

EVAL_FILES = ["gsm8k/eagle_question.jsonl", "gsm8k/test.jsonl", "alpaca/eagle_question.jsonl",
              "humaneval/eagle_question.jsonl", "humaneval/HumanEval.jsonl.gz",
              "mt_bench/question.jsonl", "spec_bench/question.jsonl",
              "cnn_dailymail/nano_pearl_CNNDM.jsonl"]


def norm_text(text: str) -> str:
    """Whitespace-normalised text (the key eval-prompt exclusion compares)."""
    return " ".join(text.split())


def eval_texts(source_dir: Path) -> set[str]:
    """Every eval prompt text (normalised) that training prompts must not contain."""
    out: set[str] = set()
    for name in EVAL_FILES:
        path = source_dir / name
        if not path.exists():
            continue
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else \
            path.read_text()
        for line in text.splitlines():
            if line.strip():
                row = json.loads(line)
                for turn in row.get("turns") or [row.get("question") or row.get("prompt", "")]:
                    out.add(norm_text(turn))
    return out


def training_prompts(source_dir: str | Path, datasets: Sequence[str] = ("gsm8k", "alpaca"),
                     limit: int | None = None) -> list[str]:
    """User turns from the training splits only (GSM8K train, Alpaca train files).

    Raises:
        FileNotFoundError: naming the folder and the setting to change.
    """
    src = Path(source_dir)
    if not (src / "gsm8k" / "train.jsonl").exists():
        raise MissingInput(f"training prompts not found under {src}; set train_data_dir "
                                "(env SPECDEC_SHARED_DATA) to a folder laid out like shared/data")
    banned = eval_texts(src)
    prompts: list[str] = []
    per_set: dict[str, list[str]] = {"gsm8k": [], "alpaca": []}
    for line in (src / "gsm8k" / "train.jsonl").read_text().splitlines():
        if line.strip():
            per_set["gsm8k"].append(json.loads(line)["question"])
    for path in sorted((src / "alpaca").glob("*.json")):
        for row in json.loads(path.read_text()):
            extra = f"\n{row['input']}" if row.get("input") else ""
            per_set["alpaca"].append(row["instruction"] + extra)
    for name in datasets:
        if name not in per_set:
            raise ValueError(f"unknown training set {name!r}; choose from {sorted(per_set)}")
        seen: set[str] = set()
        for text in per_set[name]:
            key = norm_text(text)
            if key and key not in banned and key not in seen:
                seen.add(key)
                prompts.append(text)
    # interleave deterministically so a `limit` keeps both sets
    prompts.sort(key=lambda t: hash_text(t))
    return prompts[:limit] if limit else prompts


def hash_text(text: str) -> int:
    """A stable (process-independent) hash of a string."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def reference_texts(source_dir: str | Path) -> list[str]:
    """Reference answers of the training prompts (GSM8K train answers, Alpaca outputs)."""
    src = Path(source_dir)
    out = [json.loads(line)["answer"] for line in
           (src / "gsm8k" / "train.jsonl").read_text().splitlines() if line.strip()]
    for path in sorted((src / "alpaca").glob("*.json")):
        out += [row["output"] for row in json.loads(path.read_text())]
    return out
