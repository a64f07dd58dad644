"""SpecDec++ acceptance head: data labels, splits, token mixing, training, export and loading."""

from __future__ import annotations

import pytest
import torch

from specdec.data import specdecpp as acceptance_data
from specdec.nets.specdecpp.head import (
    AcceptanceHead,
    head_from_checkpoint,
    load_head,
    save_head,
)
from specdec.sampling import Sampling

TINY_SOURCES = [{"name": "synthetic", "limit": 16}]


@pytest.fixture(scope="module")
def data_dir(tiny32, tmp_path_factory):
    """A small acceptance dataset of the tiny pair (T=1), split by prompt id."""
    out = tmp_path_factory.mktemp("acc") / "data"
    acceptance_data.generate_acceptance_data(
        tiny32,
        str(out),
        TINY_SOURCES,
        sampling={"temperature": 1.0},
        max_new_tokens=12,
        val_fraction=0.25,
        test_fraction=0.25,
    )
    return str(out)


def test_labels_are_min_one_p_over_q_under_the_deployment_warp(tiny64):
    """Direct computation: softmax(logits / T) of both models at the position before y_t."""
    prompt, response = [5, 6, 7], [8, 9, 10, 11, 12]
    sampling = Sampling(temperature=0.7)
    draft_ids, labels = acceptance_data.label_response(
        tiny64, prompt, response, sampling, torch.Generator().manual_seed(0)
    )
    ids = torch.tensor([prompt + response])
    for t, (y, a) in enumerate(zip(draft_ids, labels)):
        pos = len(prompt) - 1 + t  # the logits that predict response token t
        q = torch.softmax(tiny64.draft(input_ids=ids).logits[0, pos] / 0.7, -1)
        p = torch.softmax(tiny64.target(input_ids=ids).logits[0, pos] / 0.7, -1)
        assert a == pytest.approx(min(1.0, float(p[y] / q[y])), rel=1e-6)
    assert len(draft_ids) == len(response) and any(a < 1 for a in labels)


def test_no_prompt_id_is_in_two_splits(data_dir):
    from datasets import load_from_disk

    ds = load_from_disk(data_dir)
    ids = {name: set(ds[name]["prompt_id"]) for name in ("train", "validation", "test")}
    assert all(ids.values())
    assert not (
        ids["train"] & ids["validation"]
        or ids["train"] & ids["test"]
        or ids["validation"] & ids["test"]
    )
    assert sum(len(v) for v in ids.values()) == sum(len(ds[n]) for n in ids)  # one row per prompt
    row = ds["train"][0]
    assert len(row["response_ids"]) == len(row["draft_ids"]) == len(row["labels"])
    assert all(0.0 <= a <= 1.0 for a in row["labels"])


def batch_of(data_dir, split="train", n=4):
    from specdec.learners.specdecpp.module import AcceptanceDataModule, collate

    dm = AcceptanceDataModule(data_dir, batch_size=n)
    dm.setup()
    return collate([dm.splits[split][i] for i in range(min(n, len(dm.splits[split])))])


def test_token_mixing_never_puts_loss_on_target_or_prompt_tokens(data_dir):
    from specdec.learners.specdecpp.module import mix

    batch = batch_of(data_dir)
    ids, loss_mask = mix(batch, ratio=0.3, seed=0, epoch=0)
    kept = batch["response"] & ~loss_mask  # response positions holding the target token
    assert not (loss_mask & ~batch["response"]).any()  # no loss on prompt or padding
    assert torch.equal(ids[loss_mask], batch["draft_ids"][loss_mask])
    assert torch.equal(ids[kept], batch["target_ids"][kept])
    assert torch.equal(ids[~batch["response"]], batch["target_ids"][~batch["response"]])
    assert kept.any() and loss_mask.any()
    # redrawn every epoch, reproducible within one
    assert not torch.equal(mix(batch, ratio=0.3, seed=0, epoch=1)[1], loss_mask)
    assert torch.equal(mix(batch, ratio=0.3, seed=0, epoch=0)[1], loss_mask)


