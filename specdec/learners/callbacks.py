"""Lightning callbacks of ``python -m specdec.train`` beyond Lightning's own (``conf/callbacks/``).

* ``LearningRateMonitor``: Lightning's, logging each optimiser's rate when the run has a logger and
  doing nothing otherwise (Lightning's raises without a logger, and ``logger=none`` is the
  default), so one callbacks config serves every logger.
"""

from __future__ import annotations

import logging
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import LearningRateMonitor as _LightningLRMonitor

log = logging.getLogger(__name__)


class LearningRateMonitor(_LightningLRMonitor):
    """``lightning.pytorch.callbacks.LearningRateMonitor`` that is a no-op without a logger."""

    def on_train_start(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        if not trainer.loggers:
            log.info("no logger (logger=none): the learning rate is not logged")
            return
        super().on_train_start(trainer, *args, **kwargs)

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        if trainer.loggers:
            super().on_train_batch_start(trainer, *args, **kwargs)

    def on_train_epoch_start(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        if trainer.loggers:
            super().on_train_epoch_start(trainer, *args, **kwargs)
