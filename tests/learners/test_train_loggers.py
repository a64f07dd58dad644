"""``python -m specdec.train`` builds its Lightning logger from the shared ``logger`` group.

The eval side of the group (``specdec.bench.run.loggers``) runs in
``tests/bench/test_eval_loggers.py``.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml

from specdec.learners.resume import train_hash
from specdec.train import build_logger, log_export


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
    cfg = compose("train", ["+experiment=hrad_tiny", "logger=wandb", "logger.tags=[cpu]", "seed=7"])
    logger = build_logger(cfg)
    try:
        assert isinstance(logger, WandbLogger)
        run = logger.experiment
        assert run.settings.mode == "offline" and run.project == "specdec"
        assert tuple(run.tags) == ("cpu",) and run.config["seed"] == 7
        # named <experiment>-<config hash> (the run folder's name), grouped by experiment
        assert (
            run.name
            == f"hrad_tiny-{train_hash(cfg)}"
            == "hrad_tiny-" + Path(str(cfg.hydra.run.dir)).name
        )
        assert run.group == "hrad_tiny" and run.job_type == "train"
    finally:
        wandb.finish()
        wandb.teardown()
    assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 1


def test_the_wandb_run_and_model_artifact_carry_the_run_folders_hash(
    compose, tmp_path, monkeypatch
):
    """Building the learner resolves ``${model}``'s interpolations in place (Hydra's instantiate),
    which moves ``train_hash`` of the config; the names keep the hash Hydra named the folder
    with (``paths.output_dir``, as under ``@hydra.main``)."""
    from hydra.utils import instantiate
    from lightning.pytorch.loggers import WandbLogger
    from omegaconf import open_dict

    cfg = compose("train", ["+experiment=hrad_tiny", "logger=wandb"])
    folder = tmp_path / "train" / "hrad_tiny" / train_hash(cfg)  # what hydra.run.dir names
    with open_dict(cfg):
        cfg.paths.output_dir = str(folder)
    instantiate(cfg.learner)  # as train() does before it builds the logger
    assert train_hash(cfg) != folder.name  # the drift this test is about
    assert cfg.logger.train.name == f"hrad_tiny-{folder.name}"  # the W&B run's name
    logged = []
    fake_run = SimpleNamespace(log_artifact=lambda art, aliases: logged.append(art))
    monkeypatch.setattr(WandbLogger, "experiment", property(lambda self: fake_run))
    export = tmp_path / "export"
    export.mkdir()
    (export / "config.json").write_text("{}")
    log_export(WandbLogger(offline=True), export, cfg)
    assert [a.name for a in logged] == [f"hrad_tiny-{folder.name}"]


def test_the_export_is_logged_as_a_wandb_model_artifact(compose, tmp_path, monkeypatch):
    from lightning.pytorch.loggers import WandbLogger

    logged = []
    fake_run = SimpleNamespace(log_artifact=lambda art, aliases: logged.append((art, aliases)))
    monkeypatch.setattr(WandbLogger, "experiment", property(lambda self: fake_run))
    cfg = compose("train", ["+experiment=eagle3_tiny", "logger=wandb"])
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    log_export(WandbLogger(offline=True), folder, cfg)
    ((artifact, aliases),) = logged
    assert artifact.name == f"eagle3_tiny-{train_hash(cfg)}" and artifact.type == "model"
    assert aliases == ["latest"] and artifact.metadata["installed"] is False
    assert list(artifact.manifest.entries) == ["config.json"]
    log_export(False, folder, cfg)  # no logger: nothing logged, no error
    assert len(logged) == 1
