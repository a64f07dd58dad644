"""EAGLE-3: training-time test ≡ decoding, errors, exactness of feature trees.

* ``ttt_mask`` against a per-position reference;
* the training unroll's step ``j`` at position ``t`` gives the logits the decoding path gives a
  depth-``j`` chain node below a verified prefix ending at ``t-j`` (fp64, tiny target);
* a drafter made for another target or a missing asset fails with the fix named;
* a feature-drafter test double building a deterministic tree from ``Context.target_features``
  is lossless under the point-mass tree rules at T = 1 (exact enumeration, TableLM pair).
Greedy identity of ``eagle3`` / ``eagle3_hsd`` with the shipped tiny asset is in test_methods.py.
"""

from __future__ import annotations

import pytest
import torch

from specdec.core import Context, Draft, Drafter, TargetView
from specdec.drafters import EmptyDrafter
from specdec.drafters.eagle3 import Eagle3Drafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.learners.eagle3.ttt import ttt_mask, unroll
from specdec.lm import CachedLM
from specdec.models.placement import Placement
from specdec.models.tiny import tiny_lm
from specdec.nets.eagle3.net import load_eagle3, new_eagle3, remap_head, save_eagle3
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.enumeration import enumerate_outcomes, max_abs_error
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Hierarchical, RecursiveRejection

F64 = Placement.cpu(torch.float64)  # the drafters' nets next to the float64 targets

LAYERS = (0, 1, 2)
ATOL = 1e-10


