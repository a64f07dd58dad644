"""Exact losslessness of SpS with every adaptive draft-length policy, through the whole loop.

A policy looks only at the draft side, so the output law must stay the target's autoregressive
joint (to 1e-12) whatever lengths it picks; the drafter's stop-id cut is covered too. Each case
also asserts that the policy really varied the draft length, so the test cannot pass vacuously.
"""

from __future__ import annotations

import pytest
import torch

from specdec.drafters import ModelDrafter
from specdec.drafters.policies import AdaEDL, Heuristic
from specdec.drafters.specdecpp import SpecDecPP
from specdec.engine import generate
from specdec.nets.specdecpp.head import AcceptanceHead, save_head
from specdec.sampling import Sampling
from specdec.testing.enumeration import enumerate_outcomes, max_abs_error, truncate_at_stop
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Tokenwise

PROMPT = [0, 1]
VOCAB = 2


def random_head_dir(tmp_path, hidden: int, seed: int) -> str:
    """A small fixed random acceptance head (TableLM's hidden states are its logits, size V)."""
    gen = torch.Generator().manual_seed(seed)
    head = AcceptanceHead(hidden, depth=1)
    with torch.no_grad():
        for p in head.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 2.0)
    return str(save_head(head, tmp_path / "head", experiment="test"))


def make_policy(name: str, tmp_path, seed: int):
    if name == "heuristic":
        return Heuristic(initial=1, max_len=3)
    if name == "adaedl":
        return AdaEDL(threshold=0.7, entropy_scale=1.0, min_len=1, max_len=3, ema=0.5)
    return SpecDecPP(random_head_dir(tmp_path, VOCAB, seed), threshold=0.4, min_len=1, max_len=3)


@pytest.mark.parametrize("stop_ids", [(), (1,)], ids=["no-stop", "stop-id"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("policy_name", ["heuristic", "adaedl", "specdecpp"])
def test_adaptive_policies_keep_sps_lossless(policy_name, temperature, stop_ids, tmp_path):
    # greedy runs have one path each, so they use more tables to see the lengths vary
    seeds = range(24) if temperature == 0 else (3,)
    # SpecDec++ drafts >= 2 tokens a step here, so 4 tokens already span several steps (and its
    # enumeration grows fastest); the others need 5 to show different lengths
    length = 4 if policy_name == "specdecpp" else 5
    sampling = Sampling(temperature=temperature)
    lengths: set[int] = set()
    for seed in seeds:
        target = TableLM(VOCAB, seed)
        policy = make_policy(policy_name, tmp_path / str(seed), seed)
        drafter = ModelDrafter(TableLM(VOCAB, seed + 1000, role="draft"), policy)

        def run(coins, target=target, drafter=drafter):
            out = generate(
                PROMPT,
                target,
                drafter,
                Tokenwise(),
                sampling=sampling,
                coins=coins,
                max_new_tokens=length,
                stop_ids=stop_ids,
            )
            lengths.update(out.stats.drafted_per_step)
            return tuple(out.tokens)

        got = enumerate_outcomes(run)
        want = truncate_at_stop(ar_joint(target, PROMPT, length, sampling), set(stop_ids))
        assert abs(sum(got.values()) - 1.0) < 1e-12
        assert max_abs_error(got, want) <= 1e-12, f"seed {seed}"
    assert len(lengths - {0}) >= 2, f"{policy_name} never varied the draft length: {lengths}"
