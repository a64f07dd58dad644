"""``python -m specdec.train`` builds its callbacks from ``conf/callbacks/`` (template style).

The checkpoint callback follows each experiment's ``monitor`` (a validation metric and a mode), so
the checkpoint tested and exported is the best one, not the last; early stopping follows the same
metric; the learning-rate monitor logs when there is a logger and is silent without one.
"""

from __future__ import annotations

import csv

import pytest
import torch
from safetensors.torch import load_file

from specdec.learners.callbacks import LearningRateMonitor
from specdec.train import build_callbacks


def test_callbacks_follow_the_experiments_monitor(compose, tmp_path):
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint, TQDMProgressBar

    exp = "+experiment=draft_lm_smollm2"  # monitors val/top1, mode max
    default = build_callbacks(compose("train", [exp]))
    assert [type(c) for c in default] == [
        ModelCheckpoint,
        ModelCheckpoint,
        LearningRateMonitor,
        TQDMProgressBar,
    ]
    best, last = default[:2]
    assert (best.monitor, best.mode, best.save_top_k) == ("val/top1", "max", 1)
    assert (last.monitor, last.filename, last.save_top_k) == (None, "last", 1)
    assert best.dirpath == last.dirpath == str(tmp_path / "checkpoints")
    more = build_callbacks(compose("train", [exp, "callbacks=[default,early_stopping]"]))
    stop = next(c for c in more if isinstance(c, EarlyStopping))
    assert (stop.monitor, stop.mode) == ("val/top1", "max") and stop.patience == 10
    assert build_callbacks(compose("train", [exp, "callbacks=none"])) == []
    assert [
        type(c) for c in build_callbacks(compose("train", [exp, "callbacks.lr_monitor=null"]))
    ] == [ModelCheckpoint, ModelCheckpoint, TQDMProgressBar]


def test_a_node_without_target_is_named(compose):
    cfg = compose("train", ["+callbacks.oops.patience=3"])
    with pytest.raises(TypeError, match=r"callbacks\.oops is not a _target_ config"):
        build_callbacks(cfg)


def _metrics(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_best_checkpoint_is_tested_and_exported_and_early_stopping_follows_it(compose, tmp_path):
    """mode=max on val/loss makes an early validation the best (the loss falls as it trains), so
    best != last; early stopping (patience 2) then ends the run two validations after it."""
    from specdec.train import train

    overrides = [
        "+experiment=eagle3_tiny",
        f"eagle3.traces_dir={tmp_path / 'data'}",
        f"export.folder={tmp_path / 'e3'}",
        "data_gen.synthetic.prompts=16",
    ]
    train(compose("train", [*overrides, "stage=data"]))
    max_steps, every, patience = 24, 2, 2
    metrics = train(
        compose(
            "train",
            [
                *overrides,
                "logger=csv",
                "monitor.mode=max",
                "callbacks=[default,early_stopping]",
                f"callbacks.early_stopping.patience={patience}",
                "callbacks.progress_bar.refresh_rate=0",
                f"trainer.max_steps={max_steps}",
                f"trainer.val_check_interval={every}",
                "trainer.log_every_n_steps=1",
                "+trainer.limit_val_batches=1",
                "+trainer.limit_test_batches=1",
                "+trainer.enable_model_summary=false",
            ],
        )
    )
    assert "test/loss" in metrics
    rows = _metrics(tmp_path / "csv" / "version_0" / "metrics.csv")
    # Lightning logs a validation at global step g under step g - 1
    val = [(int(r["step"]) + 1, float(r["val/loss"])) for r in rows if r.get("val/loss")]
    assert [s for s, _ in val] == list(range(every, every * len(val) + 1, every))
    # 1. the best checkpoint is the validation with the highest loss, and it is the one tested
    #    (eagle3's test split is its validation split: the same loss to the last bit)
    best_step, best_loss = max(val, key=lambda sv: sv[1])
    best = list((tmp_path / "checkpoints").glob("best-*.ckpt"))
    assert len(best) == 1 and best[0].name.endswith(f"-step{best_step:06d}.ckpt"), best
    assert metrics["test/loss"] == pytest.approx(best_loss, rel=1e-6)
    # 2. early stopping: `patience` validations without a higher loss after the best one
    stop_at = next(i for i, (s, _) in enumerate(val) if s == best_step) + patience
    assert len(val) == stop_at + 1 and val[-1][0] < max_steps
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == val[-1][0] != best_step
    # 3. the export holds the best checkpoint's weights, not the last one's
    state = torch.load(best[0], weights_only=True)["state_dict"]
    exported = load_file(str(tmp_path / "e3" / "model.safetensors"))
    assert exported and all(torch.equal(v, state[f"net.{k}"]) for k, v in exported.items())
    assert not all(torch.equal(v, last["state_dict"][f"net.{k}"]) for k, v in exported.items())
    # 4. the learning-rate monitor logged the warm-up schedule
    lrs = [float(r["lr-AdamW"]) for r in rows if r.get("lr-AdamW")]
    assert len(lrs) >= 2 and lrs[1] > lrs[0]
