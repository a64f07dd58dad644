"""Data-parallel training on CPU: two processes (DDP, gloo) through the real CLI.

``trainer=ddp_cpu`` makes Lightning launch the second rank itself (the same command, the same
Hydra run dir). The tiny H-RAD experiment is the learner: seconds per epoch, its data made once in
this process first (``stage=data`` is a one-process stage).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from specdec.config import ROOT
from specdec.learners.hrad.head import load_hrad
from specdec.learners.hrad.module import HradDataModule


def _data(compose, tmp_path) -> list[str]:
    from specdec.train import train

    overrides = ["+experiment=hrad_tiny", f"data_path={tmp_path / 'data'}",
                 "data_gen.synthetic.count=16", "data_gen.max_new_tokens=12"]
    train(compose("train", [*overrides, "stage=data"]))
    return overrides


def test_two_cpu_processes_train_one_model_on_half_the_batches_each(compose, tmp_path):
    overrides = _data(compose, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "specdec.train", *overrides, "trainer=ddp_cpu",
           "trainer.max_epochs=2", "datamodule.batch_size=8", f"paths.log_dir={tmp_path / 'logs'}",
           f"export.path={tmp_path / 'head'}", "callbacks.progress_bar.refresh_rate=0",
           "+callbacks.probe._target_=specdec.testing.ddp_probe.RankProbe",
           f"+callbacks.probe.out_dir={tmp_path / 'probe'}"]
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [json.loads((tmp_path / "probe" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    # one model: DDP's all-reduced updates leave both ranks with the same parameters
    assert ranks[0]["params_sha256"] == ranks[1]["params_sha256"]
    # the batches were split: DistributedSampler gives each rank ceil(N / 2) rows per epoch
    data = HradDataModule(str(tmp_path / "data"))
    data.setup()
    n = len(data.splits["train"])
    assert ranks[0]["samples"] == ranks[1]["samples"] == 2 * -(-n // 2)  # 2 epochs
    # exported once, by rank 0, and it loads
    assert load_hrad(tmp_path / "head").meta["experiment"] == "hrad_tiny"


def test_stage_data_refuses_to_run_in_several_processes(compose, tmp_path, monkeypatch):
    from specdec.train import train

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="stage=data .* must run in one process.*WORLD_SIZE=2"):
        train(compose("train", ["+experiment=hrad_tiny", f"data_path={tmp_path / 'data'}",
                                "stage=data"]))
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("trainer", ["ddp_cpu", "ddp", "fsdp"])
@pytest.mark.parametrize("experiment", ["hrad_tiny", "specdecpp_tiny", "eagle3_tiny",
                                        "specblock_tiny", "distill_draft_smollm2"])
def test_every_learner_composes_with_every_parallel_trainer(compose, experiment, trainer):
    cfg = compose("train", [f"+experiment={experiment}", f"trainer={trainer}"])
    assert cfg.trainer.strategy is not None and cfg.learner is not None


def test_the_fsdp_strategy_wraps_the_named_decoder_layers():
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    node = OmegaConf.load(ROOT / "conf" / "trainer" / "fsdp.yaml").strategy
    strategy = instantiate(node)
    assert LlamaDecoderLayer in strategy.kwargs["auto_wrap_policy"]._module_classes
    with pytest.raises(InstantiationException, match="none of these classes could be imported"):
        instantiate({**OmegaConf.to_container(node), "layers": ["no.such.Layer"]})
