"""Evaluation prompts: loading prepared question files and formatting them for the target tokenizer.

A prepared file (``scripts/prepare_data.py`` writes them under ``paths.data_dir``) is JSONL with
``id``, ``category``, ``turns`` (list of user turns; MT-bench items have two), ``reference`` (or
null) and ``meta`` (task data for quality checks: GSM8K ``answer``, HumanEval ``entry_point`` and
``test``). The Spec-Bench / EAGLE schema (``question_id`` instead of ``id``) is read too, so the
project's own fixture ``tests/fixtures/tiny_prompts.jsonl`` loads unchanged.

Files are loaded through ``datasets.load_dataset("json", ...)``. Formatting uses the tokenizer's
chat template when the dataset asks for it and the tokenizer has one, else the raw text; the chat
template is applied here and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from transformers import PreTrainedTokenizerBase

PREPARE_HINT = (
    "run `python scripts/prepare_data.py` to fill the data directory (paths.data_dir, env "
    "SPECDEC_DATA_DIR); see the README section on preparing data"
)


@dataclass(frozen=True)
class Prompt:
    """One evaluation prompt (multi-turn items keep every user turn)."""

    id: str
    dataset: str
    category: str
    turns: tuple[str, ...]
    reference: str | None = None
    meta: dict[str, str] = field(default_factory=dict, compare=False)


def load_prompts(
    path: str | Path,
    dataset: str,
    limit: int | None = None,
    *,
    cache_dir: str | Path | None = None,
) -> list[Prompt]:
    """Read a question file through ``datasets`` (first ``limit`` rows, file order).

    Raises:
        FileNotFoundError: naming the file and the script that prepares it.
        ValueError: on duplicate prompt ids (resume and paired comparisons key on them).
    """
    from datasets import load_dataset

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"prompt file {path} not found for dataset {dataset!r}; "
                                + PREPARE_HINT)
    rows = load_dataset("json", data_files=str(path), split="train",
                        cache_dir=str(cache_dir) if cache_dir else None)
    if limit is not None:
        rows = rows.select(range(min(int(limit), len(rows))))
    out = [_to_prompt(row, dataset) for row in rows]
    ids = [p.id for p in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path} has duplicate prompt ids; re-run scripts/prepare_data.py")
    return out


def load_jsonl_prompts(path: str | Path, dataset: str, limit: int | None = None) -> list[Prompt]:
    """Back-compatible name of :func:`load_prompts`."""
    return load_prompts(path, dataset, limit)


def _to_prompt(row: dict, dataset: str) -> Prompt:
    pid = row.get("id", row.get("question_id"))
    turns = row["turns"] if isinstance(row["turns"], list) else [row["turns"]]
    ref = row.get("reference")
    if isinstance(ref, list):
        ref = ref[0] if ref else None
    meta = {k: str(v) for k, v in (row.get("meta") or {}).items() if v is not None}
    return Prompt(str(pid), dataset, str(row.get("category") or dataset), tuple(turns),
                  ref, meta)


def prompt_ids_hash(ids: list[str]) -> str:
    """Fingerprint of an ordered list of prompt ids (the report compares runs on it)."""
    return hashlib.sha256(json.dumps(list(ids)).encode()).hexdigest()[:16]


def format_turn(turn: str, template: str) -> str:
    """Put a user turn into the dataset's template (``{turn}`` marks where; no other braces)."""
    if "{turn}" not in template:
        raise ValueError(f"dataset template {template!r} must contain '{{turn}}'")
    return template.replace("{turn}", turn)


def encode_turn(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]], *, chat_template: bool
) -> list[int]:
    """Token ids of a conversation ending with a user turn, ready for the assistant's answer.

    Args:
        tokenizer: the target tokenizer.
        messages: ``[{"role": "user"|"assistant", "content": ...}, ...]``.
        chat_template: use the tokenizer's chat template if it has one; otherwise the conversation
            is encoded as plain text (turns joined by blank lines: a completion prompt).
    """
    if chat_template and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return tokenizer.encode(text, add_special_tokens=False)
    if len(messages) == 1:
        return tokenizer.encode(messages[0]["content"])
    return tokenizer.encode("\n\n".join(m["content"] for m in messages))