def test_ttt_mask_matches_a_per_position_reference():
    s = 6
    valid = torch.tensor([[True] * 5 + [False]])
    for step in range(4):
        allowed = ttt_mask(s, step, valid, torch.float64)[0, 0] == 0  # [S, (step+1)S]
        for t in range(s):
            want = {(0, p) for p in range(s) if p <= t - step and p < 5}
            want |= {(i, t - step + i) for i in range(1, step + 1) if 0 <= t - step + i < 5}
            got = {(int(c) // s, int(c) % s) for c in torch.nonzero(allowed[t]).flatten()}
            assert got == want, (step, t)


def _net(tiny64):
    vocab = tiny64.target.config.vocab_size
    torch.manual_seed(0)
    net = new_eagle3(tiny64.target, torch.arange(vocab), LAYERS, seed=3)
    return net.double().eval()


def test_training_unroll_equals_the_decoding_chain(tiny64):
    target, net = tiny64.target, _net(tiny64)
    ids = torch.tensor([5, 17, 3, 44, 9, 12, 30, 7, 21, 8])  # [T]
    with torch.inference_mode():
        states = target(input_ids=ids[None], output_hidden_states=True).hidden_states
        feats = torch.stack([states[i][0] for i in LAYERS], 1)  # [T, k, H]
        steps = unroll(
            net,
            target.get_input_embeddings(),
            ids[None],
            feats[None],
            torch.tensor([ids.numel()]),
            3,
        )  # 3 x [1, S, V]
    embed = target.get_input_embeddings()
    for t in (3, 6, 8):
        for j in range(3):
            # decoding: verified positions 0..t-j (position p reads f_p and x_{p+1}) ...
            lm = CachedLM(net.decoder, role="draft", vocab_size=target.config.vocab_size)
            n = t - j + 1
            with torch.inference_mode():
                z = net.inputs(embed(ids[1 : n + 1]), net.condition(feats[:n]))
            out = lm.forward(ids[1 : n + 1], inputs_embeds=z, hidden_layers=(-1,))
            hidden = out.hidden[-1, 0]
            # ... then j chain nodes, each conditioned on its parent's output
            for d in range(1, j + 1):
                tok = ids[n + d : n + d + 1]
                with torch.inference_mode():
                    z = net.inputs(embed(tok), hidden[None])
                grow = lm.forward if d == 1 else lm.extend
                out = grow(
                    tok,
                    torch.tensor([-1 if d == 1 else d - 2]),
                    inputs_embeds=z,
                    hidden_layers=(-1,),
                )
                hidden = out.hidden[-1, 0]
            torch.testing.assert_close(out.logits[-1], steps[j][0, t], atol=ATOL, rtol=0)


def test_drafter_refuses_another_target_and_a_missing_asset(tiny64, tmp_path):
    save_eagle3(_net(tiny64), tmp_path / "e3", target_vocab=tiny64.target.config.vocab_size)
    drafter = Eagle3Drafter(Fixed(3), str(tmp_path / "e3"))
    other = tiny_lm(
        tiny64.target.config.vocab_size, hidden=16, layers=2, heads=2, seed=0, dtype=torch.float64
    )
    with pytest.raises(ValueError, match="hidden size 32, but this target has 16"):
        drafter.attach(TargetView(CachedLM(other)))
    with pytest.raises(FileNotFoundError, match=r"\+experiment=eagle3_tiny"):
        Eagle3Drafter(Fixed(3), str(tmp_path / "none"), experiment="eagle3_tiny")


def test_remap_head_keeps_trained_rows_and_starts_new_tokens_from_the_target(tiny64, tmp_path):
    vocab = tiny64.target.config.vocab_size
    net = new_eagle3(tiny64.target, torch.arange(0, vocab, 2), LAYERS, seed=3).double()
    with torch.no_grad():  # "trained": rows no longer equal the target's
        net.decoder.lm_head.weight.mul_(3.0).add_(1.0)
    trained = net.decoder.lm_head.weight.detach().clone()  # rows of the even tokens
    new_map = torch.arange(0, vocab // 2)  # half the evens kept, odds new, high evens dropped
    counts = remap_head(net, tiny64.target, new_map)
    assert counts == {"kept": (vocab // 2 + 1) // 2, "new": vocab // 4}
    w, head = net.decoder.lm_head.weight, tiny64.target.lm_head.weight
    assert w.shape == (vocab // 2, head.shape[1]) and torch.equal(net.decoder.token_map, new_map)
    for row, tok in enumerate(new_map.tolist()):
        want = trained[tok // 2] if tok % 2 == 0 else head[tok]
        assert torch.equal(w[row], want.to(w.dtype)), tok
    # it saves and loads back as a drafter over the new map
    save_eagle3(net, tmp_path / "e3", target_vocab=vocab)
    back = load_eagle3(tmp_path / "e3", tiny64.target)
    assert torch.equal(back.decoder.token_map, new_map)
    assert back.meta["draft_vocab_size"] == vocab // 2


class FeatureTree(Drafter):
    """A feature-drafter double: a deterministic tree from the last verified position's features.

    The root gets the two tokens the features rank highest (the TableLM's "hidden state" is its
    logits); the first child gets one child, ranked by the same features shifted by its token.
    """

    target_layers = (0,)

    def prefill(self, prompt, features=None):
        self.last = features[-1, 0]  # [V]

    def propose(self, ctx: Context) -> Draft:
        if ctx.target_features is not None:
            self.last = ctx.target_features[-1, 0]
        top = torch.topk(self.last, 2).indices.tolist()
        child = int(torch.roll(self.last, top[0]).argmax())
        return Draft(torch.tensor([ctx.root, *top, child]), torch.tensor([-1, 0, 0, 1]), None)


@pytest.mark.parametrize("verifier", [RecursiveRejection(), Hierarchical()])
@pytest.mark.parametrize("seed", [0, 1])
def test_feature_tree_is_lossless_at_t1(verifier, seed):
    sampling, target, prompt, length = Sampling(temperature=1.0), TableLM(3, seed), [0, 1], 3

    def run(coins):
        out = generate(
            prompt,
            target,
            FeatureTree(),
            verifier,
            sampling=sampling,
            coins=coins,
            max_new_tokens=length,
        )
        return tuple(out.tokens)

    got = enumerate_outcomes(run)
    assert max_abs_error(got, ar_joint(target, prompt, length, sampling)) < 1e-12


def test_tiny_experiment_trains_exports_and_decodes(tmp_path, compose):
    from specdec.data.features import load_feature_traces
    from specdec.learners.eagle3.module import Eagle3Learner, collate
    from specdec.models.tiny import tiny_pair
    from specdec.nets.eagle3.net import load_eagle3
    from specdec.train import train

    overrides = [
        "+experiment=eagle3_tiny",
        f"eagle3.traces_dir={tmp_path / 'data'}",
        f"export.folder={tmp_path / 'e3'}",
        "data_gen.synthetic.prompts=16",
    ]
    train(compose("train", [*overrides, "stage=data"]))
    rows = load_feature_traces(tmp_path / "data")
    assert len(rows) == 16 and all(f.shape[0] == t.ids.numel() for t, f in rows)
    # the loss falls when the learner fits one batch (20 AdamW steps)
    pair = tiny_pair()
    learner = Eagle3Learner(pair, str(tmp_path / "data"), list(LAYERS), lr=3e-3)
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
    opt = torch.optim.AdamW([p for p in learner.net.parameters() if p.requires_grad], lr=3e-3)
    losses = []
    for _ in range(20):
        loss = learner._step(batch, "train")
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.7 * losses[0], losses
    # a debug fit exports a drafter that loads and decodes greedily like AR
    metrics = train(compose("train", [*overrides, "trainer=debug"]))
    assert "test/acc0" in metrics and "test/acc2" in metrics
    net = load_eagle3(tmp_path / "e3", pair.target)
    assert net.target_layers == LAYERS
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

    eagle = Eagle3Drafter(Fixed(3), str(tmp_path / "e3"))
    assert run(eagle) == run(EmptyDrafter())
    # a warm start onto a new token map of the traces folder (learner.remap_vocab)
    from safetensors.torch import save_file

    new_map = torch.arange(0, 2 * net.decoder.token_map.numel(), 2)
    save_file({"token_map": new_map}, str(tmp_path / "data" / "token_map.safetensors"))
    for remap in (False, True):
        warm = Eagle3Learner(
            pair,
            str(tmp_path / "data"),
            list(LAYERS),
            init_from=str(tmp_path / "e3"),
            remap_vocab=remap,
        )
        want = new_map if remap else net.decoder.token_map
        assert torch.equal(warm.net.decoder.token_map, want)
        assert torch.equal(warm.t2d[want], torch.arange(want.numel()))
        assert float(warm._step(batch, "train")) > 0


def test_cost_model_calibrates_a_decoder_fed_by_embeddings(tiny64, tmp_path):
    from specdec.bench.run.calibration import calibrate

    save_eagle3(_net(tiny64), tmp_path / "e3", target_vocab=tiny64.target.config.vocab_size)
    drafter = Eagle3Drafter(Fixed(3), str(tmp_path / "e3"), placement=F64)
    drafter.attach(TargetView(CachedLM(tiny64.target)))
    assert not drafter.lm.takes_ids
    table = calibrate(
        CachedLM(tiny64.target), drafter.lm, max_new=2, repeats=2, ref_context=8, far_context=16
    )
    assert set(table.times) == {"target", "draft"} and all(
        t > 0 for t in table.times["draft"].values()
    )
