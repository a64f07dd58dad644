"""A training run killed twice and resumed exports the weights of the run never killed, bit for bit.

The tiny H-RAD experiment's head uses dropout (p = 0.2), so every training step draws from
torch's generator. The same command is run straight through, and run again in another folder
killed (``StopAt`` raises) after its checkpoints at steps 6 and 10, both mid-epoch, and rerun
each time. The checkpoint now carries the generators' states (``learners/rng_state.py``), so the
resumed run draws the masks the straight one drew: same batches, same final weights, same
exported ``model.safetensors`` bytes (``model_checkpoint=null``: the export is of the final
weights, not of a best checkpoint that may precede the first kill). Before, the resumed run
restarted the generator from the seed and exported other weights. Deterministic (fixed seeds,
CPU): no false-failure probability.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import open_dict

STEPS, EVERY, BATCHES = 12, 2, 4  # 3 epochs of 4 batches; checkpoints every 2 steps
KILLS = (6, 10)  # after the checkpoints at steps 6 and 10: mid-epoch (epochs 1 and 2)


def _run(compose, data: Path, run_dir: Path, *extra: str) -> None:
    from specdec.train import train

    cfg = compose(
        "train",
        [
            "+experiment=hrad_tiny",
            f"data_path={data}",
            "datamodule.batch_size=16",
            "trainer.max_epochs=-1",
            f"+trainer.max_steps={STEPS}",
            f"+trainer.limit_train_batches={BATCHES}",
            f"+trainer.val_check_interval={EVERY}",
            "+trainer.limit_val_batches=1",
            "+trainer.limit_test_batches=1",
            "+trainer.enable_model_summary=false",
            "+trainer.num_sanity_val_steps=0",
            "callbacks.progress_bar.refresh_rate=0",
            "callbacks.lr_monitor=null",
            "callbacks.model_checkpoint=null",  # "best" is then the latest: the final weights
            "+callbacks.log._target_=specdec.testing.resume_probe.BatchLog",
            f"+callbacks.log.path={run_dir / 'batches.jsonl'}",
            *extra,
        ],
    )
    with open_dict(cfg):
        cfg.paths.output_dir = str(run_dir)
    train(cfg)


def _rows(run_dir: Path) -> list[list[str]]:
    lines = (run_dir / "batches.jsonl").read_text().splitlines()
    return [r["rows"] for r in map(json.loads, lines) if "rows" in r]


def test_a_run_killed_twice_and_resumed_exports_the_uninterrupted_runs_weights(compose, tmp_path):
    from specdec.testing.resume_probe import Killed
    from specdec.train import train

    hrad_data = tmp_path / "data"
    train(
        compose(
            "train",
            [
                "+experiment=hrad_tiny",
                "stage=data",
                f"data_path={hrad_data}",
                "data_gen.synthetic.count=16",
                "data_gen.max_new_tokens=12",
            ],
        )
    )

    whole, killed = tmp_path / "whole", tmp_path / "killed"
    _run(compose, hrad_data, whole)
    for step in KILLS:
        with pytest.raises(Killed):
            _run(
                compose,
                hrad_data,
                killed,
                "+callbacks.kill._target_=specdec.testing.resume_probe.StopAt",
                f"+callbacks.kill.step={step}",
            )
    _run(compose, hrad_data, killed)

    assert len(_rows(whole)) == STEPS and _rows(killed) == _rows(whole)
    last = [
        torch.load(run / "checkpoints" / "last.ckpt", weights_only=True) for run in (whole, killed)
    ]
    assert last[0]["global_step"] == last[1]["global_step"] == STEPS
    for name, tensor in last[0]["state_dict"].items():
        assert torch.equal(last[1]["state_dict"][name], tensor), name
    exported = [(run / "export" / "model.safetensors").read_bytes() for run in (whole, killed)]
    assert exported[0] == exported[1]


def _draws() -> tuple:
    import random

    import numpy as np

    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_the_generator_states_survive_a_weights_only_checkpoint(tmp_path, caplog):
    from types import SimpleNamespace

    from specdec.learners.rng_state import RngState

    saver = RngState()
    torch.save({"callbacks": {"RngState": saver.state_dict()}}, tmp_path / "c.ckpt")
    want = _draws()
    loaded = torch.load(tmp_path / "c.ckpt", weights_only=True)["callbacks"]["RngState"]
    resumed = RngState()
    resumed.load_state_dict(loaded)
    trainer = SimpleNamespace(ckpt_path=str(tmp_path / "c.ckpt"), world_size=1)
    resumed.on_fit_start(trainer, None)
    resumed.on_train_batch_start(trainer)  # the first resumed batch: the states come back
    assert _draws() == want
    resumed.on_train_batch_start(trainer)  # later batches leave the generators alone
    assert _draws() != want

    old = RngState()  # a checkpoint written without the states: said, not silent
    old.on_fit_start(trainer, None)
    old.on_train_batch_start(trainer)
    assert "holds no generator states" in caplog.text
