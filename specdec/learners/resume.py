"""A training run's identity: its config hash, its stable folder and the checkpoint it resumes.

``python -m specdec.train`` writes to ``outputs/train/<task_name>/<hash>/`` (``conf/train.yaml``,
``hydra.run.dir``), where ``<hash>`` (``${specdec_train_hash:}``) covers what decides the trained
weights: seed, learner, datamodule, data_gen, trainer and monitor, as composed (interpolations
unresolved, so the folder does not depend on where the checkout lives). The keys in
``UNHASHED_KEYS`` are left out: where files go (``paths``, ``hydra``), how the run is watched
(``logger``, ``callbacks``), what happens after the fit (``export``: installing a finished run
reruns its command with ``export.install=true`` in the same folder) and how it starts
(``stage``, ``ckpt_path``, ``resume``); the model config's ``placement:`` node is hashed as its
keys were before the node, flat in ``model`` (``placement_config.flat_model``). So rerunning a
killed command lands in its folder, and ``resume_checkpoint`` hands Lightning its
``checkpoints/last.ckpt``: the weights, optimizer and schedulers, the loop position and
(``specdec.learners.resumable``) the train loader's place in its epoch come back, and no step is
lost or repeated beyond the last checkpoint. ``save_last`` rewrites
``last.ckpt`` at the end of a completed fit (the callback writes it at each validation only), so
rerunning a finished command trains nothing and goes on to test and export.

The W&B run and its ``model`` artifact are named ``run_name``: ``<task_name>-<hash>`` with the
hash *of the run folder* (``run_hash``), not the config's hash recomputed later. The two can
differ: instantiating a node that interpolates another one (the learner's ``model: ${model}``)
resolves that other node's interpolations in place (Hydra's ``instantiate`` resolves a copy whose
interpolations reach into the original config), so ``train_hash`` of the config after the learner
is built is not the hash Hydra named the folder with.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from specdec.errors import BadInput
from specdec.models.placement_config import flat_model
from specdec.models.shipped import read_checkpoint

if TYPE_CHECKING:
    import lightning as L

log = logging.getLogger(__name__)

UNHASHED_KEYS = (
    "hydra",
    "paths",
    "logger",
    "callbacks",
    "export",
    "stage",
    "ckpt_path",
    "resume",
    "task_name",
    "method_name",
)
LAST = Path("checkpoints") / "last.ckpt"  # conf/callbacks/last_checkpoint.yaml


def train_hash(cfg: DictConfig) -> str:
    """12 hex digits of the training-relevant config (``UNHASHED_KEYS`` left out)."""
    keep = {
        k: v
        for k, v in OmegaConf.to_container(cfg, resolve=False).items()
        if k not in UNHASHED_KEYS
    }
    if "model" in keep:  # the placement node's keys where they were before it: the same hash
        keep["model"] = flat_model(keep["model"])
    blob = json.dumps(keep, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def run_hash(cfg: DictConfig) -> str:
    """The hash of this training run's folder: the name of ``paths.output_dir`` when that is a
    training run's folder (``<task_name>/<12 hex digits>``, as ``conf/train.yaml`` lays it out),
    else ``train_hash(cfg)`` (a config composed outside a Hydra job, or a ``hydra.run.dir``
    of one's own)."""
    try:
        folder = Path(str(OmegaConf.select(cfg, "paths.output_dir", default="") or ""))
    except ValueError:  # ${hydra:...} outside a Hydra job (OmegaConf's errors are ValueErrors)
        folder = Path()
    task = str(OmegaConf.select(cfg, "task_name", default="train"))
    if folder.parent.name == task and re.fullmatch(r"[0-9a-f]{12}", folder.name):
        return folder.name
    return train_hash(cfg)


def run_name(cfg: DictConfig) -> str:
    """``<task_name>-<run_hash>``: the W&B run's name and its ``model`` artifact's."""
    return f"{OmegaConf.select(cfg, 'task_name', default='train')}-{run_hash(cfg)}"


def run_name_resolver(*, _root_: DictConfig) -> str:
    """``${specdec_train_run_name:}``: ``run_name`` of the config it appears in."""
    return run_name(_root_)


def hash_resolver(*, _root_: DictConfig) -> str:
    """``${specdec_train_hash:}``: ``train_hash`` of the config it appears in."""
    return train_hash(_root_)


CKPT_FIX = "pass ckpt_path=<a checkpoint a fit of this experiment wrote> or drop it"
LAST_FIX = "resume=false starts the run over (or delete that file)"


def resume_checkpoint(cfg: DictConfig, out_dir: str | Path) -> str | None:
    """The checkpoint ``fit`` starts from: ``ckpt_path`` when given, else (``resume=true``) the
    run folder's ``checkpoints/last.ckpt`` when a killed or finished run left one; None: from
    scratch."""
    if cfg.get("ckpt_path"):
        # a truncated or foreign file: one error line naming it, before anything trains
        read_checkpoint(cfg.ckpt_path, CKPT_FIX)
        return str(cfg.ckpt_path)
    last = Path(out_dir) / LAST
    if cfg.get("resume", True) and last.is_file():
        read_checkpoint(last, LAST_FIX)
        log.info("resuming from %s (resume=false starts over)", last)
        return str(last)
    return None


def check_fits(learner: nn.Module, ckpt_path: str | Path, cfg: DictConfig) -> None:
    """Refuse (``BadInput``) a checkpoint that is not of ``learner``'s architecture before the fit
    loads it (Lightning's strict load would end in a traceback): tensors of another shape, keys
    the learner lacks, and keys it has that the checkpoint lacks (unless the learner loads
    non-strictly: its checkpoints leave out shared weights). Names the file and the fix."""
    fix = CKPT_FIX if cfg.get("ckpt_path") else LAST_FIX
    theirs = read_checkpoint(ckpt_path, fix)["state_dict"]
    mine = learner.state_dict()
    shapes = [
        f"{k} {tuple(theirs[k].shape)} (the learner's {tuple(mine[k].shape)})"
        for k in sorted(set(mine) & set(theirs))
        if isinstance(theirs[k], torch.Tensor) and theirs[k].shape != mine[k].shape
    ]
    unexpected = sorted(set(theirs) - set(mine))
    missing = sorted(set(mine) - set(theirs)) if getattr(learner, "strict_loading", True) else []
    if not (shapes or unexpected or missing):
        return
    what = "; ".join(
        part
        for part in (
            f"tensors of another shape: {', '.join(shapes[:3])}" if shapes else "",
            f"keys the learner lacks: {unexpected[:3]}" if unexpected else "",
            f"keys it lacks: {missing[:3]}" if missing else "",
        )
        if part
    )
    raise BadInput(
        f"training checkpoint {ckpt_path} is not of this learner's architecture "
        f"({type(learner).__name__}, {cfg.get('task_name')}): {what}; {fix}"
    )


def save_last(trainer: L.Trainer, out_dir: str | Path) -> None:
    """After a fit that ran to its end: write the run folder's ``checkpoints/last.ckpt`` at the
    final step, when a checkpoint callback keeps that file (``conf/callbacks/last_checkpoint.yaml``)
    and the run is not a ``fast_dev_run``. Called on every rank (Lightning writes on rank 0)."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    last = Path(out_dir) / LAST
    keeps_last = any(
        isinstance(cb, ModelCheckpoint)
        and cb.dirpath is not None
        and Path(cb.dirpath) == last.parent
        and cb.filename == last.stem
        for cb in trainer.checkpoint_callbacks
    )
    if keeps_last and not trainer.fast_dev_run and not trainer.interrupted:
        trainer.save_checkpoint(last)
