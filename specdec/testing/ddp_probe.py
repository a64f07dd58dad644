"""A Lightning callback that records what each rank of a data-parallel run did (tests only).

``tests/learners/test_train_ddp.py`` adds it with
``+callbacks.probe._target_=specdec.testing.ddp_probe.RankProbe +callbacks.probe.out_dir=...``:
at the end of ``fit`` every rank writes
``rank<r>.json`` with the world size, the training batches it ran and the samples in them, and a
digest of its parameters (equal on every rank after DDP's all-reduced updates).
``recorded_export`` wraps an ``export`` callable so the test sees which ranks called it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import lightning as L
import torch
from hydra.utils import get_method


class RankProbe(L.Callback):
    """Per-rank record of a run (see the module docstring).

    Args:
        out_dir: folder for the ``rank<r>.json`` files.
    """

    def __init__(self, out_dir: str) -> None:
        self.out_dir = Path(out_dir)
        self.batches = self.samples = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.batches += 1
        first = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
        self.samples += int(first.shape[0])

    def on_fit_end(self, trainer, pl_module) -> None:
        digest = hashlib.sha256()
        for name, tensor in sorted(pl_module.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().to("cpu", torch.float64).numpy().tobytes())
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / f"rank{trainer.global_rank}.json").write_text(
            json.dumps(
                {
                    "rank": trainer.global_rank,
                    "world_size": trainer.world_size,
                    "batches": self.batches,
                    "samples": self.samples,
                    "params_sha256": digest.hexdigest(),
                }
            )
        )


def recorded_export(learner, out_dir: str, *, inner: str, record_dir: str, **kwargs):
    """An ``export``: writes ``export_rank<r>`` under ``record_dir``, then calls ``inner``.

    Args:
        inner: the dotted name of the real export (e.g. ``specdec.learners.hrad.module.
            export_hrad``), called as ``inner(learner, out_dir, **kwargs)``.
        record_dir: folder of the per-rank marker files.
    """
    rank = learner.global_rank  # the trainer's rank (0 for a learner without a trainer)
    Path(record_dir).mkdir(parents=True, exist_ok=True)
    (Path(record_dir) / f"export_rank{rank}").write_text(str(out_dir))
    return get_method(inner)(learner, out_dir, **kwargs)
