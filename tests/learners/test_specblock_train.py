"""SpecBlock training (``learners/specblock/module.py``, ``losses.py``): labels, masks, losses,
tiny experiment.

* slot labels line up with ``x_{i+o+k+2}`` (plain-loop reference), the chain mask is a prefix AND;
* the per-slot unlock warm-up follows ``α_k = min(1, step / (U (k+1)))``;
* the rank loss prefers the right class and ignores masked slots;
* block 2 of the training unroll equals the decoding path's block 2 below a verified position
  (``BlockLM.chain``, fp64), and its valid-prefix keys are really hidden/visible;
* the loss falls when the learner fits one batch; a ``trainable=[rank_head]`` stage moves only the
  rank head (an unknown name fails listing the parts); the tiny experiment (data, debug fit, export)
  gives a drafter that loads and decodes greedily like AR.
"""

from __future__ import annotations

import pytest
import torch

from specdec.drafters.block_lm import BlockLM
from specdec.learners.specblock.losses import prefix_correct, rank_loss, slot_labels, unlock
from specdec.learners.specblock.unroll import unroll
from specdec.nets.specblock.net import new_specblock

LAYERS = (0, 1, 2)
K = 4


def test_slot_labels_follow_the_offset():
    b, t, k = 2, 9, 3
    lab_ids = torch.randint(0, 6, (b, t, k))
    lab_ids[0, :3] = -1  # prompt tokens carry no label
    lab_logp = torch.randn(b, t, k).log_softmax(-1)
    t2d = torch.tensor([0, 1, 2, -1, 3, 4])  # token 3 is outside the draft vocabulary
    for offset in (0, 2):
        top, p, has = slot_labels(lab_ids, lab_logp, t2d, offset, K)
        for r in range(b):
            for i in range(t - 1):
                for s in range(K):
                    j = i + offset + s + 2  # the token slot s predicts
                    want = (
                        [int(t2d[x]) if x >= 0 else -1 for x in lab_ids[r, j].tolist()]
                        if j < t
                        else [-1] * k
                    )
                    assert top[r, i, s].tolist() == want
                    assert bool(has[r, i, s]) == (want[0] >= 0)
                    if want[0] >= 0:
                        assert abs(float(p[r, i, s].sum()) - 1) < 1e-6


def test_chain_mask_is_a_prefix_and():
    correct = torch.tensor([[True, True, False, True], [False, True, True, True]])
    assert prefix_correct(correct).tolist() == [
        [True, True, True, False],
        [True, False, False, False],
    ]


def test_unlock_warm_up_phases_later_slots_in_later():
    assert unlock(0, 0, K).tolist() == [1.0] * K  # off
    torch.testing.assert_close(unlock(30, 60, K), torch.tensor([0.5, 0.25, 1 / 6, 0.125]))
    torch.testing.assert_close(unlock(150, 60, K), torch.tensor([1.0, 1.0, 150 / 180, 0.625]))
    assert unlock(240, 60, K).tolist() == [1.0] * K


def test_rank_loss_prefers_the_true_class_and_ignores_masked_slots():
    classes = torch.tensor([[[0, 2, 3, 1]]])  # [1, 1, K]
    right = torch.nn.functional.one_hot(classes, 4).float() * 5
    wrong = torch.nn.functional.one_hot((classes + 2) % 4, 4).float() * 5
    mask = torch.ones(1, 1, K)
    assert rank_loss(right, classes, mask, 10.0) < rank_loss(wrong, classes, mask, 10.0)
    half = mask.clone()
    half[..., 2:] = 0
    mixed = torch.cat([right[..., :2, :], wrong[..., 2:, :]], 2)
    torch.testing.assert_close(
        rank_loss(mixed, classes, half, 10.0), rank_loss(right, classes, half, 10.0)
    )


def _net(tiny64):
    vocab = tiny64.target.config.vocab_size
    return (
        new_specblock(
            tiny64.target, torch.arange(vocab), LAYERS, slots=K, layers=2, rank_hidden=8, seed=5
        )
        .double()
        .eval()
    )


def test_training_block2_equals_the_decoding_block2(tiny64):
    target, net = tiny64.target, _net(tiny64)
    ids = torch.tensor([[5, 17, 3, 44, 9, 12, 30, 7, 21, 8, 40, 2]])  # [1, T]
    embed = target.get_input_embeddings()
    with torch.no_grad():
        states = target(input_ids=ids, output_hidden_states=True).hidden_states
        feats = torch.stack([states[i] for i in LAYERS], 2)  # [1, T, k, H]
        for cut in (1, 3, 4):
            (_, b1), (offset, b2) = unroll(net, embed, ids, feats, [cut])
            for p in (0, 4, 6):
                # decoding: verified positions 0..p in the cache, one leaf from slot cut-1
                lm = BlockLM(net, target.config.vocab_size)
                lm.append(net.condition(feats[0, : p + 1]), embed(ids[0, 1 : p + 2]))
                leaf = ids[0, p + 1 + cut : p + 2 + cut]  # the true token slot cut-1 predicted
                out = lm.chain(b1.hidden[0, p, cut - 1][None], embed(leaf), p, torch.tensor([cut]))
                torch.testing.assert_close(out.logits[0, 0], b2.logits[0, p], atol=1e-10, rtol=0)
                torch.testing.assert_close(
                    out.rank_logits[0, 0], b2.rank_logits[0, p], atol=1e-10, rtol=0
                )


