"""Target features for feature drafters, on the tiny fp64 pair.

``CachedLM.forward(..., hidden_layers=...)`` returns ``[N, k, H]`` hidden states of the requested
layers; the engine hands the prompt's features to ``drafter.prefill`` and each step's kept nodes'
features to ``Context.target_features``; ``TargetView`` exposes the target's embedding and head;
``inputs_embeds`` feeds embeddings instead of ids. Every value is compared with a plain
transformers forward of the same tokens.
"""

from __future__ import annotations

import torch

from specdec.core import Context, Draft, TargetView
from specdec.drafters import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import Tokenwise

ATOL = 1e-10
LAYERS = (0, 1, -1)  # embeddings, after decoder layer 1, last (after the final norm)
GREEDY = Sampling(temperature=0.0)


def full_hidden(model, ids: list[int]) -> torch.Tensor:
    """``[T, k, H]`` hidden states of ``LAYERS`` from one plain forward of ``ids``."""
    with torch.inference_mode():
        states = model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    return torch.stack([states[i][0] for i in LAYERS], 1)


class FeatureProbe(ModelDrafter):
    """A chain drafter that declares target layers and keeps what the engine hands it."""

    target_layers = LAYERS

    def __init__(self, lm, policy):
        super().__init__(lm, policy)
        self.view: TargetView | None = None
        self.prefilled: torch.Tensor | None = None
        self.seen: list[tuple[list[int], torch.Tensor | None]] = []

    def attach(self, target: TargetView) -> None:
        self.view = target

    def prefill(self, prompt: torch.Tensor, features: torch.Tensor | None = None) -> None:
        super().prefill(prompt, features)
        self.prefilled = features

    def propose(self, ctx: Context) -> Draft:
        self.seen.append((ctx.tokens.tolist(), ctx.target_features))
        return super().propose(ctx)


def test_hidden_layers_of_chain_and_extend_equal_a_plain_forward(tiny64):
    lm = CachedLM(tiny64.target)
    ids = [5, 6, 7, 8, 9]
    out = lm.forward(torch.tensor(ids[:3]), hidden_layers=LAYERS)
    assert out.hidden.shape == (3, len(LAYERS), tiny64.target.config.hidden_size)
    grown = lm.extend(torch.tensor(ids[3:]), torch.tensor([2, 3]), hidden_layers=LAYERS)
    got = torch.cat([out.hidden, grown.hidden])  # [5, k, H]
    torch.testing.assert_close(got, full_hidden(tiny64.target, ids), atol=ATOL, rtol=0)
    assert lm.forward_log[-1].new_tokens == 2


def test_inputs_embeds_path_equals_the_token_path(tiny64):
    ids = torch.tensor([3, 14, 15, 92, 65])
    by_ids, by_embeds = CachedLM(tiny64.target), CachedLM(tiny64.target)
    a = by_ids.forward(ids[:3]).logits
    b = by_embeds.forward(ids[:3], inputs_embeds=by_embeds.embed(ids[:3])).logits
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    parent = torch.tensor([2, 2])  # two leaves below the last pending chain node
    a = by_ids.extend(ids[3:], parent).logits
    b = by_embeds.extend(ids[3:], parent, inputs_embeds=by_embeds.embed(ids[3:])).logits
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    by_ids.keep([0, 1, 2, 4]), by_embeds.keep([0, 1, 2, 4])
    assert by_embeds.ids == by_ids.ids == [3, 14, 15, 65]


def test_engine_hands_prompt_and_kept_features_to_the_drafter(tiny64):
    # The draft is the target itself, so greedy drafts are accepted and steps keep several nodes.
    target = CachedLM(tiny64.target)
    probe = FeatureProbe(CachedLM(tiny64.target, role="draft"), Fixed(3))
    prompt = tiny64.tokenizer.encode("Once upon a time")
    out = generate(
        prompt, target, probe, Tokenwise(), sampling=GREEDY, coins=TorchCoins(0), max_new_tokens=12
    )
    assert out.stats.accepted > 0, "the test needs accepted drafts"
    # 1. Prefill: features of every prompt token but the root.
    want = full_hidden(tiny64.target, prompt)[:-1]
    torch.testing.assert_close(probe.prefilled, want, atol=ATOL, rtol=0)
    # 2. Each later step: features of the previous step's root and accepted tokens, i.e. of the
    #    committed positions from the previous root up to (not including) the new root.
    assert probe.seen[0][1] is None
    for (before, _), (now, feats) in zip(probe.seen, probe.seen[1:]):
        want = full_hidden(tiny64.target, now)[len(before) - 1 : len(now) - 1]
        assert feats.shape == want.shape
        torch.testing.assert_close(feats, want, atol=ATOL, rtol=0)


def test_target_view_shares_embedding_and_head_read_only(tiny64):
    target = CachedLM(tiny64.target)
    probe = FeatureProbe(CachedLM(tiny64.draft, role="draft"), Fixed(2))
    generate(
        [5, 6, 7],
        target,
        probe,
        Tokenwise(),
        sampling=GREEDY,
        coins=TorchCoins(0),
        max_new_tokens=2,
    )
    view = probe.view
    assert isinstance(view, TargetView) and not hasattr(view, "forward")
    ids = torch.tensor([5, 6, 7])
    torch.testing.assert_close(view.embed(ids), tiny64.target.get_input_embeddings()(ids))
    with torch.inference_mode():
        plain = tiny64.target(input_ids=ids[None], output_hidden_states=True)
    torch.testing.assert_close(
        view.head(plain.hidden_states[-1][0]), plain.logits[0], atol=ATOL, rtol=0
    )
    cached = len(target.ids)
    view.embed(ids), view.head(plain.hidden_states[-1][0])
    assert len(target.ids) == cached, "the view must not touch the target's cache"
