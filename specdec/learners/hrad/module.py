"""Lightning training of the H-RAD classifier (``+experiment=hrad_*``, stage=fit).

SpecBranch (Shen et al., ICLR 2026, H-RAD): an MLP on ``z_t`` predicts the class of the next draft's
accepted length (0 / 1..γ_max−1 / γ_max). Class 1 dominates on a well-aligned pair and class 0 on
a poor one, so the loss is **class-weighted cross-entropy** with the "balanced" weights of the
training split: ``w_c = N / (C · n_c)`` (N rows, C = 3 classes, n_c rows of class c; a class
absent from the training split gets weight 0, as it has no rows to weigh). Then every class
carries the same total weight, and the loss's optimum is the balanced-accuracy one.

Metrics per stage (slash names): ``loss`` (weighted CE), ``ce`` (unweighted), ``acc``,
``recall_0..2`` (per-class recall), ``balanced_acc`` (mean recall over the classes present) and
the confusion matrix (rows: true class, columns: predicted), written at every validation to
``<trainer root>/confusion/val_step<step>.json`` (``test.json`` for the test) and logged as a
table when the logger has ``log_table`` (W&B). Experiments monitor ``val/balanced_acc`` (max).
"""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import torch
import torchmetrics
from torch.utils.data import DataLoader, TensorDataset

from specdec.data.hrad_store import SPLITS, load_hrad_data
from specdec.errors import BadInput
from specdec.learners.install import export_folder
from specdec.learners.loaders import SplitLoaders
from specdec.models import ModelPair
from specdec.nets.hrad.head import CLASSES, HradHead, save_hrad


def class_weights(counts: torch.Tensor) -> torch.Tensor:
    """Balanced weights ``N / (C · n_c)`` of class counts ``[C]`` (0 for an absent class)."""
    counts = counts.double()
    weights = counts.sum() / (len(counts) * counts.clamp_min(1))  # [C]
    return torch.where(counts > 0, weights, torch.zeros_like(weights)).float()


def recalls(confusion: torch.Tensor) -> tuple[list[float | None], float]:
    """Per-class recall (``None`` for a class with no rows) and their mean over present classes,
    from a confusion matrix ``[C, C]`` (rows: true, columns: predicted)."""
    support = confusion.sum(1)  # [C]
    per = [
        float(confusion[c, c] / support[c]) if support[c] > 0 else None for c in range(len(support))
    ]
    present = [r for r in per if r is not None]
    return per, sum(present) / max(len(present), 1)


