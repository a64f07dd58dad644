"""``python -m specdec.train`` builds its Lightning logger from the shared ``logger`` group.

The eval side of the group (``specdec.bench.loggers``) runs in ``tests/test_eval_run.py``.
"""

from __future__ import annotations

import yaml

from specdec.train import build_logger


def test_logger_none_is_no_logger(compose):
    assert build_logger(compose("train", ["logger=none"])) is False


def test_logger_csv_writes_the_run_config_in_the_run_directory(compose, tmp_path):
    from lightning.pytorch.loggers import CSVLogger

    logger = build_logger(compose("train", ["logger=csv", "seed=7"]))
    assert isinstance(logger, CSVLogger)
    logger.save()
    hparams = yaml.safe_load((tmp_path / "csv" / "version_0" / "hparams.yaml").read_text())
    assert hparams["seed"] == 7 and hparams["paths"]["output_dir"] == str(tmp_path)


def test_logger_wandb_runs_offline_with_project_tags_and_config(compose, tmp_path, monkeypatch):
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    logger = build_logger(compose("train", ["logger=wandb", "logger.tags=[cpu]", "seed=7"]))
    try:
        assert isinstance(logger, WandbLogger)
        run = logger.experiment
        assert run.settings.mode == "offline" and run.project == "specdec"
        assert tuple(run.tags) == ("cpu",) and run.config["seed"] == 7
    finally:
        wandb.finish()
        wandb.teardown()
    assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 1

