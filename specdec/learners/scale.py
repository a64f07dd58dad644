"""Training at scale: the FSDP strategy from config, and the rank rules of ``specdec.train``.

``conf/trainer/ddp_cpu.yaml`` (CPU, gloo), ``ddp.yaml`` (GPUs) and ``fsdp.yaml`` (GPUs, sharded) run
every learner data-parallel. What each rank does (``specdec.train``):

* ``stage=data`` runs in one process only: under ``torchrun`` (``WORLD_SIZE`` > 1) it stops with
  the command to use instead, so no two ranks write one chunk;
* ``fit``: Lightning shards the batches (DistributedSampler), gradients are all-reduced (DDP) or
  parameters sharded (FSDP); epoch metrics are reduced across ranks (``sync_dist`` /
  torchmetrics), so every rank sees the same monitored value and checkpoints the same step;
* the export after ``fit`` is written by global rank 0 only;
* under FSDP the live learner holds parameter shards, so rank 0 exports from a fresh learner
  loaded with the best checkpoint (``exportable``; ``state_dict_type: full`` writes it as one
  file).

The teacher (the target) is computed once and cached: every learner reads the target's outputs
from data ``stage=data`` wrote (H-RAD and acceptance rows, EAGLE-3 / SpecBlock features, the
draft LM's stored top-k of ``p``), and keeps the target outside its module tree (a list:
never trained, saved, all-reduced or sharded). On the device each rank holds only what a step
reads: the target's frozen input embedding (EAGLE-3 and the draft LM register it in their net,
so FSDP shards it with the net; SpecBlock moves its own copy). The exception
is ``draft_lm_smollm2`` with ``learner.teacher=true`` (online KL on the full ``p``): each
rank moves the whole frozen target to its device, under DDP and FSDP alike (FSDP shards the
module tree only); it warns when run with several processes.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path

from specdec.errors import BadInput


def fsdp_strategy(
    layers: Sequence[str],
    sharding_strategy: str = "FULL_SHARD",
    state_dict_type: str = "full",
    **kwargs,
):
    """A Lightning ``FSDPStrategy`` that wraps each instance of the named classes on its own.

    Args:
        layers: dotted class names (e.g. ``transformers.models.llama.modeling_llama.
            LlamaDecoderLayer``); names whose module is not installed are skipped, and none left
            is an error.
        sharding_strategy: torch FSDP's ``ShardingStrategy`` name.
        state_dict_type: ``full`` (one file; what the export reads) or ``sharded``.
        **kwargs: passed to ``FSDPStrategy``.

    Raises:
        ValueError: no class of ``layers`` could be imported.
    """
    from lightning.pytorch.strategies import FSDPStrategy

    classes = set()
    for name in layers:
        module, _, attr = name.rpartition(".")
        try:
            classes.add(getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError, ValueError):
            continue
    if not classes:
        raise BadInput(
            f"trainer.strategy.layers={list(layers)}: none of these classes could be "
            "imported; name the decoder-layer class of your models"
        )
    return FSDPStrategy(
        auto_wrap_policy=classes,
        sharding_strategy=sharding_strategy,
        state_dict_type=state_dict_type,
        **kwargs,
    )


def world_size() -> int:
    """Processes in this launch (``torchrun`` / Lightning set ``WORLD_SIZE``; 1 otherwise)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def check_single_process(stage: str) -> None:
    """Refuse a stage that must run in one process when launched with several.

    Raises:
        RuntimeError: naming the command to use.
    """
    if world_size() > 1:
        raise RuntimeError(
            f"stage={stage} writes the training data once and must run in one process, but "
            f"WORLD_SIZE={world_size()}: run `python -m specdec.train +experiment=<name> "
            "stage=data` without torchrun, then train with torchrun or trainer=ddp_cpu/ddp/fsdp"
        )


def exportable(learner, best: str | None, *, sharded: bool, build):
    """The learner whose weights the export writes (called on global rank 0 after ``test``).

    Args:
        learner: the trained learner (holding the best weights after ``Trainer.test``).
        best: the best checkpoint's path (None without one).
        sharded: the strategy shards parameters (FSDP): ``learner``'s own tensors are this
            rank's shards, so a fresh, unwrapped learner from ``build()`` is loaded with ``best``
            (a full checkpoint: Lightning gathered it) on the CPU instead.
        build: makes a fresh learner (``instantiate(cfg.learner)``).

    Raises:
        RuntimeError: ``sharded`` without a full checkpoint file (names the fix).
        BadInput: ``best`` is truncated or not a Lightning checkpoint (names it).
    """
    if not sharded:
        return learner
    if best is None or not Path(best).is_file():
        raise RuntimeError(
            f"the FSDP export reads the best checkpoint as one file, but got {best!r}: train "
            "with a checkpoint (not fast_dev_run) and trainer.strategy.state_dict_type=full "
            "(one file), or pass export=null"
        )
    from specdec.models.shipped import read_checkpoint

    fresh = build()
    state = read_checkpoint(best, "re-run the training that writes it")["state_dict"]
    fresh.load_state_dict(state, strict=fresh.strict_loading)
    return fresh
