"""Lightning training of the SpecDec++ acceptance head (``+experiment=specdecpp_*``, stage=fit).

SpecDec++ §4.4 (Huang, Guo & Wang, arXiv:2405.19715; public code
github.com/Kaffaljidhmah2/SpecDec_pp). Each row holds a target response
``X``, a draft token ``y_t`` per position and its label ``a_t = min(1, p/q)``
(``data``). **Token mixing** (ratio r): every epoch each response position keeps the
target token ``x_t`` with probability r, else takes ``y_t``; the frozen draft reads the mixed
sequence ``Z`` and the head reads the draft's last hidden state at the position of ``z_t`` (after
consuming it) to predict ``a_t``. Loss only where ``z_t`` holds a draft token. **Weighted BCE**
with mismatch weight w on the soft labels:
``L = Σ [w (1−a) (−log(1−p̂)) + a (−log p̂)] / Σ [w (1−a) + a]``.

Metrics (torchmetrics, per stage, slash names): ``bce`` and ``kl`` (unweighted BCE and binary
KL(a‖p̂) per labelled token), ``auroc`` (labels binarised at 0.5), ``ece`` (soft-label expected
calibration error, 10 bins).
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
import torchmetrics
from torch.utils.data import DataLoader

from specdec.errors import MissingInput
from specdec.learners.install import export_folder
from specdec.learners.loaders import SplitLoaders
from specdec.models import ModelPair
from specdec.nets.specdecpp.head import AcceptanceHead, save_head


class SoftCalibrationError(torchmetrics.Metric):
    """Expected calibration error against soft labels: Σ_b (n_b/N) |mean p̂_b − mean a_b|."""

    def __init__(self, bins: int = 10) -> None:
        super().__init__()
        self.bins = bins
        for name in ("count", "pred", "label"):
            self.add_state(name, torch.zeros(bins, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, labels: torch.Tensor) -> None:
        b = (preds.detach() * self.bins).long().clamp(0, self.bins - 1)
        self.count += torch.bincount(b, minlength=self.bins).double()
        self.pred += torch.bincount(b, preds.detach().double(), minlength=self.bins)
        self.label += torch.bincount(b, labels.double(), minlength=self.bins)

    def compute(self) -> torch.Tensor:
        gap = (self.pred - self.label).abs()  # per bin: n_b |mean p̂_b − mean a_b|
        return gap.sum() / self.count.sum().clamp_min(1)


def mixing_mask(
    rows: torch.Tensor, length: int, *, ratio: float, seed: int, epoch: int
) -> torch.Tensor:
    """``[B, length]`` bool, True where the target token is kept; one generator per (row, epoch)."""
    out = torch.empty(len(rows), length, dtype=torch.bool)
    for i, row in enumerate(rows.tolist()):
        gen = torch.Generator().manual_seed((seed * 1_000_003 + epoch) * 1_000_033 + row)
        out[i] = torch.rand(length, generator=gen) < ratio
    return out


def mix(batch: dict, *, ratio: float, seed: int, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token mixing: ``ids [B, T]`` (prompt, then x_t or y_t) and ``loss_mask [B, T]``, True
    exactly on response positions that hold the draft token."""
    keep = (
        mixing_mask(
            batch["row"], batch["target_ids"].shape[1], ratio=ratio, seed=seed, epoch=epoch
        ).to(batch["response"].device)
        & batch["response"]
    )  # [B, T]
    ids = torch.where(keep, batch["target_ids"], batch["draft_ids"])  # [B, T]
    return ids, batch["response"] & ~keep


def weighted_bce(logits: torch.Tensor, labels: torch.Tensor, weight: float) -> torch.Tensor:
    """SpecDec++'s weighted soft-label BCE over 2-way ``logits [N, 2]`` and labels ``[N]``."""
    logp = logits.float().log_softmax(-1)  # [N, 2]
    w_reject, w_accept = weight * (1 - labels), labels
    num = -(w_reject * logp[:, 0] + w_accept * logp[:, 1]).sum()
    return num / (w_reject + w_accept).sum().clamp_min(1e-12)


