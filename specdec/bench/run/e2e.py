"""End-to-end time beside decode-only time: the prefill split of a record and a run's e2e metrics.

Decode-only speed (``tokens_per_s`` = new tokens / ``wall_s``, the loop after prefill) is what a
drafter changes step by step; end-to-end speed is what a user waits for: Spec-Bench times the
whole generation call per turn, prefill included (``total_s`` of a record, between the two
syncs). On long prompts (RAG, summarization) the two can rank methods differently, because a
drafter that reads the target's features must also catch up on the whole prompt.

Per record (``prefill_split``): ``prefill_target_s``, the target's prompt forwards (its forward
log's prefill entries, step ``-1``), and ``prefill_draft_s``, the rest of ``prefill_s``: the
drafter's catch-up on the prompt and its bookkeeping (0 for a drafter without a model).

Per dataset and overall (``end_to_end``): the sums of both, ``total_s`` (Σ prefill + decode),
and ``e2e_tokens_per_s`` = new tokens / ``total_s``. Records from before these fields give only
the keys every record has.
"""

from __future__ import annotations

from collections.abc import Sequence

from specdec.forwards import ForwardRecord

PREFILL_KEYS = ("prefill_target_s", "prefill_draft_s")
E2E_KEYS = (*PREFILL_KEYS, "total_s", "e2e_tokens_per_s")


def prefill_split(target_log: Sequence[ForwardRecord], prefill_s: float) -> dict[str, float]:
    """``prefill_target_s`` (the prefill entries of the target's forward log of one prompt's
    generations) and ``prefill_draft_s`` (``prefill_s`` less that, at least 0)."""
    target = sum(f.seconds for f in target_log if f.step < 0)
    return {"prefill_target_s": target, "prefill_draft_s": max(0.0, prefill_s - target)}


def end_to_end(records: Sequence[dict]) -> dict[str, float]:
    """Sums of the prefill split and of ``total_s`` over ``records``, with ``e2e_tokens_per_s``
    (keys absent where a record lacks their field; NaN speed for zero seconds)."""
    if not records:
        return {}
    out = {
        k: float(sum(r[k] for r in records))
        for k in (*PREFILL_KEYS, "total_s")
        if all(k in r for r in records)
    }
    if "total_s" in out:
        new = sum(int(r.get("new_tokens", 0)) for r in records)
        out["e2e_tokens_per_s"] = new / out["total_s"] if out["total_s"] else float("nan")
    return out