class HradLearner(L.LightningModule):
    """Trains an ``HradHead`` on cached features (no model forward during training).

    Args:
        model: the pair whose target the features come from (``${model}``): sets D = (K + 1)·H
            and the target recorded in the export.
        layers: K (must match the data's).
        hidden, dropout: the MLP (``head.HradHead``).
        lr, weight_decay: AdamW; cosine decay over the run when ``cosine``.
    """

    def __init__(
        self,
        model: ModelPair,
        *,
        layers: int = 4,
        hidden: tuple[int, ...] = (256, 64),
        dropout: float = 0.2,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        cosine: bool = True,
    ) -> None:
        super().__init__()
        hidden = [int(w) for w in hidden]
        self.save_hyperparameters(
            {  # plain types: checkpoints load with weights_only=True
                "layers": int(layers),
                "hidden": hidden,
                "dropout": float(dropout),
                "lr": float(lr),
                "weight_decay": float(weight_decay),
                "cosine": bool(cosine),
            }
        )
        cfg = model.target.config
        self.target_dims = {
            "target_hidden_size": int(cfg.hidden_size),
            "target_num_layers": int(cfg.num_hidden_layers),
            "target_vocab_size": int(model.target.get_output_embeddings().weight.shape[0]),
        }
        self.head = HradHead((layers + 1) * int(cfg.hidden_size), hidden, dropout)
        self.register_buffer("class_weights", torch.ones(len(CLASSES)))  # [3]
        self.metrics = torch.nn.ModuleDict(
            {
                stage: torch.nn.ModuleDict(
                    {
                        "ce": torchmetrics.MeanMetric(),
                        "confusion": torchmetrics.classification.MulticlassConfusionMatrix(
                            len(CLASSES)
                        ),
                    }
                )
                for stage in ("train_", "val_", "test_")
            }
        )

    def setup(self, stage: str) -> None:
        """Class weights and input standardisation from the training split (fit only; a tested
        checkpoint brings its own)."""
        dm = getattr(self.trainer, "datamodule", None)
        if stage == "fit" and dm is not None:
            if dm.meta.get("layers") != self.hparams.layers:
                raise BadInput(
                    f"the data at {dm.path} has K={dm.meta.get('layers')} target "
                    f"layers but learner.layers={self.hparams.layers}; make them "
                    "equal"
                )
            self.class_weights.copy_(class_weights(dm.class_counts()))
            self.head.set_standardisation(*dm.feature_stats())

    def model_step(self, batch: tuple[torch.Tensor, torch.Tensor], stage: str) -> torch.Tensor:
        features, labels = batch  # [B, D], [B]
        logits = self.head(features)  # [B, 3]
        loss = torch.nn.functional.cross_entropy(logits.float(), labels, weight=self.class_weights)
        m = self.metrics[stage]
        m["ce"].update(
            torch.nn.functional.cross_entropy(logits.float().detach(), labels, reduction="none")
        )
        m["confusion"].update(logits.detach().argmax(-1), labels)
        self.log(
            f"{stage.rstrip('_')}/loss", loss, prog_bar=True, batch_size=len(labels), sync_dist=True
        )
        return loss

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        return self.model_step(batch, "train_")

    def validation_step(self, batch, batch_idx: int) -> None:
        self.model_step(batch, "val_")

    def test_step(self, batch, batch_idx: int) -> None:
        self.model_step(batch, "test_")

    def _epoch_end(self, stage: str, file_name: str | None) -> None:
        # 1. Scalars from the stage's confusion matrix, 2. the matrix to a file (and a table).
        m, name = self.metrics[stage], stage.rstrip("_")
        confusion = m["confusion"].compute().cpu()  # [3, 3] rows: true, columns: predicted
        per, balanced = recalls(confusion)
        values = {
            f"{name}/ce": m["ce"].compute(),
            f"{name}/balanced_acc": balanced,
            f"{name}/acc": float(confusion.diag().sum() / confusion.sum().clamp_min(1)),
        }
        values.update({f"{name}/recall_{c}": r for c, r in enumerate(per) if r is not None})
        # torchmetrics already reduced the counts over ranks (equal values everywhere); the
        # sync_dist mean keeps them equal and tells Lightning so
        self.log_dict(
            {
                k: torch.as_tensor(v, dtype=torch.float32, device=self.device)
                for k, v in values.items()
            },
            sync_dist=True,
        )
        writer = not self.trainer.sanity_checking and self.trainer.is_global_zero  # one writer
        if file_name is not None and writer:
            self.write_confusion(confusion, name, file_name)
        m["ce"].reset()
        m["confusion"].reset()

    def write_confusion(self, confusion: torch.Tensor, name: str, file_name: str) -> Path:
        """``<trainer root>/confusion/<file_name>`` and, with a W&B-like logger, a table."""
        folder = Path(self.trainer.default_root_dir) / "confusion"
        folder.mkdir(parents=True, exist_ok=True)
        rows = confusion.long().tolist()
        out = folder / file_name
        where = (
            {"step": int(self.global_step), "epoch": int(self.current_epoch)}
            if name == "val"
            else {}
        )  # a test runs on the best checkpoint, not the last step
        out.write_text(
            json.dumps({"classes": list(CLASSES), "rows_true_cols_pred": rows, **where}, indent=2)
        )
        for logger in self.trainer.loggers:
            if hasattr(logger, "log_table"):
                logger.log_table(
                    key=f"{name}/confusion",
                    columns=["true", *CLASSES],
                    data=[[CLASSES[i], *r] for i, r in enumerate(rows)],
                )
        return out

    def on_train_epoch_end(self) -> None:
        self._epoch_end("train_", None)

    def on_validation_epoch_end(self) -> None:
        self._epoch_end("val_", f"val_step{self.global_step:06d}.json")

    def on_test_epoch_end(self) -> None:
        self._epoch_end("test_", "test.json")

    def configure_optimizers(self):
        opt = torch.optim.AdamW(
            self.head.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay
        )
        if not self.hparams.cosine:
            return opt
        steps = max(1, int(self.trainer.estimated_stepping_batches))
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class HradDataModule(SplitLoaders, L.LightningDataModule):
    """The cached features and classes of ``data.hrad``, split by prompt there."""

    def __init__(self, path: str, batch_size: int = 32, num_workers: int = 0) -> None:
        super().__init__()
        self.path, self.batch_size, self.num_workers = path, batch_size, num_workers
        self.splits: dict[str, TensorDataset] = {}
        self.meta: dict = {}

    def setup(self, stage: str | None = None) -> None:
        rows, self.meta = load_hrad_data(self.path)
        for code, name in enumerate(SPLITS):
            keep = rows["split"] == code
            self.splits[name] = TensorDataset(rows["features"][keep], rows["labels"][keep])
        empty = [name for name in SPLITS if len(self.splits[name]) == 0]
        if empty:
            raise BadInput(
                f"split(s) {empty} of {self.path} have no rows; write more prompts "
                "(data_gen.limit / synthetic.count) or raise data_gen.val_fraction "
                "and data_gen.test_fraction"
            )

    def class_counts(self) -> torch.Tensor:
        """``[3]`` rows per class in the training split."""
        return torch.bincount(self.splits["train"].tensors[1], minlength=len(CLASSES))

    def feature_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and standard deviation ``[D]`` of the training split's features."""
        x = self.splits["train"].tensors[0].double()  # [N, D]
        return x.mean(0).float(), x.std(0, unbiased=False).float()

    def _loader(self, name: str, shuffle: bool) -> DataLoader:
        return DataLoader(
            self.splits[name],
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
        )


def export_hrad(
    learner: HradLearner,
    out_dir: Path,
    *,
    folder: str | None = None,
    install: bool = False,
    asset: str | None = None,
    force: bool = False,
    **meta: object,
) -> Path:
    """Write the trained head for serving (``head.load_hrad``) to ``<out_dir>/export`` or where
    ``folder`` / ``install`` say (``learners/install.py``: never over existing files without
    ``force``), with the target it reads, K, the class weights and ``meta`` (experiment,
    gamma_max, ...)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    meta = {
        k: OmegaConf.to_container(v, resolve=True) if isinstance(v, DictConfig | ListConfig) else v
        for k, v in meta.items()
    }
    target = export_folder(out_dir, folder=folder, install=install, asset=asset, force=force)
    return save_hrad(
        learner.head,
        target,
        **learner.target_dims,
        layers=learner.hparams.layers,
        class_weights=learner.class_weights.tolist(),
        **meta,
    )