class AcceptanceLearner(L.LightningModule):
    """Trains an ``AcceptanceHead`` on a frozen draft (the draft is not saved in checkpoints).

    Args:
        model: the pair whose draft the head sits on (``${model}``).
        depth, tie: head architecture (``heads.AcceptanceHead``).
        mixing_ratio: r, share of response positions that keep the target token.
        mismatch_weight: w, weight of the rejection term.
        lr, weight_decay: AdamW settings; cosine decay over the run when ``cosine``.
        seed: seeds the per-epoch mixing masks.
    """

    def __init__(
        self,
        model: ModelPair,
        *,
        depth: int = 3,
        tie: bool = False,
        mixing_ratio: float = 0.15,
        mismatch_weight: float = 6.0,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        cosine: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if model.draft is None:
            raise ValueError("the acceptance head needs a draft model: pick a pair with a draft")
        if not 0.0 <= mixing_ratio < 1.0 or mismatch_weight <= 0:
            raise ValueError("need 0 <= mixing_ratio < 1 and mismatch_weight > 0")
        self.save_hyperparameters(ignore=["model"])
        self._draft = [model.draft.eval().requires_grad_(False)]  # a list: not a submodule
        self.head = AcceptanceHead(model.draft.config.hidden_size, depth, tie=tie)
        self.metrics = torch.nn.ModuleDict(
            {
                stage: torch.nn.ModuleDict(
                    {
                        "bce": torchmetrics.MeanMetric(),
                        "kl": torchmetrics.MeanMetric(),
                        "auroc": torchmetrics.classification.BinaryAUROC(),
                        "ece": SoftCalibrationError(),
                    }
                )
                for stage in ("train_", "val_", "test_")
            }
        )

    def draft_hidden(self, ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """``[B, T, H]`` last-layer draft hidden states (no grad)."""
        draft = self._draft[0]
        if next(draft.parameters()).device != self.device:
            draft.to(self.device)
        with torch.no_grad():
            out = draft(input_ids=ids, attention_mask=attention, output_hidden_states=True)
        return out.hidden_states[-1]

    def model_step(self, batch: dict, stage: str) -> torch.Tensor:
        # 1. Mix target and draft tokens on response positions (fixed masks outside training).
        epoch = self.current_epoch if stage == "train_" else 0
        ids, loss_mask = mix(
            batch, ratio=self.hparams.mixing_ratio, seed=self.hparams.seed, epoch=epoch
        )  # [B, T], [B, T]
        # 2. Head on the draft state at each labelled position (a draft token, not a target one).
        hidden = self.draft_hidden(ids, batch["attention"])[loss_mask]  # [N, H]
        labels = batch["labels"][loss_mask].float()  # [N]
        logits = self.head(hidden.float())  # [N, 2]
        loss = weighted_bce(logits, labels, self.hparams.mismatch_weight)
        # 3. Metrics.
        pred = logits.float().softmax(-1)[:, 1].clamp(1e-6, 1 - 1e-6)
        bce = -(labels * pred.log() + (1 - labels) * (1 - pred).log())
        a = labels.clamp(1e-12, 1 - 1e-12)
        kl = a * (a / pred).log() + (1 - a) * ((1 - a) / (1 - pred)).log()
        m = self.metrics[stage]
        m["bce"].update(bce.detach())
        m["kl"].update(kl.detach())
        m["auroc"].update(pred.detach(), (labels >= 0.5).long())
        m["ece"].update(pred.detach(), labels)
        name = stage.rstrip("_")
        self.log(
            f"{name}/loss", loss, prog_bar=True, batch_size=int(loss_mask.sum()), sync_dist=True
        )
        for key in ("bce", "kl", "auroc", "ece"):
            self.log(f"{name}/{key}", m[key], on_epoch=True, on_step=False)
        return loss

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        return self.model_step(batch, "train_")

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self.model_step(batch, "val_")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self.model_step(batch, "test_")

    def configure_optimizers(self):
        opt = torch.optim.AdamW(
            self.head.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )
        if not self.hparams.cosine:
            return opt
        steps = max(1, int(self.trainer.estimated_stepping_batches))
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def collate(rows: list[dict], pad_id: int = 0) -> dict:
    """Right-padded batch: ``target_ids``/``draft_ids`` = prompt + X / prompt + Y ``[B, T]``,
    ``labels`` and ``response`` (bool) on response positions, ``attention``, ``row`` ids."""
    lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows]
    shape = (len(rows), max(lengths))
    out = {
        "target_ids": torch.full(shape, pad_id),
        "draft_ids": torch.full(shape, pad_id),
        "labels": torch.zeros(shape),
        "response": torch.zeros(shape, dtype=torch.bool),
        "attention": torch.zeros(shape, dtype=torch.long),
        "row": torch.tensor([r["row"] for r in rows]),
    }
    for i, r in enumerate(rows):
        p, n = len(r["prompt_ids"]), len(r["response_ids"])
        out["target_ids"][i, : p + n] = torch.tensor(r["prompt_ids"] + r["response_ids"])
        out["draft_ids"][i, : p + n] = torch.tensor(r["prompt_ids"] + r["draft_ids"])
        out["labels"][i, p : p + n] = torch.tensor(r["labels"])
        out["response"][i, p : p + n] = True
        out["attention"][i, : p + n] = 1
    return out


class AcceptanceDataModule(SplitLoaders, L.LightningDataModule):
    """Loads the ``DatasetDict`` written by ``acceptance.data`` (already split by prompt id)."""

    def __init__(self, path: str, batch_size: int = 8, num_workers: int = 0) -> None:
        super().__init__()
        self.path, self.batch_size, self.num_workers = path, batch_size, num_workers
        self.splits: dict = {}

    def setup(self, stage: str | None = None) -> None:
        from datasets import load_from_disk

        if not (Path(self.path) / "dataset_dict.json").exists():
            raise MissingInput(
                f"no acceptance data at {self.path}; run this experiment with stage=data first"
            )
        ds = load_from_disk(self.path)
        offset = 0
        for name in ("train", "validation", "test"):
            split = ds[name]
            self.splits[name] = split.add_column("row", list(range(offset, offset + len(split))))
            offset += len(split)

    def _loader(self, name: str, shuffle: bool) -> DataLoader:
        return DataLoader(
            self.splits[name],
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            collate_fn=collate,
        )


def export_head(
    learner: AcceptanceLearner,
    out_dir: Path,
    *,
    folder: str | None = None,
    install: bool = False,
    asset: str | None = None,
    force: bool = False,
    **meta: object,
) -> Path:
    """Write the trained head for eval (``heads.load_head``) to ``<out_dir>/export`` or where
    ``folder`` / ``install`` say (``learners/install.py``: never over existing files without
    ``force``)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    meta = {
        k: OmegaConf.to_container(v, resolve=True) if isinstance(v, DictConfig | ListConfig) else v
        for k, v in meta.items()
    }
    target = export_folder(out_dir, folder=folder, install=install, asset=asset, force=force)
    return save_head(learner.head, target, **meta)
