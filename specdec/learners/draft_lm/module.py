"""Lightning wrappers to distill a reduced-vocabulary draft from its target (DistillSpec-style).

DistillSpec (Zhou et al. 2024) trains the draft ``q`` to match the target ``p`` on target-generated
sequences with a divergence ``D(p || q)``; we use the forward KL restricted to the draft's token map
(``-Σ_{v ∈ d2t} p(v) log q(v)``, whose minimiser is ``q ∝ p`` on the map) when the target runs
online as teacher (GPU) or from the stored top-k, plus a cross-entropy on the target's argmax
(exactly the event "greedy draft token accepted"). On CPU the teacher can
be switched off (``teacher: false``) and only the hard term is used.

Logged metrics: ``*/loss``, ``*/top1`` (draft argmax == trace token: greedy acceptance per token)
and, with a teacher, ``*/accept_t1`` = ``Σ min(p, q)`` (the expected T=1 acceptance per token).
The checkpoint holds the draft only (the target and the shared embeddings are not saved).
"""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_warn
from safetensors.torch import load_file
from torch.utils.data import DataLoader

from specdec.data.traces import DATA_COMMAND
from specdec.errors import MissingInput
from specdec.learners.draft_lm.trace_dataset import TraceDataset, collate_traces
from specdec.learners.install import export_folder
from specdec.learners.loaders import SplitLoaders
from specdec.learners.optim import adamw_warmup_cosine
from specdec.models.reduced_draft import (
    EMBED_KEY,
    init_from_target,
    load_draft,
    save_draft,
    tokenizer_sha256,
)


class DistillLearner(L.LightningModule):
    """Wraps a ``ReducedVocabDraft`` (plain ``nn.Module``) initialised from the target.

    Args:
        model: the ``ModelPair`` (its target is the teacher and the init source).
        traces_dir: folder written by ``stage=data`` (holds ``token_map.safetensors``).
        layers: target layers copied into the draft, in order (e.g. ``[0, 1]``).
        teacher: run the target online for the soft (KL) term.
        kl_weight: weight of the soft term (``1 - kl_weight`` on the hard term).
        lr, weight_decay, warmup_steps: AdamW with linear warm-up and cosine decay.
        total_steps: schedule length (``trainer.max_steps``).
        init_from: warm start from a draft in the shipped format (``config.json`` +
            ``model.safetensors``, e.g. ``specdec/assets/draft_lm/smollm2``); its depth and token
            map are kept (``layers`` and the traces' token map are then unused).
    """

    def __init__(
        self,
        model,
        traces_dir: str,
        layers: list[int],
        teacher: bool = True,
        kl_weight: float = 0.5,
        lr: float = 3e-4,
        weight_decay: float = 0.0,
        warmup_steps: int = 100,
        total_steps: int = 10_000,
        init_from: str | None = None,
    ) -> None:
        super().__init__()
        # plain types only, so checkpoints load with torch.load(weights_only=True)
        self.save_hyperparameters(
            {
                "traces_dir": str(traces_dir),
                "layers": [int(i) for i in layers],
                "teacher": bool(teacher),
                "kl_weight": float(kl_weight),
                "lr": float(lr),
                "weight_decay": float(weight_decay),
                "warmup_steps": int(warmup_steps),
                "total_steps": int(total_steps),
                "init_from": init_from and str(init_from),
            }
        )
        target = model.target.float()
        for p in target.parameters():
            p.requires_grad_(False)
        self._target = [target]  # a list: not a registered submodule (not trained, not saved)
        if init_from:
            self.net = load_draft(init_from, target, tokenizer=model.tokenizer).train()
            for name, p in self.net.named_parameters():
                p.requires_grad_("embed" not in name)
            tmap = self.net.token_map.long()
        else:
            path = Path(traces_dir) / "token_map.safetensors"
            if not path.exists():
                raise MissingInput(f"{path} is missing; create it with `{DATA_COMMAND}`")
            tmap = load_file(str(path))["token_map"].long()
            self.net = init_from_target(
                target, tmap, layers=list(layers), tokenizer_hash=tokenizer_sha256(model.tokenizer)
            )
        t2d = torch.full((target.config.vocab_size,), -1, dtype=torch.long)
        t2d[tmap] = torch.arange(tmap.numel())
        self.register_buffer("t2d", t2d, persistent=False)
        self.strict_loading = False  # checkpoints omit the shared embeddings

    # --- steps --------------------------------------------------------------------------------
    def _step(self, batch: dict[str, torch.Tensor], stage: str) -> torch.Tensor:
        ids, mask = batch["ids"], batch["loss_mask"]  # [B, T], [B, T] (positions predicting t+1)
        h = self.net.model(input_ids=ids).last_hidden_state  # [B, T, H]
        logits = self.net.lm_head(h[mask]).float()  # [M, V_d]
        logq = logits.log_softmax(-1)
        if "soft_ids" in batch:  # hard label: the target's argmax (the next token on greedy traces)
            nxt = batch["soft_ids"][:, 0]  # [M]
        else:
            nxt = torch.roll(ids, -1, dims=1)[mask]  # [M] the trace's next tokens
        idx = self.t2d[nxt]  # [M], -1 where the token is outside the map
        mapped = idx >= 0
        picked = logq.gather(-1, idx.clamp(min=0)[:, None])[:, 0]  # [M]
        hard = -(picked * mapped).sum() / mapped.sum().clamp(min=1)
        top1 = (logits.argmax(-1) == idx).float().mean()
        loss, kl_w = hard, float(self.hparams.kl_weight)
        if kl_w > 0:
            # soft labels: the online teacher's full p, else the traces' stored top-k of p
            if self.hparams.teacher:
                target = self._target[0]
                with torch.no_grad():
                    th = target.model(input_ids=ids).last_hidden_state[mask]  # [M, H]
                    p = target.lm_head(th).float().softmax(-1)[:, self.net.token_map]  # [M, V_d]
                q_at = logq
            else:
                k_idx = self.t2d[batch["soft_ids"]]  # [M, k]
                p = batch["soft_logp"].float().exp() * (k_idx >= 0)  # [M, k]
                q_at = logq.gather(-1, k_idx.clamp(min=0))  # [M, k]
            soft = -(p * q_at).sum(-1).mean()
            loss = kl_w * soft + (1 - kl_w) * hard
            accept = torch.minimum(p, q_at.exp()).sum(-1).mean()  # top-k: a lower bound
            self.log(f"{stage}/accept_t1", accept, prog_bar=stage != "train", sync_dist=True)
            self.log(f"{stage}/soft", soft, sync_dist=True)
        self.log(f"{stage}/loss", loss, prog_bar=True, sync_dist=True)
        self.log(f"{stage}/top1", top1, prog_bar=True, sync_dist=True)
        return loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._step(batch, "test")

    def on_fit_start(self) -> None:
        # the draft's net registers the shared embedding; the target itself runs (and is moved
        # to the device, whole, on every rank) only as the online teacher
        if self.hparams.teacher:
            if self.trainer.world_size > 1:
                rank_zero_warn(
                    f"learner.teacher=true with {self.trainer.world_size} processes: "
                    "each rank holds the whole frozen target on its device; "
                    "learner.teacher=false trains on the stored top-k instead"
                )
            self._target[0].to(self.device)
        self._start = time.monotonic()

    def on_validation_epoch_end(self) -> None:
        # wall-clock training time, for learning curves (acceptance vs time)
        self.log(
            "val/elapsed_s",
            time.monotonic() - getattr(self, "_start", time.monotonic()),
            sync_dist=True,
        )  # mean over ranks

    on_test_start = on_fit_start

    def configure_optimizers(self):
        h = self.hparams
        params = [p for n, p in self.net.named_parameters() if p.requires_grad and "embed" not in n]
        return adamw_warmup_cosine(
            params,
            lr=h.lr,
            weight_decay=h.weight_decay,
            warmup_steps=h.warmup_steps,
            total_steps=h.total_steps,
        )

    # --- checkpoints: the draft only ----------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint["state_dict"]
        for key in [k for k in state if k.endswith(EMBED_KEY)]:
            del state[key]


