"""The feature drafters' training batches: traces with the target's features, cached or online.

``Eagle3DataModule`` (EAGLE-3 and SpecBlock read it) batches the ``stage=data`` folder's traces.
``features=cache`` (the default) reads each trace's ``[n, k, H]`` fp16 features that the data
stage wrote; ``features=online`` reads the traces alone (a data stage run with
``data_gen.features=none`` writes no feature files) and the learner computes the features in its
training step (``data.online_features``): no multi-GB cache to write or carry, one frozen target
forward per step. A trace is held out for validation by a hash of its prompt (``held_out``).
"""

from __future__ import annotations

import hashlib

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from specdec.data.features import load_feature_traces
from specdec.data.traces import Trace
from specdec.errors import BadInput
from specdec.learners.loaders import SplitLoaders

FEATURES = ("cache", "online")  # datamodule.features


class FeatureTraces(Dataset):
    """(trace, features or None) rows truncated to ``max_len`` tokens."""

    def __init__(self, rows: list, max_len: int) -> None:
        self.rows, self.max_len = rows, max_len

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        tr, feats = self.rows[i]
        n = min(int(tr.ids.numel()), self.max_len)
        row = {
            "ids": tr.ids[:n],
            "plen": min(tr.prompt_len, n),
            "topk_ids": tr.topk_ids,
            "topk_logp": tr.topk_logp,
        }
        if feats is not None:
            row["feats"] = feats[:n]
        return row


def collate(batch: list[dict]) -> dict[str, torch.Tensor]:
    """Right-pad; ``lab_ids/lab_logp [B, T, k]`` hold the target's top-k for the token *at* each
    position (``-1`` where it is a prompt token or padding); ``length [B]``; ``feats [B, T, k, H]``
    when the rows carry cached features (online rows carry none)."""
    width = max(int(r["ids"].numel()) for r in batch)
    k = batch[0]["topk_ids"].shape[1]
    cached = "feats" in batch[0]
    ids = torch.zeros(len(batch), width, dtype=torch.long)  # [B, T]
    lab_ids = torch.full((len(batch), width, k), -1, dtype=torch.long)  # [B, T, k]
    lab_logp = torch.zeros(len(batch), width, k)  # [B, T, k]
    if cached:
        kf = batch[0]["feats"].shape[1:]
        feats = torch.zeros(len(batch), width, *kf, dtype=batch[0]["feats"].dtype)  # [B,T,k,H]
    for r, row in enumerate(batch):
        n, plen = int(row["ids"].numel()), row["plen"]
        ids[r, :n] = row["ids"]
        if cached:
            feats[r, :n] = row["feats"]
        lab_ids[r, plen:n], lab_logp[r, plen:n] = (
            row["topk_ids"][: n - plen],
            row["topk_logp"][: n - plen],
        )
    length = torch.tensor([int(r["ids"].numel()) for r in batch])
    out = {"ids": ids, "lab_ids": lab_ids, "lab_logp": lab_logp, "length": length}
    if cached:
        out["feats"] = feats
    return out


def held_out(trace: Trace, every: int) -> bool:
    """Whether ``trace`` is held out: 1 in ``every`` prompts by a stable hash (0: never)."""
    if not every:
        return False
    ids = trace.ids[: trace.prompt_len].to(torch.int64).numpy().tobytes()
    return int.from_bytes(hashlib.blake2b(ids, digest_size=8).digest(), "little") % every == 0


class Eagle3DataModule(SplitLoaders, L.LightningDataModule):
    """Batches of (trace, cached features) or, with ``features=online``, of traces alone; a
    stable share of traces held out for validation.

    A trace is held out by a hash of its prompt's token ids (``held_out``), not by its position:
    traces added later (new chunk files sort anywhere in the folder) leave every earlier trace on
    its side, and the passes of one prompt stay together.
    """

    def __init__(
        self,
        traces_dir: str,
        batch_size: int = 16,
        max_len: int = 320,
        val_fraction: float = 0.03,
        num_workers: int = 0,
        features: str = "cache",
    ) -> None:
        super().__init__()
        if features not in FEATURES:
            raise BadInput(
                f"datamodule.features={features!r} is unknown; use one of {list(FEATURES)}"
            )
        self.traces_dir, self.batch_size, self.max_len = traces_dir, batch_size, max_len
        self.val_fraction, self.num_workers = val_fraction, num_workers
        self.features = features

    def setup(self, stage: str | None = None) -> None:
        rows = load_feature_traces(self.traces_dir, features=self.features == "cache")
        every = max(2, round(1 / self.val_fraction)) if self.val_fraction > 0 else 0
        held = [held_out(tr, every) for tr, _ in rows]
        val = [r for r, h in zip(rows, held, strict=True) if h] or rows[:1]
        train = [r for r, h in zip(rows, held, strict=True) if not h] or rows
        self.train_set = FeatureTraces(train, self.max_len)
        self.val_set = FeatureTraces(val, self.max_len)

    test_split = "validation"  # the held-out traces serve validation and test

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        data = self.train_set if split == "train" else self.val_set
        return DataLoader(
            data,
            batch_size=self.batch_size,
            shuffle=shuffle,
            collate_fn=collate,
            num_workers=self.num_workers,
        )
