"""``python -m specdec.train +experiment=<name>``: train an auxiliary learner (Lightning + Hydra).

Stages (``stage=``):

* ``data``: call the experiment's ``data_gen`` (writes training data, e.g. target traces);
* ``fit``: seed → datamodule → learner → logger → ``Trainer.fit`` → ``Trainer.test`` on the best
  checkpoint → optional ``export(learner, out_dir)`` (e.g. the plain ``nn.Module`` as safetensors).

Lightning is imported only here and in ``specdec.learners``; eval loads exported heads without it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from specdec.config import register_resolvers

log = logging.getLogger(__name__)


def build_logger(cfg: DictConfig, out_dir: Path):
    """A Lightning logger from the shared ``logger`` group (``backend: none|csv|wandb``)."""
    backend = cfg.logger.backend
    if backend == "none":
        return False
    if backend == "csv":
        from lightning.pytorch.loggers import CSVLogger

        return CSVLogger(save_dir=str(out_dir), name="csv")
    if backend == "wandb":
        from lightning.pytorch.loggers import WandbLogger

        wb = WandbLogger(
            project=cfg.logger.project,
            entity=cfg.logger.entity,
            offline=cfg.logger.mode == "offline",
            tags=list(cfg.logger.tags),
            save_dir=str(out_dir),
        )
        wb.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
        return wb
    raise ValueError(f"unknown logger.backend {backend!r}; use none, csv or wandb")


def train(cfg: DictConfig) -> dict[str, float]:
    """Run the configured stage; returns the final metrics (empty for ``stage=data``)."""
    import lightning as L

    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.stage == "data":
        if cfg.data_gen is None:
            raise ValueError("this experiment has no data_gen; run stage=fit")
        instantiate(cfg.data_gen)()
        return {}
    if cfg.stage != "fit":
        raise ValueError(f"unknown stage {cfg.stage!r}; use stage=data or stage=fit")
    if cfg.learner is None or cfg.datamodule is None:
        raise ValueError(
            "no learner/datamodule configured: pass +experiment=<name> (see conf/experiment/)"
        )
    L.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.datamodule)
    learner = instantiate(cfg.learner)
    logger = build_logger(cfg, out_dir)
    checkpoint = L.pytorch.callbacks.ModelCheckpoint(
        dirpath=str(out_dir / "checkpoints"), save_last=True
    )
    trainer = instantiate(cfg.trainer, logger=logger, callbacks=[checkpoint])
    try:
        trainer.fit(learner, datamodule=datamodule, ckpt_path=cfg.ckpt_path)
        fast = bool(cfg.trainer.get("fast_dev_run", False))
        trainer.test(learner, datamodule=datamodule, ckpt_path=None if fast else "best")
        if cfg.export is not None:
            instantiate(cfg.export)(learner, out_dir)
    finally:
        if cfg.logger.backend == "wandb":
            import wandb

            wandb.finish()
    return {k: float(v) for k, v in trainer.callback_metrics.items()}


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> None:
    train(cfg)


if __name__ == "__main__":
    register_resolvers()
    main()
