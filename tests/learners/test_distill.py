"""Draft distillation: the experiment runs on a tiny config, its export round-trips exactly and the
exported draft decodes; training prompts exclude eval prompts; bad draft files are refused."""

from __future__ import annotations

import json

import pytest
import torch

from specdec.data.traces import load_traces, make_traces
from specdec.data.training import training_prompts
from specdec.drafters import EmptyDrafter, ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.learners.draft_lm.trace_dataset import collate_traces
from specdec.lm import CachedLM
from specdec.models.reduced_draft import (
    EMBED_KEY,
    draft_from_checkpoint,
    init_from_target,
    load_draft,
    save_draft,
    tokenizer_sha256,
)
from specdec.models.tiny import tiny_pair
from specdec.sampling import Sampling, TorchCoins, warp
from specdec.verifiers import Tokenwise

EVAL_Q = "What is 3 + 4 apples?"


def _source(tmp_path):
    """A folder laid out like shared/data with a few training prompts and one eval prompt."""
    src = tmp_path / "shared"
    (src / "gsm8k").mkdir(parents=True)
    (src / "alpaca").mkdir()
    rows = [
        {"question": f"Tom has {i} pens and buys {i + 1}. How many?", "answer": f"{2 * i + 1}"}
        for i in range(5)
    ] + [{"question": EVAL_Q, "answer": "7"}]
    (src / "gsm8k" / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (src / "gsm8k" / "eagle_question.jsonl").write_text(
        json.dumps({"question_id": 0, "turns": [EVAL_Q]})
    )
    (src / "alpaca" / "train.json").write_text(
        json.dumps(
            [
                {"instruction": "Name a color.", "input": "", "output": "Blue."},
                {"instruction": "Add these.", "input": "2 and 2", "output": "4"},
            ]
        )
    )
    return src


def test_training_prompts_exclude_eval_prompts(tmp_path):
    prompts = training_prompts(_source(tmp_path))
    assert EVAL_Q not in prompts
    assert len(prompts) == 7 and "Add these.\n2 and 2" in prompts


def test_on_policy_traces_hold_the_targets_greedy_continuations(tmp_path):
    pair = tiny_pair()
    make_traces(
        pair,
        str(tmp_path / "t"),
        str(_source(tmp_path)),
        max_new=5,
        batch_size=3,
        limit=4,
        vocab_map_size=30,
        topk=4,
    )
    traces = load_traces(tmp_path / "t")
    assert len(traces) == 4
    for tr in traces:
        # greedy: each continuation token is the target's argmax, i.e. the first of its top-k
        assert torch.equal(tr.ids[tr.prompt_len :], tr.topk_ids[:, 0])
        assert tr.topk_ids.shape == (tr.ids.numel() - tr.prompt_len, 4)
        assert torch.all(tr.topk_logp[:, :-1] >= tr.topk_logp[:, 1:])


def test_first_chunk_skips_the_prompts_of_earlier_chunks(tmp_path):
    pair = tiny_pair()
    make_traces(
        pair,
        str(tmp_path / "t"),
        str(_source(tmp_path)),
        max_new=3,
        batch_size=3,
        limit=5,
        vocab_map_size=30,
        topk=2,
        first_chunk=1,
    )
    assert [p.name for p in sorted((tmp_path / "t").glob("traces*"))] == [
        "traces_p0_00001.safetensors"
    ]
    assert len(load_traces(tmp_path / "t")) == 2  # prompts 3 and 4 of 5


def test_experiment_debug_fit_writes_checkpoint_and_exact_export(tmp_path, compose):
    from specdec.train import train

    src = _source(tmp_path)
    overrides = [
        "+experiment=draft_lm",
        "model=tiny",
        "trainer=debug",
        f"train_data_dir={src}",
        f"draft_lm.traces_dir={tmp_path / 'traces'}",
        f"export.folder={tmp_path / 'draft'}",
        "data_gen.max_len=40",
        "data_gen.batch_size=4",
        "data_gen.vocab_map_size=40",
        "learner.layers=[1]",
        "datamodule.batch_size=4",
        "export.dtype=float32",
    ]
    train(compose("train", [*overrides, "stage=data"]))
    traces = load_traces(tmp_path / "traces")
    assert len(traces) == 7 and all(
        t.topk_ids.shape[0] == t.ids.numel() - t.prompt_len for t in traces
    )
    batch = collate_traces(traces[:3])
    assert batch["soft_ids"].shape[0] == int(batch["loss_mask"].sum())

    # fit (one debug step) and export; capture the learner through the export hook
    import specdec.learners.draft_lm.module as distill

    seen = {}
    real_export = distill.export_draft

    def spy(learner, out_dir, **kw):
        seen["net"] = learner.net
        return real_export(learner, out_dir, **kw)

    distill.export_draft = spy
    try:
        metrics = train(compose("train", overrides))
    finally:
        distill.export_draft = real_export
    assert "test/top1" in metrics and "test/accept_t1" in metrics
    pair = tiny_pair()
    draft = load_draft(tmp_path / "draft", pair.target, tokenizer=pair.tokenizer)
    trained = {k: v for k, v in seen["net"].state_dict().items() if "embed_tokens" not in k}
    loaded = {k: v for k, v in draft.state_dict().items() if "embed_tokens" not in k}
    assert trained.keys() == loaded.keys()
    for key, value in trained.items():
        assert torch.equal(value, loaded[key]), key  # float32 export: bit-exact round trip

    # the exported draft decodes through the engine, and greedy sps == ar
    sampling, ids = Sampling(temperature=0.0), pair.tokenizer.encode("Tom has 3 pens")
    outs = []
    for drafter in (EmptyDrafter(), ModelDrafter(CachedLM(draft, role="draft"), Fixed(3))):
        outs.append(
            generate(
                ids,
                CachedLM(pair.target),
                drafter,
                Tokenwise(),
                sampling=sampling,
                coins=TorchCoins(0),
                max_new_tokens=12,
            ).tokens
        )
    assert outs[0] == outs[1] and len(outs[0]) == 12


def test_checkpoint_from_fit_is_written(tmp_path, compose):
    """Without fast_dev_run a short fit writes a Lightning checkpoint holding the draft only."""
    from specdec.train import train

    src = _source(tmp_path)
    base = [
        "+experiment=draft_lm",
        "model=tiny",
        f"train_data_dir={src}",
        f"draft_lm.traces_dir={tmp_path / 'traces'}",
        f"export.folder={tmp_path / 'd'}",
        "data_gen.max_len=30",
        "data_gen.batch_size=8",
        "learner.layers=[0]",
        "datamodule.batch_size=4",
        "trainer.max_steps=2",
        "trainer.val_check_interval=1",
        "+trainer.limit_val_batches=1",
        "callbacks.progress_bar.refresh_rate=0",
    ]
    train(compose("train", [*base, "stage=data"]))
    train(compose("train", [*base, "logger=csv"]))  # as scripts/train_draft_cpu.sh fits
    assert (tmp_path / "checkpoints" / "last.ckpt").exists()
    # the export comes from the best checkpoint by the experiment's monitor (val/top1)
    (ckpt,) = (tmp_path / "checkpoints").glob("best-*.ckpt")
    metrics = (tmp_path / "csv" / "version_0" / "metrics.csv").read_text().splitlines()
    assert "val/loss" in metrics[0] and "test/loss" in metrics[0] and len(metrics) > 1
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    assert not any("embed_tokens" in k for k in state) and "net.lm_head.weight" in state
    # the best checkpoint rebuilds the exported draft (bf16 storage)
    pair = tiny_pair()
    rebuilt = draft_from_checkpoint(ckpt, pair.target, pair.tokenizer)
    shipped = load_draft(tmp_path / "d", pair.target, tokenizer=pair.tokenizer)
    for key, value in rebuilt.state_dict().items():
        if key == EMBED_KEY:
            continue
        want = value.to(torch.bfloat16).float() if value.is_floating_point() else value
        assert torch.equal(shipped.state_dict()[key], want), key


def test_bf16_export_round_trips_to_storage_precision(tmp_path):
    pair = tiny_pair()
    net = init_from_target(
        pair.target,
        torch.arange(0, 200, 3),
        layers=[0, 1],
        tokenizer_hash=tokenizer_sha256(pair.tokenizer),
    )
    save_draft(net, tmp_path, dtype=torch.bfloat16)
    back = load_draft(tmp_path, pair.target, tokenizer=pair.tokenizer)
    for key, value in net.state_dict().items():
        if key == EMBED_KEY:  # shared with the target, never exported
            assert back.get_input_embeddings() is pair.target.get_input_embeddings()
            continue
        want = value.to(torch.bfloat16).to(value.dtype) if value.is_floating_point() else value
        assert torch.equal(back.state_dict()[key], want), key


def test_reduced_vocab_q_is_a_distribution_with_zeros_outside_the_map():
    pair = tiny_pair()
    tmap = torch.arange(5, 120, 2)
    net = init_from_target(pair.target, tmap, layers=[0])
    lm = CachedLM(net, role="draft")
    assert lm.vocab_size == pair.target.config.vocab_size
    logits = lm.forward(torch.tensor([1, 2, 3])).logits  # [3, V]
    for temperature in (0.0, 1.0):
        q = warp(logits, Sampling(temperature=temperature))
        torch.testing.assert_close(q.sum(-1), torch.ones(3))
        outside = torch.ones(q.shape[-1], dtype=torch.bool)
        outside[tmap] = False
        assert torch.all(q[:, outside] == 0)


def test_draft_for_another_tokenizer_is_refused(tmp_path):
    pair = tiny_pair()
    net = init_from_target(pair.target, torch.arange(50), layers=[0], tokenizer_hash="0" * 64)
    save_draft(net, tmp_path)
    with pytest.raises(ValueError, match="another tokenizer"):
        load_draft(tmp_path, pair.target, tokenizer=pair.tokenizer)


def test_missing_or_corrupt_draft_names_file_and_command(tmp_path):
    pair = tiny_pair()
    with pytest.raises(FileNotFoundError, match=r"config\.json.*specdec\.train \+experiment"):
        load_draft(tmp_path / "nowhere", pair.target)
    net = init_from_target(pair.target, torch.arange(50), layers=[0])
    save_draft(net, tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match=r"corrupt.*specdec\.train \+experiment"):
        load_draft(tmp_path, pair.target)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"model\.safetensors is missing"):
        load_draft(tmp_path, pair.target)


