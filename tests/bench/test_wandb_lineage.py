"""The trained weights an eval run reads (``specdec.bench.wandb_lineage``): the learned folders of a
config (trained assets the drafter and the draft path name, never the target; real eval configs),
and the eval run declaring them as ``model`` artifacts it used, so W&B's lineage links them to
the run (a fake ``wandb`` module, ``specdec.testing.fake_wandb``).
"""

from __future__ import annotations

from pathlib import Path

from specdec.bench.run.loggers import WandbLogger
from specdec.bench.wandb_artifacts import RunTag
from specdec.bench.wandb_lineage import learned_folders
from specdec.config import ROOT
from specdec.testing.fake_wandb import FakeWandb


def _asset(root: Path, kind: str, pair: str) -> Path:
    folder = root / kind / pair
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_learned_folders_are_the_trained_assets_the_drafter_and_draft_path_name(tmp_path):
    head, draft = _asset(tmp_path, "specdecpp", "tiny"), _asset(tmp_path, "draft_lm", "tiny")
    not_an_asset = tmp_path / "notes"
    not_an_asset.mkdir()
    config = {
        "drafter": {"policy": {"head": str(head)}, "other": [str(not_an_asset), "sps"]},
        "verifier": {"file": str(head / "model.safetensors")},  # a file in a folder
        "model": {"draft_path": str(draft), "target": str(_asset(tmp_path, "hf", "t"))},
    }
    assert learned_folders(config) == [head.resolve(), draft.resolve()]  # never the target
    assert learned_folders({"drafter": {"name": "sps"}, "model": {"draft_path": None}}) == []


def test_learned_folders_of_real_eval_configs(compose):
    from omegaconf import OmegaConf

    def folders(method: str) -> list[Path]:
        cfg = compose("eval", [f"method={method}"])  # resolved as the runner resolves it
        return learned_folders(
            {
                k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
                for k, v in cfg.items()
                if k != "hydra"
            }
        )

    assert folders("eagle3") == [ROOT / "specdec" / "assets" / "eagle3" / "tiny"]
    assert folders("sps") == []


def test_an_eval_run_uses_the_drafters_artifact(tmp_path):
    """The eval run declares the weights it read as a ``model`` artifact it used: W&B's
    lineage then links them to the run."""
    folder = _asset(tmp_path, "eagle3", "tiny")
    logger = WandbLogger(tmp_path / "run")
    logger.wandb = FakeWandb
    tag = RunTag("eagle3", "tiny", "tiny")
    logger.log_config({"drafter": {"path": str(folder)}, "model": {"draft_path": None}}, tag)
    (used,) = logger.run.used
    assert (used.name, used.type) == ("eagle3-tiny", "model")
    assert used.files == ["config.json", "model.safetensors"]
    assert used.metadata == {"folder": str(folder.resolve())}
    logger.log_config({"drafter": {"name": "sps"}, "model": {}}, tag)  # nothing learned
    assert logger.run.used == []
