"""Evaluation prompts: loading question files and formatting them for the target tokenizer.

A question file is JSONL in the Spec-Bench / EAGLE schema: ``question_id``, ``category``, ``turns``
(list of user turns). Formatting uses the tokenizer's chat template when the dataset asks for it and
the tokenizer has one, else the raw text. The chat template is applied here and nowhere else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class Prompt:
    """One evaluation prompt (multi-turn items keep every user turn)."""

    id: str
    dataset: str
    category: str
    turns: tuple[str, ...]


def load_jsonl_prompts(path: str | Path, dataset: str, limit: int | None = None) -> list[Prompt]:
    """Read a question JSONL file.

    Raises:
        FileNotFoundError: naming the file and how to prepare the data.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"prompt file {path} not found; run `python scripts/prepare_data.py` to fill the data "
            "directory (paths.data_dir, env SPECDEC_DATA_DIR)"
        )
    out: list[Prompt] = []
    with path.open() as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            turns = row["turns"] if isinstance(row["turns"], list) else [row["turns"]]
            out.append(Prompt(str(row["question_id"]), dataset, str(row.get("category", dataset)),
                              tuple(turns)))
            if limit is not None and len(out) >= limit:
                break
    return out


def encode_turn(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]], *, chat_template: bool
) -> list[int]:
    """Token ids of a conversation ending with a user turn, ready for the assistant's answer.

    Args:
        tokenizer: the target tokenizer.
        messages: ``[{"role": "user"|"assistant", "content": ...}, ...]``.
        chat_template: use the tokenizer's chat template if it has one; otherwise the last user
            turn is encoded as plain text.
    """
    if chat_template and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return tokenizer.encode(text, add_special_tokens=False)
    return tokenizer.encode(messages[-1]["content"])
