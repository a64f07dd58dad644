"""Greedy token identity with ``ar`` on the real SmolLM2 pair for the shipped presets (slow).

The shipped EAGLE-3 head (``specdec/assets/eagle3/smollm2``) and SpecBlock
drafter (``specdec/assets/specblock/smollm2``, alone and under the serving-time bandit) drafting
trees, and the background-worker method ``pearl``, must leave greedy output unchanged on the real
pair.
Each preset is built exactly as ``python -m specdec.eval method=<name>`` builds it.
"""

from __future__ import annotations

import pytest

from specdec.bench.run.method import build_method
from specdec.data.prompts import encode_turn
from specdec.engine import generate
from specdec.sampling import TorchCoins

PROMPTS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May?",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Explain in two sentences why the sky is blue.",
]


@pytest.fixture(scope="module")
def smollm2(request):
    from specdec.models.smollm2 import smollm2_pair

    return smollm2_pair(draft="trained")


def _run(compose, pair, method: str) -> tuple[list[list[int]], float]:
    """Greedy outputs on PROMPTS and tau (new tokens per target forward)."""
    cfg = compose("eval", ["model=smollm2", f"method={method}", "sampling.temperature=0"])
    built = build_method(cfg, pair)
    outs, new, steps = [], 0, 0
    for i, text in enumerate(PROMPTS):
        ids = encode_turn(pair.tokenizer, [{"role": "user", "content": text}], chat_template=True)
        out = generate(
            ids,
            built.target,
            built.drafter,
            built.verifier,
            sampling=built.sampling,
            coins=TorchCoins(i),
            max_new_tokens=48,
            stop_ids=[pair.tokenizer.eos_token_id],
        )
        outs.append(out.tokens)
        new, steps = new + out.stats.new_tokens, steps + len(out.stats.accepted_per_step)
    return outs, new / steps  # tau: new tokens per target forward


@pytest.mark.slow
# tau floors below what the shipped drafts reach (eagle3 v3 1.80, specblock 1.71,
# specblock_bandit 1.55, pearl 1.13 on these prompts; PEARL's pre-verify steps propose the root
# alone, the bandit's skip steps too) and above a silent no-op's 1.0
@pytest.mark.parametrize(
    ("method", "min_tau"),
    [("eagle3", 1.5), ("specblock", 1.5), ("specblock_bandit", 1.3), ("pearl", 1.05)],
)
def test_greedy_preset_equals_ar_on_smollm2(compose, smollm2, method, min_tau):
    ar, _ = _run(compose, smollm2, "ar")
    out, tau = _run(compose, smollm2, method)
    for prompt, a, b in zip(PROMPTS, ar, out, strict=True):
        assert len(a) > 10, prompt
        assert b == a, prompt
    assert tau > min_tau, tau  # the shipped drafts must actually be accepted (not a silent no-op)
