"""The real SmolLM2 pair: offline load, safetensors cache reuse, greedy sps == ar (slow)."""

from __future__ import annotations

import time

import pytest
import torch

from specdec.drafters import EmptyDrafter, ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.models.smollm2 import CACHE_NAME, load_target, smollm2_pair
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import Tokenwise

PROMPTS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May?",
    "Give three tips for staying healthy.",
    "Write a Python function that returns the n-th Fibonacci number.",
]


def _greedy(pair, prompt: str, gamma: int, max_new: int = 40) -> tuple[list[int], float]:
    sampling = Sampling(temperature=0.0)
    messages = [{"role": "user", "content": prompt}]
    text = pair.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = pair.tokenizer.encode(text, add_special_tokens=False)
    target = CachedLM(pair.target)
    if gamma == 0:
        drafter = EmptyDrafter()
    else:
        drafter = ModelDrafter(CachedLM(pair.draft, role="draft"), Fixed(gamma))
    out = generate(
        ids,
        target,
        drafter,
        Tokenwise(),
        sampling=sampling,
        coins=TorchCoins(0),
        max_new_tokens=max_new,
        stop_ids=[pair.tokenizer.eos_token_id],
    )
    accepted = out.stats.accepted / max(out.stats.drafted, 1)
    return out.tokens, accepted


@pytest.mark.slow
def test_cache_is_created_once_and_reused(tmp_path):
    t0 = time.perf_counter()
    first, tok = load_target(tmp_path)
    created = time.perf_counter() - t0
    stamp = (tmp_path / CACHE_NAME / "model.safetensors").stat().st_mtime_ns
    t0 = time.perf_counter()
    second, _ = load_target(tmp_path)
    reused = time.perf_counter() - t0
    assert (tmp_path / CACHE_NAME / "model.safetensors").stat().st_mtime_ns == stamp
    assert reused < created / 5, (reused, created)
    for (k, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert tok.eos_token == "<|im_end|>" and len(tok) == first.config.vocab_size


@pytest.mark.slow
@pytest.mark.parametrize(
    ("draft", "kernel"),
    [("trained", "auto"), ("truncated", "auto"), ("trained", "weight_stationary")],
)
def test_greedy_sps_equals_ar_on_smollm2(draft, kernel):
    pair = smollm2_pair(draft=draft, placement={"linear_kernel": kernel})
    assert pair.draft is not None
    rates = []
    for prompt in PROMPTS:
        ar, _ = _greedy(pair, prompt, 0)
        sps, rate = _greedy(pair, prompt, 4)
        assert sps == ar, prompt
        assert len(ar) > 10
        rates.append(rate)
    if draft == "trained":  # the trained draft must actually help (truncated accepts ~nothing)
        assert sum(rates) / len(rates) > 0.3, rates


def test_corrupt_cache_names_the_file_and_the_remedy(tmp_path):
    folder = tmp_path / CACHE_NAME
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match=r"model\.safetensors.*delete the folder"):
        load_target(tmp_path)


def test_unknown_draft_kind_is_refused():
    with pytest.raises(ValueError, match="unknown draft 'big'"):
        smollm2_pair(draft="big")
