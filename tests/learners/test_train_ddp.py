"""Data-parallel training on CPU: two processes (DDP, gloo) through the real CLI.

``trainer=ddp_cpu`` makes Lightning launch the second rank itself (the same command, the same
Hydra run dir). The tiny H-RAD experiment is the learner: seconds per epoch, its data made once in
this process first (``stage=data`` is a one-process stage). The FSDP export path
(``specdec.learners.scale.exportable``) is checked on the run's real checkpoint; FSDP itself
needs GPUs (Lightning refuses it on CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from hydra.utils import instantiate

from specdec.config import ROOT
from specdec.learners.hrad.module import HradDataModule
from specdec.learners.scale import exportable
from specdec.nets.hrad.head import load_hrad
from specdec.paths import CONF_DIR


def _data(compose, tmp_path) -> list[str]:
    from specdec.train import train

    overrides = [
        "+experiment=hrad_tiny",
        f"data_path={tmp_path / 'data'}",
        "data_gen.synthetic.count=16",
        "data_gen.max_new_tokens=12",
    ]
    train(compose("train", [*overrides, "stage=data"]))
    return overrides


def _two_ranks(tmp_path, overrides: list[str], export: str) -> None:
    """``python -m specdec.train ... trainer=ddp_cpu`` (Lightning launches rank 1); the export
    ``export`` (a dotted name) is recorded per rank under ``tmp_path/exports``."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "offline",
    }
    env.pop("WORLD_SIZE", None)
    cmd = [
        sys.executable,
        "-m",
        "specdec.train",
        *overrides,
        "trainer=ddp_cpu",
        f"paths.log_dir={tmp_path / 'logs'}",
        "callbacks.progress_bar.refresh_rate=0",
        "+callbacks.probe._target_=specdec.testing.ddp_probe.RankProbe",
        f"+callbacks.probe.out_dir={tmp_path / 'probe'}",
        "export._target_=specdec.testing.ddp_probe.recorded_export",
        f"+export.inner={export}",
        f"+export.record_dir={tmp_path / 'exports'}",
    ]
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]


