"""Reading and writing an eval run's JSON-lines files in tests: records, prompt files.

``without_times`` drops what a clock measured from a record, so records of two runs of one
config (one process against ranks, a run against its resumed rerun) compare equal.
"""

from __future__ import annotations

import json
from pathlib import Path

#: the record keys a clock measured (everything else is a function of the prompt and config)
TIME_KEYS = (
    "prefill_s",
    "prefill_target_s",
    "prefill_draft_s",
    "decode_s",
    "draft_s",
    "wall_s",
    "total_s",
    "turn_s",
    "tokens_per_s",
)


def read_jsonl(path: Path) -> list[dict]:
    """Every line of a JSON-lines file, parsed."""
    return [json.loads(x) for x in path.read_text().splitlines()]


def run_records(out_dir: Path, name: str = "tiny") -> list[dict]:
    """The records of dataset ``name`` in the run directory ``out_dir``."""
    return read_jsonl(out_dir / "records" / f"{name}.jsonl")


def without_times(rec: dict) -> dict:
    """A record less what a clock measured (the rest is a function of the prompt and config)."""
    out = {k: v for k, v in rec.items() if k not in TIME_KEYS}
    out["forward_log"] = {k: v for k, v in rec["forward_log"].items() if k != "us"}
    return out


def write_alpaca_prompts(data_dir: Path, n: int) -> list[str]:
    """Write ``n`` one-turn prompts as ``<data_dir>/alpaca/test.jsonl``; return their ids."""
    rows = [
        {
            "id": f"p{i}",
            "category": "c",
            "turns": [f"Question number {i}?"],
            "reference": None,
            "meta": {},
        }
        for i in range(n)
    ]
    (data_dir / "alpaca").mkdir(parents=True)
    (data_dir / "alpaca" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [r["id"] for r in rows]
