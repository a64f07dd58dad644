"""Training batches of draft distillation: stored target traces, truncated, split and padded.

A trace (``specdec.data.traces.Trace``) is ``prompt + continuation`` ids with the
target's top-k log-probabilities for each continuation token. ``TraceDataset`` truncates traces to
``max_len`` and holds out a stable share of prompts; ``collate_traces`` right-pads a batch and
marks the positions whose next token is a continuation token (where DistillSpec's divergence
``D(p || q)`` is taken).
"""

from __future__ import annotations

from pathlib import Path

import torch

from specdec.data.traces import Trace, load_traces
from specdec.data.training import hash_text


class TraceDataset(torch.utils.data.Dataset):
    """Traces truncated to ``max_len`` tokens."""

    def __init__(
        self, folder: str | Path | None, max_len: int, rows: list[Trace] | None = None
    ) -> None:
        self.rows = rows if rows is not None else load_traces(folder)
        self.max_len = max_len

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> Trace:
        tr = self.rows[i]
        n, plen = min(int(tr.ids.numel()), self.max_len), min(tr.prompt_len, self.max_len)
        return Trace(tr.ids[:n], plen, tr.topk_ids[: n - plen], tr.topk_logp[: n - plen])

    def split(self, val_fraction: float) -> tuple[TraceDataset, TraceDataset]:
        """Hold out a stable share of *prompts* (all passes of a prompt fall on the same side)."""

        def held(tr: Trace) -> bool:
            key = hash_text(",".join(map(str, tr.ids[: tr.prompt_len].tolist())))
            return (key % 10_000) < val_fraction * 10_000

        train = [r for r in self.rows if not held(r)]
        val = [r for r in self.rows if held(r)] or self.rows[:1]
        return TraceDataset(None, self.max_len, train), TraceDataset(None, self.max_len, val)


def collate_traces(batch: list[Trace]) -> dict[str, torch.Tensor]:
    """Right-pad to the longest row. ``loss_mask[b, t]`` marks positions whose *next* token is a
    continuation token (``prompt_len - 1 <= t < len - 1``); ``soft_ids``/``soft_logp`` ``[M, k]``
    are the target's top-k for those positions, in ``ids[loss_mask]`` (row-major) order."""
    width = max(int(tr.ids.numel()) for tr in batch)
    ids = torch.zeros(len(batch), width, dtype=torch.long)  # [B, T]
    mask = torch.zeros(len(batch), width, dtype=torch.bool)  # [B, T]
    soft_ids, soft_logp = [], []
    for r, tr in enumerate(batch):
        n, plen = int(tr.ids.numel()), tr.prompt_len
        assert plen >= 1, "a trace needs a non-empty prompt"
        ids[r, :n] = tr.ids
        mask[r, plen - 1 : n - 1] = True
        soft_ids.append(tr.topk_ids[: n - plen])  # [n - plen, k]
        soft_logp.append(tr.topk_logp[: n - plen])
    return {
        "ids": ids,
        "loss_mask": mask,
        "soft_ids": torch.cat(soft_ids),
        "soft_logp": torch.cat(soft_logp),
    }
