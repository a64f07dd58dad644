"""Training inputs that do not fit the run end with one ``error:`` line, before any training.

Data written for another target (its hidden size or vocabulary, or features of other layers) and
a training checkpoint (``ckpt_path``) of another architecture used to end in a shape traceback
inside the first training step or Lightning's strict load. ``learners/data_fit.py`` and
``learners/resume.check_fits`` now refuse them before the fit, naming the folder or file, both
sides and the fix. Deterministic.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from specdec.errors import BadInput
from specdec.testing.paths import REPO

K, H = 3, 32  # the tiny target: 3 hidden states of width 32


def _hrad_data(folder: Path, *, hidden: int = H, vocab: int = 259) -> Path:
    """A small H-RAD data folder (every split present) recorded for a target of ``hidden``."""
    from specdec.data.hrad_store import check_meta, write_chunk

    gen = torch.Generator().manual_seed(0)
    width, n = (K + 1) * hidden, 40
    x = torch.randn(n, width, generator=gen)  # [n, D]
    check_meta(
        folder,
        {
            "layers": K,
            "gamma_max": 2,
            "target_hidden_size": hidden,
            "target_num_layers": 2,
            "target_vocab_size": vocab,
        },
    )
    rows = [
        {
            "features": x[i],
            "label": i % 3,
            "accepted": 0,
            "step": i,
            "prefix_len": 1,
            "prompt": i,
            "split": [0, 0, 0, 1, 2][i % 5],
            "draft": torch.zeros(2, dtype=int),
        }
        for i in range(n)
    ]
    write_chunk(folder / "chunk_00000.safetensors", rows, [[1]], [0], 2, width)
    return folder


def _hrad(compose, data: Path, *extra: str):
    return compose(
        "train",
        [
            "+experiment=hrad_tiny",
            f"data_path={data}",
            "trainer.max_epochs=1",
            "+trainer.limit_train_batches=1",
            "+trainer.limit_val_batches=1",
            "+trainer.limit_test_batches=1",
            "+trainer.enable_model_summary=false",
            "callbacks.progress_bar.refresh_rate=0",
            *extra,
        ],
    )


def test_data_of_another_target_is_refused_before_training(compose, tmp_path):
    from specdec.data.features import make_eagle3_data
    from specdec.models.tiny import tiny_pair
    from specdec.train import train

    data = _hrad_data(tmp_path / "hrad")
    for extra, says in (
        (["model.hidden=48"], r"hidden size 32 \(this target's: 48\)"),
        (["+model.vocab_size=300"], r"vocabulary 259 \(this target's: 300\)"),
    ):
        with pytest.raises(
            BadInput,
            match=rf"training data in {data} does not fit this run: "
            rf"{says}; .*stage=data.* or pass data_path=",
        ):
            train(_hrad(compose, data, *extra))
    traces = tmp_path / "traces"
    make_eagle3_data(
        tiny_pair(),
        str(traces),
        [0, 1, 2],
        synthetic={"prompts": 4, "max_new": 6, "vocab_map_size": 96, "seed": 0},
    )
    for extra, says in (
        (["model.hidden=48"], r"hidden size 32 \(this target's: 48\)"),
        (
            ["eagle3.target_layers=[0,1]"],
            r"features of 3 target layers \("
            r"learner.target_layers reads 2\)",
        ),
    ):
        cfg = compose(
            "train",
            ["+experiment=eagle3_tiny", f"eagle3.traces_dir={traces}", "trainer=debug", *extra],
        )
        with pytest.raises(
            BadInput,
            match=rf"{traces} does not fit this run: {says}; .*"
            "eagle3.traces_dir=",
        ):
            train(cfg)


def test_a_checkpoint_of_another_architecture_is_refused_before_training(compose, tmp_path):
    import lightning
    from hydra.utils import instantiate

    from specdec.train import train

    data = _hrad_data(tmp_path / "hrad")
    narrow = instantiate(_hrad(compose, data, "learner.hidden=[16,8]").learner)
    for name, state, says in (
        (
            "narrow.ckpt",
            narrow.state_dict(),
            r"tensors of another shape: head\.mlp\.0\.bias "
            r"\(16,\) \(the learner's \(32,\)\)",
        ),
        (
            "eagle3.ckpt",
            {"net.fc.weight": torch.zeros(H, 3 * H)},
            r"keys the learner lacks: \['net\.fc\.weight'\]; keys it lacks: \['class_weights'",
        ),
    ):
        path = tmp_path / name
        torch.save(
            {
                "state_dict": state,
                "epoch": 0,
                "global_step": 1,
                "pytorch-lightning_version": lightning.__version__,
            },
            path,
        )
        with pytest.raises(
            BadInput,
            match=rf"training checkpoint {path} is not of this "
            rf"learner's architecture \(HradLearner, hrad_tiny\): {says}.*; pass "
            r"ckpt_path=<a checkpoint a fit of this experiment wrote> or drop it",
        ):
            train(_hrad(compose, data, f"ckpt_path={path}"))


@pytest.mark.slow  # a Python process with torch, Hydra and Lightning: ~15 s on a busy machine
def test_the_cli_prints_one_error_line_and_exits_2(tmp_path):
    data = _hrad_data(tmp_path / "hrad", hidden=48)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specdec.train",
            "+experiment=hrad_tiny",
            f"data_path={data}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: the training data in {data} ")
    assert "hidden size 48 (this target's: 32)" in lines[0]