def test_the_valid_prefix_hides_block1_slots_past_the_cut(tiny64):
    target, net = tiny64.target, _net(tiny64)
    embed = target.get_input_embeddings()
    ids = torch.tensor([5, 17, 3, 44, 9, 12])
    with torch.inference_mode():  # the cache holds inference tensors
        states = target(input_ids=ids[None], output_hidden_states=True).hidden_states
        feats = torch.stack([states[i][0] for i in LAYERS], 1)  # [T, k, H]
        lm = BlockLM(net, target.config.vocab_size)
        b1 = lm.append(net.condition(feats[:4]), embed(ids[1:5]))
        cond, leaf = b1.hidden[0, -1, 1][None], embed(ids[5:6])  # position 3: append keeps the last

        def block2():
            return lm.chain(cond, leaf, 3, torch.tensor([2])).logits

        before = block2()
        for _, cv in lm.cache:  # block-1 slots 2, 3 of position 3: past the cut, unseen
            cv[:, :, 3 * K + 2 : 4 * K] += 1.0
        torch.testing.assert_close(block2(), before, atol=0, rtol=0)
        for _, cv in lm.cache:  # slot 1 is inside the valid prefix
            cv[:, :, 3 * K + 1] += 1.0
        assert (block2() - before).abs().max() > 1e-6


def test_tiny_experiment_trains_exports_and_decodes(tmp_path, compose):
    from specdec.data.features import load_feature_traces
    from specdec.drafters import EmptyDrafter
    from specdec.drafters.policies import Fixed
    from specdec.drafters.specblock import SpecBlockDrafter
    from specdec.engine import generate
    from specdec.learners.eagle3.module import collate
    from specdec.learners.specblock.module import SpecBlockLearner
    from specdec.lm import CachedLM
    from specdec.models.tiny import tiny_pair
    from specdec.nets.specblock.store import load_specblock
    from specdec.sampling import Sampling, TorchCoins
    from specdec.train import train
    from specdec.verifiers import RecursiveRejection

    overrides = [
        "+experiment=specblock_tiny",
        f"specblock.traces_dir={tmp_path / 'data'}",
        f"export.folder={tmp_path / 'sb'}",
        "data_gen.synthetic.prompts=16",
    ]
    train(compose("train", [*overrides, "stage=data"]))
    rows = load_feature_traces(tmp_path / "data")
    # the draft loss falls when the learner fits one batch (25 AdamW steps, 3 cut schedules).
    # The training objective itself is not monotone (the chain masks admit more positions as the
    # draft improves; the rank weights follow the predictions), so the test measures block 1's
    # slot-0 cross-entropy, which every position enters.
    pair = tiny_pair()
    learner = SpecBlockLearner(
        pair, str(tmp_path / "data"), list(LAYERS), blocks=2, rank_hidden=16, lr=3e-3
    )
    learner.log = lambda *args, **kwargs: None  # not attached to a Trainer
    batch = collate(
        [
            {
                "ids": t.ids,
                "feats": f,
                "plen": t.prompt_len,
                "topk_ids": t.topk_ids,
                "topk_logp": t.topk_logp,
            }
            for t, f in rows[:8]
        ]
    )

    def slot0_ce() -> float:
        with torch.no_grad():
            ((_, out),) = unroll(
                learner.net, pair.target.get_input_embeddings(), batch["ids"], batch["feats"], []
            )
            top, p, has = slot_labels(batch["lab_ids"], batch["lab_logp"], learner.t2d, 0, K)
            ce = -(p * out.logits.log_softmax(-1).gather(-1, top.clamp(min=0))).sum(-1)
            return float(ce[..., 0][has[..., 0]].mean())

    opt = torch.optim.AdamW(learner.net.parameters(), lr=3e-3)
    rank_before = learner.net.rank_head[0].weight.clone()
    first = slot0_ce()
    for step in range(25):
        loss = learner._step(batch, "train", torch.Generator().manual_seed(step % 3))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert slot0_ce() < 0.8 * first
    assert not torch.equal(learner.net.rank_head[0].weight, rank_before)  # the rank loss trains
    # a rank-head stage (trainable=[rank_head]) moves the rank head and leaves the draft alone
    stage = SpecBlockLearner(
        pair,
        str(tmp_path / "data"),
        list(LAYERS),
        blocks=1,
        rank_hidden=16,
        lr=3e-3,
        trainable=["rank_head"],
    )
    stage.log = lambda *args, **kwargs: None
    draft_before = {n: p.clone() for n, p in stage.net.named_parameters()}
    opt = stage.configure_optimizers()["optimizer"]
    for step in range(3):
        loss = stage._step(batch, "train", torch.Generator().manual_seed(step))
        opt.zero_grad()
        loss.backward()
        opt.step()
    moved = {n for n, p in stage.net.named_parameters() if not torch.equal(p, draft_before[n])}
    assert moved and all(n.startswith("rank_head") for n in moved), moved
    with pytest.raises(ValueError, match="rank_heads.*cond_proj"):
        SpecBlockLearner(pair, str(tmp_path / "data"), list(LAYERS), trainable=["rank_heads"])
    # a debug fit exports a drafter that loads and decodes greedily like AR
    metrics = train(compose("train", [*overrides, "trainer=debug"]))
    assert {"test/acc0", "test/acc3", "test/rank_acc"} <= set(metrics)
    net = load_specblock(tmp_path / "sb", pair.target)
    assert net.target_layers == LAYERS and net.slots == K
    greedy, prompt = Sampling(temperature=0.0), pair.tokenizer.encode("hello")

    def run(drafter):
        return generate(
            prompt,
            CachedLM(pair.target),
            drafter,
            RecursiveRejection(),
            sampling=greedy,
            coins=TorchCoins(0),
            max_new_tokens=12,
        ).tokens

    drafter = SpecBlockDrafter(Fixed(6), str(tmp_path / "sb"), max_blocks=2)
    assert run(drafter) == run(EmptyDrafter())