def test_two_cpu_processes_train_one_model_on_half_the_batches_each(compose, tmp_path):
    overrides = _data(compose, tmp_path)
    _two_ranks(
        tmp_path,
        [
            *overrides,
            "trainer.max_epochs=2",
            "datamodule.batch_size=8",
            f"export.folder={tmp_path / 'head'}",
        ],
        "specdec.learners.hrad.module.export_hrad",
    )
    # exported once, by rank 0 only
    assert sorted(f.name for f in (tmp_path / "exports").iterdir()) == ["export_rank0"]
    ranks = [json.loads((tmp_path / "probe" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    # one model: DDP's all-reduced updates leave both ranks with the same parameters
    assert ranks[0]["params_sha256"] == ranks[1]["params_sha256"]
    # the batches were split: DistributedSampler gives each rank ceil(N / 2) rows per epoch
    data = HradDataModule(str(tmp_path / "data"))
    data.setup()
    n = len(data.splits["train"])
    assert ranks[0]["samples"] == ranks[1]["samples"] == 2 * -(-n // 2)  # 2 epochs
    # the export loads; the FSDP path (a fresh learner from the best checkpoint) exports the
    # same weights as the live learner did
    head = load_hrad(tmp_path / "head")
    assert head.meta["experiment"] == "hrad_tiny"
    best = sorted((tmp_path / "logs").rglob("best-*.ckpt"))
    assert len(best) == 1, best
    fresh = exportable(
        None,
        str(best[0]),
        sharded=True,
        build=lambda: instantiate(compose("train", overrides).learner),
    )
    for name, tensor in fresh.head.state_dict().items():
        torch.testing.assert_close(tensor, head.state_dict()[name], rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("experiment", "extra"),
    [
        ("specdecpp_tiny", ["trainer.max_epochs=1"]),
        ("eagle3_tiny", ["trainer.max_steps=4", "trainer.val_check_interval=2"]),
        # no rank head before step 2: its parameters sit out, which DDP must be told
        (
            "specblock_tiny",
            [
                "trainer.max_steps=4",
                "trainer.val_check_interval=2",
                "+learner.rank_start_step=2",
                "trainer.strategy.find_unused_parameters=true",
            ],
        ),
    ],
)
def test_every_tiny_learner_trains_with_two_cpu_processes(compose, tmp_path, experiment, extra):
    from specdec.train import train

    data = {
        "specdecpp_tiny": "data_path",
        "eagle3_tiny": "eagle3.traces_dir",
        "specblock_tiny": "specblock.traces_dir",
    }[experiment]
    cfg = compose("train", [f"+experiment={experiment}", f"{data}={tmp_path / 'data'}"])
    overrides = [f"+experiment={experiment}", f"{data}={tmp_path / 'data'}"]
    train(compose("train", [*overrides, "stage=data"]))
    out = "export.folder"
    _two_ranks(tmp_path, [*overrides, *extra, f"{out}={tmp_path / 'out'}"], cfg.export._target_)
    assert sorted(f.name for f in (tmp_path / "exports").iterdir()) == ["export_rank0"]
    ranks = [json.loads((tmp_path / "probe" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["params_sha256"] == ranks[1]["params_sha256"]
    assert (tmp_path / "out" / "config.json").is_file()


def test_stage_data_refuses_to_run_in_several_processes(compose, tmp_path, monkeypatch):
    from specdec.train import train

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="stage=data .* must run in one process.*WORLD_SIZE=2"):
        train(
            compose(
                "train", ["+experiment=hrad_tiny", f"data_path={tmp_path / 'data'}", "stage=data"]
            )
        )
    assert not (tmp_path / "data").exists()


def test_the_fsdp_export_needs_a_full_checkpoint_and_ddp_exports_the_live_learner(tmp_path):
    learner = object()
    assert exportable(learner, None, sharded=False, build=dict) is learner
    (tmp_path / "sharded.ckpt").mkdir()  # state_dict_type=sharded writes a folder
    for best in (None, str(tmp_path / "sharded.ckpt")):
        with pytest.raises(RuntimeError, match="state_dict_type=full"):
            exportable(learner, best, sharded=True, build=dict)


def test_train_exports_from_the_checkpoint_when_the_strategy_is_fsdp(
    compose, tmp_path, monkeypatch
):
    """The wiring in ``specdec.train``: an FSDP strategy (stood in for by the one-process CPU
    strategy, Lightning runs FSDP on GPUs only) exports a fresh learner loaded from ``best``."""
    import lightning.pytorch.strategies as strategies

    import specdec.train as train_module

    calls = []

    def spy(learner, best, *, sharded, build):
        out = exportable(learner, best, sharded=sharded, build=build)
        calls.append((sharded, out is learner, best))
        return out

    monkeypatch.setattr(strategies, "FSDPStrategy", strategies.SingleDeviceStrategy)
    monkeypatch.setattr(train_module, "exportable", spy)
    overrides = _data(compose, tmp_path)
    train_module.train(
        compose(
            "train",
            [
                *overrides,
                "trainer.max_epochs=1",
                f"export.folder={tmp_path / 'head'}",
                "callbacks.progress_bar.refresh_rate=0",
            ],
        )
    )
    [(sharded, same, best)] = calls
    assert sharded and not same and best
    state = torch.load(best, map_location="cpu", weights_only=True)["state_dict"]
    for name, tensor in load_hrad(tmp_path / "head").state_dict().items():
        torch.testing.assert_close(tensor, state[f"head.{name}"], rtol=0, atol=0)


@pytest.mark.parametrize("trainer", ["ddp_cpu", "ddp", "fsdp"])
@pytest.mark.parametrize(
    "experiment",
    ["hrad_tiny", "specdecpp_tiny", "eagle3_tiny", "specblock_tiny", "draft_lm_smollm2"],
)
def test_every_learner_composes_with_every_parallel_trainer(compose, experiment, trainer):
    cfg = compose("train", [f"+experiment={experiment}", f"trainer={trainer}"])
    assert cfg.trainer.strategy is not None and cfg.learner is not None


def test_the_fsdp_strategy_wraps_the_named_decoder_layers():
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    node = OmegaConf.load(CONF_DIR / "trainer" / "fsdp.yaml").strategy
    strategy = instantiate(node)
    assert LlamaDecoderLayer in strategy.kwargs["auto_wrap_policy"]._module_classes
    with pytest.raises(InstantiationException, match="none of these classes could be imported"):
        instantiate({**OmegaConf.to_container(node), "layers": ["no.such.Layer"]})
