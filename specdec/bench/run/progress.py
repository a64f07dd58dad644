"""The progress bar of one dataset of an eval run (``progress=true``): prompts done, with the
running tokens/s and τ (block efficiency: new tokens / target forwards, the name the tables use)."""

from __future__ import annotations

from typing import Any


def progress_bar(
    name: str, total: int, done: int, enabled: bool, rank_tag: str | None = None
) -> Any:
    """A tqdm bar over ``total`` prompts, ``done`` of them already recorded; ``rank_tag`` names
    the rank in a data-parallel run."""
    from tqdm.auto import tqdm

    desc = f"{name} ({rank_tag})" if rank_tag else name
    return tqdm(
        total=total, initial=done, desc=desc, unit="prompt", disable=not enabled, dynamic_ncols=True
    )


def running(records: list[dict]) -> dict[str, str]:
    """The bar's running metrics over ``records``: ``tok/s`` and ``τ``."""
    new = sum(r["new_tokens"] for r in records)
    secs, steps = sum(r["decode_s"] for r in records), sum(r["target_forwards"] for r in records)
    return {
        "tok/s": f"{new / secs:.1f}" if secs else "-",
        "τ": f"{new / steps:.2f}" if steps else "-",
    }