def test_loss_ignores_labels_of_target_positions(tiny32, data_dir):
    from specdec.learners.specdecpp.module import AcceptanceLearner, mix

    learner = AcceptanceLearner(tiny32, depth=1)
    batch = batch_of(data_dir)
    _, loss_mask = mix(batch, ratio=0.15, seed=0, epoch=0)
    with torch.no_grad():
        base = learner.model_step(batch, "val_")
        batch["labels"][~loss_mask] = torch.rand(int((~loss_mask).sum()))
        assert learner.model_step(batch, "val_") == base


def test_overfitting_one_batch_cuts_the_excess_loss_tenfold(tiny32, data_dir):
    """Excess over the per-token optimum p* = a / (a + w(1-a)) must fall by 10x in 120 steps."""
    from specdec.learners.specdecpp.module import AcceptanceLearner, mix, weighted_bce

    torch.manual_seed(0)
    learner = AcceptanceLearner(tiny32, depth=2, mismatch_weight=6.0)
    batch = batch_of(data_dir, n=2)
    _, loss_mask = mix(batch, ratio=0.15, seed=0, epoch=0)  # what model_step uses at epoch 0
    a = batch["labels"][loss_mask].double()
    best = (a / (a + 6.0 * (1 - a))).clamp(1e-9, 1 - 1e-9)
    floor = float(weighted_bce(torch.stack([(1 - best).log(), best.log()], -1), a, 6.0))
    opt = torch.optim.Adam(learner.head.parameters(), lr=1e-2)
    losses = []
    for _ in range(120):
        opt.zero_grad()
        loss = learner.model_step(batch, "train_")
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] - floor < (losses[0] - floor) / 10, (losses[0], losses[-1], floor)


def test_checkpoint_and_export_give_the_trained_head_exactly(tiny32, data_dir, tmp_path):
    import lightning as L

    from specdec.learners.specdecpp.module import (
        AcceptanceDataModule,
        AcceptanceLearner,
        export_head,
    )

    learner = AcceptanceLearner(tiny32, depth=2, tie=True)
    ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=str(tmp_path / "ckpt"))
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=1,
        limit_train_batches=2,
        limit_val_batches=1,
        logger=False,
        callbacks=[ckpt],
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(learner, datamodule=AcceptanceDataModule(data_dir, batch_size=2))
    hidden = torch.randn(7, 32, generator=torch.Generator().manual_seed(1))
    want = learner.head.eval()(hidden)
    from_ckpt = head_from_checkpoint(ckpt.best_model_path)
    exported = load_head(export_head(learner, tmp_path, experiment="specdecpp_tiny"))
    assert exported.tie and len(list(exported.parameters())) == 4  # one shared block + output
    assert torch.equal(from_ckpt(hidden), want) and torch.equal(exported(hidden), want)


def test_fast_dev_run_of_the_tiny_experiment(compose, data_dir, tmp_path):
    from specdec.train import train

    cfg = compose(
        "train",
        [
            "+experiment=specdecpp_tiny",
            "trainer=debug",
            f"data_path={data_dir}",
            f"export.folder={tmp_path / 'head'}",
        ],
    )
    metrics = train(cfg)
    assert {"test/loss", "test/auroc", "test/kl", "test/bce", "test/ece"} <= set(metrics)
    assert load_head(tmp_path / "head").meta["experiment"] == "specdecpp_tiny"


def test_missing_head_names_the_experiment_that_trains_it(compose, tiny32, tmp_path):
    from hydra.errors import InstantiationException

    from specdec.bench.run.runner import build_method

    cfg = compose("eval", ["method=specdecpp", f"drafter.policy.head={tmp_path / 'nothing'}"])
    with pytest.raises(
        InstantiationException,
        match=r"no acceptance head"
        r".*\+experiment=specdecpp_tiny stage=data",
    ) as err:
        build_method(cfg, tiny32)
    assert isinstance(err.value.__cause__, FileNotFoundError)  # the entry points exit 2 on it


