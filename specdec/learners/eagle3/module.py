"""Lightning training of the EAGLE-3 drafter with training-time test (TTT).

EAGLE-3 (Li et al. 2025) trains the drafter on its own outputs: unrolled step ``j`` feeds, at
position ``t``, the draft's step-``j-1`` output ``h_{t-1}`` as the condition (instead of the target
feature) with the true next token, exactly as decoding feeds a drafted node its parent's output.
Attention at step ``j`` sees the step-0 keys at positions ``≤ t-j`` (the verified prefix) and the
step-``i`` key at position ``t-j+i`` for ``i = 1..j`` (the node's own drafted ancestors), so the
training graph matches a depth-``j`` node of the decoding tree (``ttt.py``: ``unroll``,
``ttt_mask``). Every step predicts ``x_{t+2}`` against the target: loss = ``soft_weight`` ×
forward KL on the stored top-k of ``p`` (restricted to the draft vocabulary) + the rest ×
cross-entropy on the target's argmax, weighted ``step_weight^j`` per step. Metrics: ``*/acc<j>``
= draft argmax == target argmax at step ``j`` (teacher-forced acceptance at depth ``j+1``),
``*/loss``.

The checkpoint holds the drafter only (the target's features are cached by ``stage=data``, or
computed in the step with ``datamodule.features=online``: ``online.py``; its embedding is shared
and frozen). Batches: ``batches.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
import torch

from specdec.data.features import frozen_target, read_token_map
from specdec.data.online_features import batch_features
from specdec.errors import BadInput
from specdec.learners.eagle3.batches import (  # noqa: F401  (re-exported: configs, tests)
    Eagle3DataModule,
    FeatureTraces,
    collate,
    held_out,
)
from specdec.learners.eagle3.ttt import unroll
from specdec.learners.install import export_folder
from specdec.learners.optim import adamw_warmup_cosine
from specdec.models.reduced_draft import tokenizer_sha256
from specdec.nets.eagle3.interop import FORMATS, save_eagle3_hf
from specdec.nets.eagle3.layer_ids import default_layers, servable
from specdec.nets.eagle3.net import (
    DECODER_EMBED_KEY,
    load_eagle3,
    new_eagle3,
    remap_head,
    save_eagle3,
)
from specdec.nets.eagle3.published import PublishedEagle3Net, new_published

log = logging.getLogger(__name__)
ARCHS = {"specdec": new_eagle3, "eagle3": new_published}  # learner.arch -> the new net's maker


class Eagle3Learner(L.LightningModule):
    """Trains an ``Eagle3Net`` (``nets.eagle3.net``) on cached or online target features.

    Args:
        model: the ``ModelPair`` (its target: init source, embedding, shapes).
        traces_dir: the ``stage=data`` folder (traces, features, ``token_map.safetensors``).
        target_layers: indices into the target's ``hidden_states`` (must match the features).
        ttt_steps: unrolled steps (1 = no training-time test).
        step_weight: loss weight ``w^j`` of step ``j``.
        soft_weight: share of the top-k KL term (the rest: argmax cross-entropy).
        lr, weight_decay, warmup_steps, total_steps: AdamW, linear warm-up, cosine decay.
        init_from: warm start from a shipped drafter folder.
        remap_vocab: with ``init_from``, switch the warm-started head to ``traces_dir``'s token
            map (``remap_head``: shared tokens keep their trained rows); without it the shipped
            drafter's own map is kept.
        arch: ``specdec`` (``Eagle3Net``) or ``eagle3`` (the published architecture,
            ``published.PublishedEagle3Net``: export it with ``export.format=eagle3_hf``).
        export_format: the run's ``export.format`` (None: no export), checked here, before
            training, against ``arch`` and, for ``eagle3_hf``, the target layers an engine can
            feed (``check_export_format``).
    """

    def __init__(
        self,
        model,
        traces_dir: str,
        target_layers: list[int],
        ttt_steps: int = 3,
        step_weight: float = 0.8,
        soft_weight: float = 0.5,
        lr: float = 5e-4,
        weight_decay: float = 0.0,
        warmup_steps: int = 50,
        total_steps: int = 2000,
        init_from: str | None = None,
        remap_vocab: bool = False,
        arch: str = "specdec",
        export_format: str | None = None,
    ) -> None:
        super().__init__()
        if ttt_steps < 1:
            raise BadInput(f"learner.ttt_steps must be >= 1, got {ttt_steps}")
        if arch not in ARCHS:
            raise BadInput(f"learner.arch={arch!r} is unknown; use one of {list(ARCHS)}")
        check_export_format(
            export_format, arch, target_layers, model.target.config.num_hidden_layers
        )
        self.save_hyperparameters(
            {  # plain types: checkpoints load with weights_only=True
                "traces_dir": str(traces_dir),
                "target_layers": [int(i) for i in target_layers],
                "ttt_steps": int(ttt_steps),
                "step_weight": float(step_weight),
                "soft_weight": float(soft_weight),
                "lr": float(lr),
                "weight_decay": float(weight_decay),
                "warmup_steps": int(warmup_steps),
                "total_steps": int(total_steps),
                "init_from": init_from and str(init_from),
                "remap_vocab": bool(remap_vocab),
                "arch": str(arch),
            }
        )
        target = frozen_target(model)
        # not a registered submodule: not trained, saved, all-reduced, sharded or moved to the
        # device; a step reads its input embedding, which the net registers (shared), and with
        # online features runs it whole (online.target_features moves it to the batch's device)
        self._target = [target]
        tok_hash = tokenizer_sha256(model.tokenizer)
        if init_from:
            self.net = load_eagle3(init_from, target, tokenizer_hash=tok_hash)
            if remap_vocab:
                log.info(
                    "remapped the head onto %s's token map: %s",
                    traces_dir,
                    remap_head(self.net, target, read_token_map(traces_dir)),
                )
        else:
            self.net = ARCHS[arch](
                target, read_token_map(traces_dir), target_layers, tokenizer_hash=tok_hash
            )
        if isinstance(self.net, PublishedEagle3Net) != (arch == "eagle3"):
            raise BadInput(
                f"learner.init_from={init_from} holds a head of the other "
                f"architecture than learner.arch={arch}; set learner.arch to match"
            )
        if list(self.net.target_layers) != [int(i) for i in target_layers]:
            raise ValueError(
                f"init_from reads target layers {list(self.net.target_layers)}, the "
                f"config asks for {list(target_layers)}"
            )
        self.net.train()
        for name, p in self.net.named_parameters():
            p.requires_grad_("embed_tokens" not in name)
        t2d = torch.full((target.config.vocab_size,), -1, dtype=torch.long)
        t2d[self.net.decoder.token_map] = torch.arange(self.net.decoder.token_map.numel())
        self.register_buffer("t2d", t2d, persistent=False)
        self.strict_loading = False  # checkpoints omit the shared embedding

    def _step(self, batch: dict[str, torch.Tensor], stage: str) -> torch.Tensor:
        target = self._target[0]
        feats = batch_features(batch, target, self.hparams.target_layers)  # [B, T, k, H]
        logits = unroll(
            self.net,
            target.get_input_embeddings(),
            batch["ids"],
            feats,
            batch["length"],
            int(self.hparams.ttt_steps),
        )
        lab_ids, lab_logp = batch["lab_ids"][:, 2:], batch["lab_logp"][:, 2:]  # x_{t+2}: [B,S-1,k]
        top = self.t2d[lab_ids.clamp(min=0)] * (lab_ids >= 0) - (lab_ids < 0).long()  # [B,S-1,k]
        has = lab_ids[..., 0] >= 0  # [B, S-1]: a continuation token is predicted
        w_total, loss, soft_w = 0.0, 0.0, float(self.hparams.soft_weight)
        for j, lg in enumerate(logits):
            # positions t >= j have a full chain of j drafted ancestors
            use = has.clone()
            use[:, :j] = False
            logq = lg[:, :-1][use].float().log_softmax(-1)  # [M, V_d]
            k_idx, p = top[use], lab_logp[use].exp() * (top[use] >= 0)  # [M, k]
            soft = -(p * logq.gather(-1, k_idx.clamp(min=0))).sum(-1).mean()
            hard_idx = k_idx[:, 0]
            mapped = hard_idx >= 0
            picked = logq.gather(-1, hard_idx.clamp(min=0)[:, None])[:, 0]
            hard = -(picked * mapped).sum() / mapped.sum().clamp(min=1)
            weight = float(self.hparams.step_weight) ** j
            loss = loss + weight * (soft_w * soft + (1 - soft_w) * hard)
            w_total += weight
            acc = (logq.argmax(-1) == hard_idx).float().mean()
            self.log(f"{stage}/acc{j}", acc, prog_bar=j == 0 or stage != "train", sync_dist=True)
        loss = loss / w_total
        self.log(f"{stage}/loss", loss, prog_bar=True, sync_dist=True)
        return loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._step(batch, "test")

    def configure_optimizers(self):
        h = self.hparams
        return adamw_warmup_cosine(
            [p for p in self.net.parameters() if p.requires_grad],
            lr=h.lr,
            weight_decay=h.weight_decay,
            warmup_steps=h.warmup_steps,
            total_steps=h.total_steps,
        )

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint["state_dict"]
        for key in [k for k in state if k.endswith(DECODER_EMBED_KEY)]:
            del state[key]


def check_export_format(
    export_format: str | None, arch: str, target_layers: list[int], num_layers: int
) -> None:
    """Refuse, before training, an ``export.format`` the trained head could not be written in:
    ``eagle3_hf`` needs ``learner.arch=eagle3`` and target layers every engine can capture
    (``layer_ids.servable``), ``specdec`` the default architecture."""
    if export_format is None:
        return
    if export_format not in FORMATS:
        raise BadInput(f"export.format={export_format!r} is unknown; use one of {list(FORMATS)}")
    if export_format == "eagle3_hf" and arch != "eagle3":
        raise BadInput(
            f"export.format=eagle3_hf writes the published EAGLE-3 architecture, "
            f"which learner.arch={arch} does not train; set learner.arch=eagle3 (or "
            f"export.format=specdec)"
        )
    if export_format == "specdec" and arch == "eagle3":
        raise BadInput(
            "a head of the published architecture (learner.arch=eagle3) exports only "
            "in its own layout; set export.format=eagle3_hf"
        )
    if export_format == "eagle3_hf":
        servable(
            target_layers,
            num_layers,
            f"set eagle3.target_layers to layers inside 1..{num_layers - 1}, e.g. "
            f"{default_layers(num_layers)} (EAGLE-3's low / middle / high)",
        )


def export_eagle3(
    learner: Eagle3Learner,
    out_dir: str,
    folder: str | None = None,
    dtype: str = "float32",
    format: str = "specdec",
    *,
    install: bool = False,
    asset: str | None = None,
    force: bool = False,
    max_shard_mib: float | None = None,
) -> Path:
    """``export``: to ``<out_dir>/export`` or where ``folder`` / ``install`` say
    (``learners/install.py``: never over existing files without ``force``); ``format=specdec``:
    the shipped format, ``format=eagle3_hf``: the published ``LlamaForCausalLMEagle3`` layout
    (``interop.save_eagle3_hf``); ``max_shard_mib``: weights in shards of at most that size
    (``models/shards.py``; the specdec format)."""
    if format not in FORMATS:
        raise BadInput(f"export.format={format!r} is unknown; use one of {list(FORMATS)}")
    if format == "specdec" and isinstance(learner.net, PublishedEagle3Net):
        raise BadInput(
            "a head of the published architecture (learner.arch=eagle3) exports "
            "only in its own layout; set export.format=eagle3_hf"
        )
    if format == "eagle3_hf" and max_shard_mib is not None:
        raise BadInput(
            "export.max_shard_mib shards the specdec format only; drop it or set "
            "export.format=specdec"
        )
    dest = export_folder(out_dir, folder=folder, install=install, asset=asset, force=force)
    tcfg = learner._target[0].config
    if format == "eagle3_hf":
        return save_eagle3_hf(
            learner.net,
            dest,
            dtype=getattr(torch, dtype),
            target_layers_count=tcfg.num_hidden_layers,
        )
    vocab = tcfg.vocab_size
    return save_eagle3(
        learner.net,
        dest,
        target_vocab=vocab,
        dtype=getattr(torch, dtype),
        max_shard_mib=max_shard_mib,
    )
