"""Lightning callbacks that kill a training run and record what it trained on (tests only).

``tests/learners/test_train_resume.py`` adds them as ``+callbacks.<name>._target_=...``
(callbacks are not part of the run folder's hash, so the killed and the resumed run share a folder):

* ``StopAt(step)`` raises ``Killed`` before the training batch of global step ``step``: a run
  killed after its checkpoint at that step;
* ``BatchLog(path)`` appends one JSON line per event to ``path``: ``{"start": global step,
  "optimizer_steps": AdamW's step count}`` when training starts, then ``{"step": global step
  after it, "rows": [a digest per row]}`` for each training batch trained on.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import lightning as L
import torch


class Killed(RuntimeError):
    """What ``StopAt`` raises (a stand-in for a killed process)."""


class StopAt(L.Callback):
    """Raise ``Killed`` when the training batch of global step ``step`` is about to run."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            raise Killed(f"killed at global step {self.step}")


def _row_digests(batch: Any) -> list[str]:
    first = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]  # [B, ...]
    return [
        hashlib.sha256(row.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]
        for row in first
    ]


class BatchLog(L.Callback):
    """Append the run's start state and each training batch's rows to a JSON-lines file."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def _write(self, record: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        states = [s for opt in trainer.optimizers for s in opt.state.values() if "step" in s]
        steps = int(torch.as_tensor(states[0]["step"]).item()) if states else 0
        self._write(
            {"start": trainer.global_step, "optimizer_steps": steps, "epoch": trainer.current_epoch}
        )

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self._write({"step": trainer.global_step, "rows": _row_digests(batch)})
