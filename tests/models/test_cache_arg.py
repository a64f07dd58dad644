"""The KV cache goes to each model under the keyword its forward takes (models/cache_arg.py):
transformers' rename of ``past_key_values`` to ``cache`` must not warn on every run, and the
project's reduced-vocabulary draft follows the same rule."""

from __future__ import annotations

import inspect
import warnings

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from specdec.lm import CachedLM
from specdec.models.cache_arg import cache_kwarg
from specdec.models.reduced_draft import ReducedVocabDraft


def _no_cache_warnings(lm: CachedLM) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*past_key_values.*")
        first = lm.forward(torch.tensor([3, 4, 5])).logits  # [3, V]
        lm.keep([0, 1, 2])
        return torch.cat([first, lm.forward(torch.tensor([6, 7])).logits])  # [5, V]


def test_cached_lm_passes_the_cache_under_the_models_own_name(tiny64):
    takes = "cache" in inspect.signature(LlamaForCausalLM.forward).parameters
    assert cache_kwarg(tiny64.target) == ("cache" if takes else "past_key_values")
    got = _no_cache_warnings(CachedLM(tiny64.target))
    with torch.inference_mode():
        full = tiny64.target(input_ids=torch.tensor([[3, 4, 5, 6, 7]])).logits[0]  # [5, V]
    torch.testing.assert_close(got, full, atol=1e-10, rtol=0)


def test_reduced_vocab_draft_uses_the_cache_it_is_given():
    config = LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    config.draft_vocab_size = 12
    torch.manual_seed(0)
    net = ReducedVocabDraft(config).double().eval()
    got = _no_cache_warnings(CachedLM(net))  # incremental: the second call reads the cache
    with torch.inference_mode():
        full = net(input_ids=torch.tensor([[3, 4, 5, 6, 7]])).logits[0]  # [5, 40]
    torch.testing.assert_close(got, full, atol=1e-10, rtol=0)
    assert bool(torch.isinf(got[:, 12:]).all())  # outside the map
