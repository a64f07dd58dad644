"""A small training-prompts folder laid out like ``shared/data``, for tests of the data stages.

``source_folder(root, n)`` writes ``n`` GSM8K-train rows and ``n`` Alpaca-train rows (the two
training splits the registry's default ``datasets`` read) and returns ``root``.
"""

from __future__ import annotations

import json
from pathlib import Path


def source_folder(root: Path, n: int = 10) -> Path:
    """GSM8K train (``gsm8k/train.jsonl``) + one Alpaca train file (``alpaca/train.json``)."""
    (root / "gsm8k").mkdir(parents=True)
    (root / "alpaca").mkdir()
    rows = [
        json.dumps({"question": f"what is {i} plus {i + 1}?", "answer": f"{2 * i + 1}"})
        for i in range(n)
    ]
    (root / "gsm8k" / "train.jsonl").write_text("\n".join(rows) + "\n")
    alpaca = [
        {"instruction": f"name a colour number {i}", "input": "", "output": "red"} for i in range(n)
    ]
    (root / "alpaca" / "train.json").write_text(json.dumps(alpaca))
    return root