def test_warm_start_keeps_the_shipped_drafts_weights_depth_and_token_map(tmp_path):
    from specdec.learners.draft_lm.module import DistillLearner

    pair = tiny_pair()
    tmap = torch.arange(3, 150, 4)
    net = init_from_target(
        pair.target, tmap, layers=[1, 0], tokenizer_hash=tokenizer_sha256(pair.tokenizer)
    )
    with torch.no_grad():
        net.lm_head.weight.add_(0.5)  # differs from anything init_from_target would build
    save_draft(net, tmp_path / "d", dtype=torch.float32)
    # no traces folder: a warm start takes the token map from the draft
    learner = DistillLearner(
        pair, str(tmp_path / "no_traces"), layers=[0], init_from=str(tmp_path / "d")
    )
    assert len(learner.net.model.layers) == 2 and torch.equal(learner.net.token_map, tmap)
    assert torch.equal(learner.t2d[tmap], torch.arange(tmap.numel()))
    assert int((learner.t2d >= 0).sum()) == tmap.numel()
    for key, value in net.state_dict().items():
        if key != EMBED_KEY:
            assert torch.equal(learner.net.state_dict()[key], value), key
    trainable = {n for n, p in learner.net.named_parameters() if p.requires_grad}
    assert "lm_head.weight" in trainable and not any("embed" in n for n in trainable)
