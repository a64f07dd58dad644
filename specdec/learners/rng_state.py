"""The random-number generators' states in a training checkpoint, so a resumed fit is bit-identical.

Lightning's checkpoint holds the weights, the optimizer and schedulers, the loop position and
(``resumable.py``) the train loader's place in its epoch, but no generator state: a run resumed
from it draws other dropout masks (and any other random choice in a training step) than the same
command run straight through, and exports other weights. ``RngState``, a callback that
``python -m specdec.train`` always adds, saves in every checkpoint the states of Python's
``random``, NumPy's global generator, torch's CPU generator and, when CUDA is present, every CUDA
device's, as they are when the checkpoint is written; a resumed fit sets them back just before
its first training batch, the point where the uninterrupted run went on from them. (Lightning
writes its checkpoints at the end of a validation or an epoch, after the validation loader drew
its seed; the train loader draws from its own generator, ``resumable.py``.)

A checkpoint written without these states (by an older version) resumes with a warning that the
run will not repeat the uninterrupted one. Under several processes each rank has its own states
and the checkpoint holds rank 0's only, so they are not restored there (also with a warning).
"""

from __future__ import annotations

import logging
import random
from typing import Any

import lightning as L
import numpy as np
import torch

log = logging.getLogger(__name__)


def capture() -> dict[str, Any]:
    """The global generators' states, as tensors and plain values (a ``weights_only`` load reads
    them back)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore(state: dict[str, Any]) -> None:
    """Set the global generators to ``state`` (``capture``'s); CUDA's only when as many devices
    are visible as when it was captured."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    npy = state["numpy"]
    np.random.set_state(
        (
            npy["kind"],
            npy["keys"].numpy().astype(np.uint32),
            npy["pos"],
            npy["has_gauss"],
            npy["gauss"],
        )
    )
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
        else:
            log.warning(
                "the checkpoint holds the CUDA generators of %d devices, this machine "
                "has %d: they are not restored",
                len(cuda),
                torch.cuda.device_count(),
            )


class RngState(L.Callback):
    """Saves the generators' states in each checkpoint; restores them before the first training
    batch of a fit resumed from one (module docstring)."""

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None
        self._resuming = False

    def state_dict(self) -> dict[str, Any]:
        return capture()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._resuming = trainer.ckpt_path is not None

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any) -> None:
        if not self._resuming:
            return
        self._resuming, pending, self._pending = False, self._pending, None
        if trainer.world_size > 1:
            log.warning(
                "resumed under %d processes: each rank's generators start anew, so this "
                "run draws other random numbers (dropout) than one never interrupted",
                trainer.world_size,
            )
        elif pending is None:
            log.warning(
                "the checkpoint %s holds no generator states (written by an older "
                "version): this resumed run draws other random numbers (dropout) than "
                "one never interrupted and exports other weights",
                trainer.ckpt_path,
            )
        else:
            restore(pending)