class TraceDataModule(SplitLoaders, L.LightningDataModule):
    """Batches of target traces (prompt + continuation) with a loss mask on the continuation.

    Args:
        traces_dir: folder written by ``stage=data``.
        batch_size, max_len: tokens per row are truncated to ``max_len``.
        val_fraction: share of traces held out (chosen by a stable hash of the token ids).
        num_workers: DataLoader workers.
    """

    def __init__(
        self,
        traces_dir: str,
        batch_size: int = 16,
        max_len: int = 512,
        val_fraction: float = 0.02,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        self.traces_dir, self.batch_size, self.max_len = traces_dir, batch_size, max_len
        self.val_fraction, self.num_workers = val_fraction, num_workers

    def setup(self, stage: str | None = None) -> None:
        full = TraceDataset(self.traces_dir, self.max_len)
        self.train_set, self.val_set = full.split(self.val_fraction)

    test_split = "validation"  # the held-out traces serve validation and test

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        data = self.train_set if split == "train" else self.val_set
        return DataLoader(
            data,
            batch_size=self.batch_size,
            shuffle=shuffle,
            collate_fn=collate_traces,
            num_workers=self.num_workers,
            drop_last=shuffle and len(data) > self.batch_size,
        )


def export_draft(
    learner: DistillLearner,
    out_dir: str,
    folder: str | None = None,
    dtype: str = "bfloat16",
    *,
    install: bool = False,
    asset: str | None = None,
    force: bool = False,
) -> Path:
    """``export``: write the shipped format (``config.json`` + ``model.safetensors``).

    Args:
        folder: destination (default ``<out_dir>/export``).
        dtype: storage dtype of the float tensors.
        install, asset, force: ``install`` writes to ``asset`` (``assets/draft_lm/smollm2``);
            existing files there are replaced only with ``force`` (``learners/install.py``).
    """
    dest = export_folder(out_dir, folder=folder, install=install, asset=asset, force=force)
    save_draft(learner.net, dest, dtype=getattr(torch, dtype))
    return dest
