"""Training at scale: the FSDP strategy from config, and the rank rules of ``specdec.train``.

``conf/trainer/ddp_cpu.yaml`` (CPU, gloo), ``ddp.yaml`` (GPUs) and ``fsdp.yaml`` (GPUs, sharded) run
every learner data-parallel. What each rank does (``specdec.train``):

* ``stage=data`` runs in one process only: under ``torchrun`` (``WORLD_SIZE`` > 1) it stops with
  the command to use instead, so no two ranks write one chunk;
* ``fit``: Lightning shards the batches (DistributedSampler), gradients are all-reduced (DDP) or
  parameters sharded (FSDP); epoch metrics are reduced across ranks (``sync_dist`` /
  torchmetrics), so every rank sees the same monitored value and checkpoints the same step;
* the export after ``fit`` is written by global rank 0 only.

The teacher: every learner reads the target's outputs from data the ``data`` stage computed once
and cached (H-RAD and acceptance rows, EAGLE-3 / SpecBlock features, the draft LM's stored top-k);
only ``distill_draft_smollm2`` with ``learner.teacher=true`` runs the target online, a full
frozen copy per rank under DDP (under FSDP it is sharded with the learner, its decoder layers
being among ``layers``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence


def fsdp_strategy(layers: Sequence[str], sharding_strategy: str = "FULL_SHARD",
                  state_dict_type: str = "full", **kwargs):
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
        raise ValueError(f"trainer.strategy.layers={list(layers)}: none of these classes could be "
                         "imported; name the decoder-layer class of your models")
    return FSDPStrategy(auto_wrap_policy=classes, sharding_strategy=sharding_strategy,
                        state_dict_type=state_dict_type, **kwargs)


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
            "stage=data` without torchrun, then train with torchrun or trainer=ddp_cpu/ddp/fsdp")