def test_head_for_another_draft_names_the_experiment(tmp_path):
    from specdec.drafters.policies import DraftState
    from specdec.drafters.specdecpp import SpecDecPP

    policy = SpecDecPP(
        str(save_head(AcceptanceHead(16, 1), tmp_path / "h")), experiment="specdecpp_smollm2"
    )
    policy.should_draft(DraftState(0, torch.ones(4) / 4, torch.zeros(32)))  # root: not scored
    with pytest.raises(ValueError, match=r"hidden size 16 .* 32.*\+experiment=specdecpp_smollm2"):
        policy.should_draft(DraftState(1, torch.ones(4) / 4, torch.zeros(32)))


def test_tied_head_shares_one_block_and_untied_does_not():
    assert len(list(AcceptanceHead(8, 3, tie=True).parameters())) == 4
    assert len(list(AcceptanceHead(8, 3).parameters())) == 8


def test_training_prompts_skip_eval_prompts_and_use_train_files_only(tmp_path):
    import json

    (tmp_path / "alpaca").mkdir()
    (tmp_path / "gsm8k").mkdir()
    rows = [
        {"instruction": "Say hi.", "input": ""},
        {"instruction": "Add", "input": "1 and 2"},
        {"instruction": "Say hi.", "input": ""},
    ]  # a duplicate
    (tmp_path / "alpaca" / "train_a.json").write_text(json.dumps(rows))
    (tmp_path / "alpaca" / "eagle_question.jsonl").write_text(
        json.dumps({"question_id": 0, "turns": ["Add\n\n1 and 2"]}) + "\n"
    )
    (tmp_path / "gsm8k" / "train.jsonl").write_text(json.dumps({"question": "2+2?"}) + "\n")
    (tmp_path / "gsm8k" / "test.jsonl").write_text(json.dumps({"question": "3+3?"}) + "\n")
    alpaca = acceptance_data.load_source({"name": "alpaca"}, tmp_path)
    gsm8k = acceptance_data.load_source({"name": "gsm8k"}, tmp_path)
    assert [t for _, t in alpaca] == ["Say hi."] and [t for _, t in gsm8k] == ["2+2?"]
    with pytest.raises(FileNotFoundError, match="data_gen.data_dir"):
        acceptance_data.load_source({"name": "gsm8k"}, tmp_path / "missing")


def test_batched_greedy_answers_equal_engine_answers_and_traced_prompts_are_skipped(
    tiny64, tmp_path
):
    from datasets import load_from_disk

    from specdec.data.prompts import encode_turn
    from specdec.data.traces import save_traces

    sources = [{"name": "synthetic", "limit": 12}]
    kw = {
        "sampling": {"temperature": 0.0},
        "max_new_tokens": 10,
        "val_fraction": 0.25,
        "test_fraction": 0.25,
    }
    one = acceptance_data.generate_acceptance_data(tiny64, str(tmp_path / "one"), sources, **kw)
    many = acceptance_data.generate_acceptance_data(
        tiny64, str(tmp_path / "many"), sources, batch_size=5, **kw
    )
    a, b = load_from_disk(str(one)), load_from_disk(str(many))
    for split in ("train", "validation", "test"):
        assert a[split]["prompt_id"] == b[split]["prompt_id"]
        assert a[split]["response_ids"] == b[split]["response_ids"], split
    # a prompt present in a distillation traces folder is left out
    text = acceptance_data.load_source(sources[0], tmp_path)[0][1]
    ids = encode_turn(tiny64.tokenizer, [{"role": "user", "content": text}], chat_template=True)
    traces = tmp_path / "traces"
    traces.mkdir()
    save_traces(
        traces / "traces_p0_00000.safetensors",
        [ids],
        [([3], torch.zeros(1, 2, dtype=torch.int32), torch.zeros(1, 2).half())],
    )
    cut = acceptance_data.generate_acceptance_data(
        tiny64, str(tmp_path / "cut"), sources, batch_size=5, exclude_traces=str(traces), **kw
    )
    kept = {pid for split in load_from_disk(str(cut)).values() for pid in split["prompt_id"]}
    assert "synthetic/0" not in kept and len(kept) == 11
