"""``specdec_sdpa`` (``specdec.models.attention``): grouped-query attention without copied key/value
heads gives the same logits as transformers' ``sdpa`` for prefill, chain and tree forwards."""

from __future__ import annotations

import pytest
import torch
import transformers.integrations.sdpa_attention as hf_sdpa
from transformers import LlamaConfig, LlamaForCausalLM

from specdec.lm import CachedLM
from specdec.models.attention import NAME, use_cpu_attention
from specdec.models.exact import exact_float64
from specdec.models.tiny import tiny_pair


def _gqa_model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(cfg).double().eval()
    exact_float64(model)  # float64 norms: compared at 1e-12 (transformers' own run in float32)
    return model


def _run(model: LlamaForCausalLM) -> list[torch.Tensor]:
    lm, outs = CachedLM(model), []
    outs.append(lm.forward(torch.arange(1, 20)).logits)  # prefill [19, V]
    lm.keep(list(range(19)))
    outs.append(lm.forward(torch.arange(20, 25)).logits)  # chain verify (causal mask over cache)
    lm.crop(19)
    outs.append(lm.forward(torch.arange(30, 35), torch.tensor([-1, 0, 0, 2, 2])).logits)  # tree
    return outs


def test_same_logits_as_sdpa_without_repeating_kv(monkeypatch):
    model = _gqa_model()
    calls = []
    real = hf_sdpa.repeat_kv
    monkeypatch.setattr(hf_sdpa, "repeat_kv", lambda h, n: calls.append(n) or real(h, n))
    want = _run(model)
    assert calls, "transformers' sdpa repeats key/value heads under a mask"
    calls.clear()
    assert use_cpu_attention(model) and model.config._attn_implementation == NAME
    got = _run(model)
    assert not calls
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w, atol=1e-12, rtol=0)


def test_only_sdpa_models_switch_and_the_pair_records_it():
    model = _gqa_model()
    model.set_attn_implementation("eager")
    assert not use_cpu_attention(model) and model.config._attn_implementation == "eager"
    fast = tiny_pair(placement={"linear_kernel": "weight_stationary"})
    assert fast.describe()["attention"] == NAME
    assert tiny_pair(placement={"linear_kernel": "stock"}).describe()["attention"] == "sdpa"


@pytest.mark.parametrize("kernel", ["stock", "weight_stationary"])
def test_training_gradients_flow_through_either_attention(kernel):
    pair = tiny_pair(placement={"linear_kernel": kernel})
    ids = torch.arange(1, 12)[None]
    loss = pair.draft(input_ids=ids).logits.logsumexp(-1).mean()
    loss.backward()
    assert any(p.requires_grad for p in pair.draft.parameters())
    assert all(p.grad is not None for p in pair.draft.parameters() if p.requires_grad)
