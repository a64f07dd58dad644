"""Lightning training of the SpecBlock drafter with cross-block unrolling (the public code's
``OnlineSpecBlockModel.forward``, github.com/shiweijiezero/SpecBlock).

Data: EAGLE-3's cache (``data.features``: target traces with top-k log-probs, fp16 features
of ``target_layers``, ``token_map.safetensors``), batched by ``Eagle3DataModule``; with
``datamodule.features=online`` the features are computed in the step (``eagle3/online.py``).

Unroll (``unroll.py``): block 1 at every position of a trace, then one block per transition, each
starting a random cut ``M ~ U{1..K}`` further on (teacher forcing with the true tokens).

Losses (``losses.py``): per block and slot, the chain-masked soft cross-entropy to the target's
distribution and the rank loss; validation and test always run every block with the rank loss
and no unlock scaling, so ``val/loss`` compares across steps and "best" means best.

Readings of the digest: a later block's own keys are its slots ``0..k`` at the query's position
only (the digest's "current block with the block-1 rule"; decoding never has later-block keys at
earlier positions, and ``tests/learners/test_specblock_train.py`` checks training block 2 =
decoding block 2). Paper vs code: the paper masks the rank loss with the draft's valid-prefix
mask, the code with the rank chain; we follow the code.
Per-slot unlock warm-up: ``losses.unlock``. Simplifications against the code: no HASS-style
top-K loss variant, and the draft loss's normaliser is the fixed ``Σ slot_weight^k``.
Metrics: ``*/acc<k>`` = block-1 slot ``k`` argmax == target argmax (teacher forced, no chain
mask), ``*/rank_acc`` (block 1), ``*/loss``, ``*/rank_loss``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import lightning as L
import torch

from specdec.data.features import frozen_target, read_token_map
from specdec.data.online_features import batch_features
from specdec.errors import BadInput
from specdec.learners.install import export_folder
from specdec.learners.optim import adamw_warmup_cosine
from specdec.learners.specblock.losses import prefix_correct, rank_loss, slot_labels, unlock
from specdec.learners.specblock.unroll import unroll
from specdec.learners.specblock.warm import warm_from_eagle3
from specdec.models.reduced_draft import tokenizer_sha256
from specdec.nets.eagle3.net import load_eagle3
from specdec.nets.specblock.net import new_specblock
from specdec.nets.specblock.slots import (
    rank_buckets,
)
from specdec.nets.specblock.store import load_specblock, save_specblock


class SpecBlockLearner(L.LightningModule):
    """Trains a ``SpecBlockNet`` (``nets.specblock.net``) on EAGLE-3's cached features.

    Args:
        model: the ``ModelPair`` (its target: init source, embedding, shapes).
        traces_dir: the ``stage=data`` folder (traces, features, ``token_map.safetensors``).
        target_layers: indices into the target's ``hidden_states`` (must match the features).
        slots: K; layers: decoder layers L; rank_hidden: rank head width.
        blocks: blocks unrolled per step (1 = block 1 only).
        slot_weight: draft loss weight ``w^k`` of slot ``k``.
        rank_weight: weight of the rank loss; rank_budget: its class-frequency budget.
        rank_start_step: before it, one block and no rank loss.
        unlock_steps: U of the per-slot unlock warm-up ``α_k`` (0: off).
        warm_query_scale: with init_eagle3, the scale of the position-query weights.
        trainable: name prefixes of the network's parameters to train (e.g. ``[rank_head]``: a
            rank-head stage on a trained drafter, whose draft is unchanged); null: all.
        lr, weight_decay, warmup_steps, total_steps: AdamW, linear warm-up, cosine decay.
        init_from: warm start from a shipped SpecBlock drafter folder.
        init_eagle3: warm start from a shipped EAGLE-3 drafter folder of the same target
            (``warm.py``: its fusion, layer, norm, head and token map; ignored with init_from).
        seed: seeds the network's init and the cuts ``M``.
    """

    def __init__(
        self,
        model,
        traces_dir: str,
        target_layers: list[int],
        slots: int = 4,
        layers: int = 2,
        rank_hidden: int = 256,
        blocks: int = 3,
        slot_weight: float = 0.8,
        rank_weight: float = 1.0,
        rank_budget: float = 10.0,
        rank_start_step: int = 0,
        lr: float = 5e-4,
        weight_decay: float = 0.0,
        warmup_steps: int = 50,
        total_steps: int = 2000,
        init_from: str | None = None,
        init_eagle3: str | None = None,
        unlock_steps: int = 0,
        warm_query_scale: float = 0.1,
        trainable: Sequence[str] | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if blocks < 1:
            raise BadInput(f"learner.blocks must be >= 1, got {blocks}")
        self.save_hyperparameters(
            {  # plain types: checkpoints load with weights_only=True
                "traces_dir": str(traces_dir),
                "target_layers": [int(i) for i in target_layers],
                "slots": int(slots),
                "layers": int(layers),
                "rank_hidden": int(rank_hidden),
                "blocks": int(blocks),
                "slot_weight": float(slot_weight),
                "rank_weight": float(rank_weight),
                "rank_budget": float(rank_budget),
                "rank_start_step": int(rank_start_step),
                "lr": float(lr),
                "weight_decay": float(weight_decay),
                "warmup_steps": int(warmup_steps),
                "total_steps": int(total_steps),
                "init_from": init_from and str(init_from),
                "init_eagle3": init_eagle3 and str(init_eagle3),
                "unlock_steps": int(unlock_steps),
                "warm_query_scale": float(warm_query_scale),
                "trainable": None if trainable is None else [str(t) for t in trainable],
                "seed": int(seed),
            }
        )
        target = frozen_target(model)
        self._target = [target]  # not a registered submodule: not trained, not saved
        tok_hash = tokenizer_sha256(model.tokenizer)
        if init_from:
            self.net = load_specblock(init_from, target, tokenizer_hash=tok_hash)
        else:
            self.net = new_specblock(
                target,
                read_token_map(traces_dir),
                target_layers,
                slots=slots,
                layers=layers,
                rank_hidden=rank_hidden,
                tokenizer_hash=tok_hash,
                seed=seed,
            )
            if init_eagle3:
                warm_from_eagle3(
                    self.net,
                    load_eagle3(init_eagle3, target, tokenizer_hash=tok_hash),
                    query_scale=warm_query_scale,
                )
        if list(self.net.target_layers) != [int(i) for i in target_layers]:
            raise ValueError(
                f"init_from reads target layers {list(self.net.target_layers)}, the "
                f"config asks for {list(target_layers)}"
            )
        self.net.train()
        if trainable is not None:
            params = dict(self.net.named_parameters())
            unknown = [t for t in trainable if not any(n.startswith(str(t)) for n in params)]
            if unknown:
                raise BadInput(
                    f"learner.trainable {unknown} names no parameter of the SpecBlock "
                    f"network; its top-level parts: "
                    f"{sorted({n.split('.')[0] for n in params})}"
                )
            for n, p in params.items():
                p.requires_grad_(n.startswith(tuple(str(t) for t in trainable)))
        t2d = torch.full((target.config.vocab_size,), -1, dtype=torch.long)
        t2d[self.net.token_map] = torch.arange(self.net.token_map.numel())
        self.register_buffer("t2d", t2d, persistent=False)
        self._cuts = torch.Generator().manual_seed(int(seed))

    def _full_objective(self, stage: str) -> bool:
        """Validation and test always measure the final objective (every block, the rank loss,
        every slot unlocked), so ``val/loss`` compares across steps and "best" means best."""
        return stage != "train" or self.global_step >= self.hparams.rank_start_step

    def _step(
        self, batch: dict[str, torch.Tensor], stage: str, gen: torch.Generator
    ) -> torch.Tensor:
        h, k = self.hparams, self.net.slots
        full = self._full_objective(stage)
        blocks = int(h.blocks) if full else 1
        cuts = torch.randint(1, k + 1, (blocks - 1,), generator=gen).tolist()
        target = self._target[0]
        feats = batch_features(batch, target, h.target_layers)  # [B, T, k, H]: cached or online
        runs = unroll(self.net, target.get_input_embeddings(), batch["ids"], feats, cuts)
        weights = torch.tensor([h.slot_weight**j for j in range(k)])  # [K]
        unlocked = (
            unlock(self.global_step, h.unlock_steps, k) if stage == "train" else torch.ones(k)
        )  # [K]: α_k
        draft, ranks = 0.0, torch.zeros((), device=self.device)
        for b, (offset, out) in enumerate(runs):
            # 1. Labels of this block; 2. chain-masked soft CE per slot; 3. rank loss.
            top, p, has = slot_labels(batch["lab_ids"], batch["lab_logp"], self.t2d, offset, k)
            logq = out.logits.float().log_softmax(-1)  # [B, S, K, V_d]
            ce = -(p * logq.gather(-1, top.clamp(min=0))).sum(-1)  # [B, S, K]
            correct = (out.logits.argmax(-1) == top[..., 0]) & has
            mask = (prefix_correct(correct) & has).float()
            per_slot = (ce * mask).sum((0, 1)) / mask.sum((0, 1)).clamp(min=1)  # [K]
            draft = draft + (weights * unlocked).to(per_slot) @ per_slot / weights.sum()
            classes = rank_buckets(out.logits.detach(), top[..., 0])  # [B, S, K]
            if full:
                rank_ok = out.rank_logits.argmax(-1) == classes
                rmask = (prefix_correct(rank_ok) & has).float()
                ranks = ranks + rank_loss(out.rank_logits, classes, rmask, h.rank_budget)
            if b == 0:
                hit = has.float()
                for j in range(k):
                    acc = correct[..., j].float().sum() / hit[..., j].sum().clamp(min=1)
                    self.log(
                        f"{stage}/acc{j}", acc, prog_bar=j == 0 or stage != "train", sync_dist=True
                    )
                rank_acc = ((out.rank_logits.argmax(-1) == classes) & has).float().sum()
                self.log(f"{stage}/rank_acc", rank_acc / hit.sum().clamp(min=1), sync_dist=True)
        loss = draft + h.rank_weight * ranks
        self.log(f"{stage}/rank_loss", ranks.detach(), sync_dist=True)
        self.log(f"{stage}/loss", loss, prog_bar=True, sync_dist=True)
        return loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train", self._cuts)

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val", torch.Generator().manual_seed(batch_idx))  # same cuts each time

    def test_step(self, batch, batch_idx):
        self._step(batch, "test", torch.Generator().manual_seed(batch_idx))

    def on_fit_start(self) -> None:
        # a step reads the target's input embedding only: the rest stays on the CPU
        self._target[0].get_input_embeddings().to(self.device)

    on_test_start = on_fit_start

    def configure_optimizers(self):
        h = self.hparams
        params = [p for p in self.net.parameters() if p.requires_grad]  # see ``trainable``
        return adamw_warmup_cosine(
            params,
            lr=h.lr,
            weight_decay=h.weight_decay,
            warmup_steps=h.warmup_steps,
            total_steps=h.total_steps,
        )


def export_specblock(
    learner: SpecBlockLearner,
    out_dir: str,
    folder: str | None = None,
    dtype: str = "float32",
    int8: Sequence[str] = (),
    *,
    install: bool = False,
    asset: str | None = None,
    force: bool = False,
    max_shard_mib: float | None = None,
) -> Path:
    """``export``: the shipped format (``int8``: weights stored as int8 with per-row scales,
    ``save_specblock``), to ``<out_dir>/export`` or where ``folder`` / ``install`` say
    (``learners/install.py``: never over existing files without ``force``); ``max_shard_mib``:
    weights in shards of at most that size (``models/shards.py``)."""
    dest = export_folder(out_dir, folder=folder, install=install, asset=asset, force=force)
    return save_specblock(
        learner.net, dest, dtype=getattr(torch, dtype), int8=list(int8), max_shard_mib=max_shard_mib
    )
