"""H-RAD learner: class weights, metrics, training on a planted signal, export, bad input, CLI."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from specdec.data.hrad_store import check_meta, write_chunk
from specdec.learners.hrad.module import class_weights, recalls
from specdec.nets.hrad.head import HradHead, load_hrad

K = 3  # the tiny target (2 layers) has 3 hidden states
TINY = SimpleNamespace(hidden_size=32, num_layers=2, vocab_size=259)


def test_balanced_class_weights_give_every_present_class_the_same_total_weight():
    counts = torch.tensor([6, 3, 1])
    w = class_weights(counts)
    torch.testing.assert_close(w, torch.tensor([10 / 18, 10 / 9, 10 / 3]))
    torch.testing.assert_close(w * counts, torch.full((3,), 10 / 3))  # N / C each
    absent = class_weights(torch.tensor([4, 0, 4]))  # C stays 3: the scale does not matter
    torch.testing.assert_close(absent, torch.tensor([2 / 3, 0, 2 / 3]))


def test_recalls_and_balanced_accuracy_of_a_confusion_matrix():
    confusion = torch.tensor([[8, 2, 0], [1, 3, 0], [0, 0, 0]])  # rows: true, columns: predicted
    per, balanced = recalls(confusion)
    assert per == [pytest.approx(0.8), pytest.approx(0.75), None]
    assert balanced == pytest.approx(0.775)


def planted_folder(path, n: int = 4000, seed: int = 0):
    """Gaussian rows (70 / 22 / 8 % of classes 0 / 1 / 2) with class 1 shifted by 6 along feature
    0 and class 2 along feature 1; feature 0 is scaled to the thousands, as raw residual streams
    are (the head standardises its input)."""
    gen = torch.Generator().manual_seed(seed)
    d = (K + 1) * TINY.hidden_size
    x = torch.randn(n, d, generator=gen)  # [n, D]
    u = torch.rand(n, generator=gen)
    labels = torch.where(u < 0.08, 2, torch.where(u < 0.30, 1, 0))  # [n]
    x[:, 0] = 1000.0 * (x[:, 0] + 6.0 * (labels == 1))
    x[:, 1] += 6.0 * (labels == 2)
    check_meta(path, {"layers": K, "gamma_max": 7})
    rows = [
        {
            "features": x[i],
            "label": int(labels[i]),
            "accepted": 0,
            "step": i,
            "prefix_len": 1,
            "prompt": i,
            "split": [0, 0, 0, 1, 2][i % 5],
            "draft": torch.zeros(7, dtype=torch.long),
        }
        for i in range(n)
    ]
    write_chunk(path / "chunk_00000.safetensors", rows, [[1]], [0], 7, d)
    return path, labels


def test_training_finds_a_planted_signal_and_logs_per_class_recall(tiny32, tmp_path):
    """Deterministic (seeded data and training): the mean recall on held-out rows must reach 0.9
    (always-majority scores 1/3; the Bayes rule is two thresholds, above 0.97)."""
    import lightning as L

    from specdec.learners.hrad.module import HradDataModule, HradLearner

    folder, labels = planted_folder(tmp_path / "planted")
    L.seed_everything(0)
    learner = HradLearner(tiny32, layers=K, hidden=(32, 16), dropout=0.0, lr=3e-3)
    dm = HradDataModule(str(folder), batch_size=32)
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=6,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path / "run"),
    )
    dm.setup()
    x, y = dm.splits["train"].tensors
    learner.head.set_standardisation(*dm.feature_stats())
    with torch.no_grad():
        before = float(
            torch.nn.functional.cross_entropy(
                learner.head(x), y, weight=class_weights(dm.class_counts())
            )
        )
    trainer.fit(learner, datamodule=dm)
    metrics = trainer.callback_metrics
    assert {
        "val/recall_0",
        "val/recall_1",
        "val/recall_2",
        "val/balanced_acc",
        "val/acc",
        "val/ce",
        "train/balanced_acc",
    } <= set(metrics)
    assert float(metrics["val/balanced_acc"]) >= 0.9, dict(metrics)
    torch.testing.assert_close(learner.class_weights, class_weights(torch.bincount(y)))
    with torch.no_grad():
        after = float(
            torch.nn.functional.cross_entropy(
                learner.head.eval()(x), y, weight=learner.class_weights
            )
        )
    assert after < before / 3, (before, after)
    files = sorted((tmp_path / "run" / "confusion").glob("val_step*.json"))
    assert len(files) == 6  # one per validation (the sanity check writes none)
    confusion = torch.tensor(json.loads(files[-1].read_text())["rows_true_cols_pred"])
    assert (
        confusion.sum(1).tolist()
        == torch.bincount(dm.splits["validation"].tensors[1], minlength=3).tolist()
    )


def test_export_loads_back_without_lightning_and_predicts_the_same(tiny32, tmp_path):
    from specdec.learners.hrad.module import HradLearner, export_hrad

    learner = HradLearner(tiny32, layers=K, hidden=(16,))
    learner.head.set_standardisation(torch.randn(128), torch.rand(128) + 0.5)
    path = export_hrad(learner, tmp_path, experiment="hrad_tiny", gamma_max=2)
    head = load_hrad(path, target=TINY)
    z = torch.randn(5, 128, generator=torch.Generator().manual_seed(1))
    probs = head.predict(z)  # [5, 3]
    torch.testing.assert_close(probs, learner.head.eval()(z).softmax(-1))
    torch.testing.assert_close(probs.sum(-1), torch.ones(5))
    assert head.meta["gamma_max"] == 2 and head.meta["layers"] == K
    assert head.meta["target_hidden_size"] == 32 and not head.training


def test_a_head_for_another_target_or_features_of_another_width_are_refused(tiny32, tmp_path):
    from specdec.learners.hrad.module import HradLearner, export_hrad

    path = export_hrad(HradLearner(tiny32, layers=K, hidden=(8,)), tmp_path, experiment="hrad_tiny")
    other = SimpleNamespace(hidden_size=576, num_layers=30, vocab_size=49152)
    with pytest.raises(
        ValueError,
        match=r"hidden_size 576 \(the head's target has 32\), "
        r"num_layers 30 .*\+experiment=hrad_tiny stage=data",
    ):
        load_hrad(path, target=other)
    with pytest.raises(
        ValueError,
        match=r"features have width 160 but this head reads 128 "
        r"= \(K \+ 1\) \* H \(K=3",
    ):
        load_hrad(path).predict(torch.zeros(160))


def test_a_missing_head_names_the_commands_that_train_it(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match=r"no H-RAD head at .*`python -m specdec.train "
        r"\+experiment=hrad_smollm2 stage=data` then",
    ):
        load_hrad(tmp_path / "none", experiment="hrad_smollm2")
    with pytest.raises(ValueError, match="hidden widths >= 1"):
        HradHead(8, (0,))


def test_data_with_other_layers_than_the_learner_is_refused(tiny32, tmp_path):
    import lightning as L

    from specdec.learners.hrad.module import HradDataModule, HradLearner

    folder, _ = planted_folder(tmp_path / "p", n=40)
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=1,
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    with pytest.raises(ValueError, match=r"K=3 target layers but learner.layers=2"):
        trainer.fit(HradLearner(tiny32, layers=2), datamodule=HradDataModule(str(folder)))


def test_the_tiny_experiment_runs_from_data_to_export(compose, tmp_path):
    from specdec.train import train

    overrides = [
        "+experiment=hrad_tiny",
        f"data_path={tmp_path / 'data'}",
        f"export.folder={tmp_path / 'head'}",
        "data_gen.synthetic.count=12",
        "data_gen.max_new_tokens=12",
    ]
    train(compose("train", [*overrides, "stage=data"]))
    metrics = train(
        compose(
            "train", [*overrides, "trainer.max_epochs=2", "callbacks.progress_bar.refresh_rate=0"]
        )
    )
    assert {"test/loss", "test/ce", "test/balanced_acc", "test/recall_0"} <= set(metrics)
    head = load_hrad(tmp_path / "head", target=TINY)
    assert head.meta["experiment"] == "hrad_tiny" and head.meta["gamma_max"] == 2
    assert (tmp_path / "confusion" / "test.json").exists()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir())[0].startswith("best-")
