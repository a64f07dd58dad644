"""Feature drafters' trees are pinned: the candidate-tree refactor changed none.

Every draft the EAGLE-3 and SpecBlock drafters (and the SpecBlock bandit) propose on the tiny fp64
pair with the shipped tiny assets -- its tokens and parents, step by step -- and the generated
tokens are hashed per setting (several ``topk``/``total_tokens``/widths/blocks settings, three
prompts, greedy and sampled). The digests were recorded at 934fe81, before both drafters' trees
moved onto ``drafters.candidates``; a digest differing means a tree differs (same tokens, same
parents, same node order required). Deterministic: fp64 on the CPU, fixed coins, the bandit priced
by a cost model (not by measured time).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from specdec.bench.run.runner import build_method
from specdec.engine import generate
from specdec.models.tiny import tiny_pair
from specdec.sampling import TorchCoins

PROMPTS = ("The quick brown fox", "Once upon a time", "def add(a, b):")
COSTS = "drafter.costs={target:[0.01,0.002],draft:[0.002,0.0005]}"
SETTINGS = {
    "eagle3": ["method=eagle3"],
    "eagle3_k3_n8": ["method=eagle3", "drafter.topk=3", "drafter.total_tokens=8"],
    "eagle3_k1_n3": ["method=eagle3", "drafter.topk=1", "drafter.total_tokens=3"],
    "eagle3_k4_n12_d3": [
        "method=eagle3",
        "drafter.topk=4",
        "drafter.total_tokens=12",
        "drafter.policy.gamma=3",
    ],
    "eagle3_hsd": ["method=eagle3_hsd"],
    "specblock": ["method=specblock"],
    "specblock_b2": [
        "method=specblock",
        "drafter.max_blocks=2",
        "drafter.total_tokens=16",
        "drafter.beam=3",
        "drafter.widths=[1,2,3,2]",
    ],
    "specblock_w": [
        "method=specblock",
        "drafter.root_width=null",
        "drafter.widths=[2,2,1,3]",
        "drafter.total_tokens=5",
    ],
    "specblock_bandit": ["method=specblock_bandit", COSTS, "drafter.explore=0.3"],
    "specblock_bandit_b2": [
        "method=specblock_bandit",
        COSTS,
        "drafter.explore=0.3",
        "drafter.widths=[1,2,2,2]",
        "drafter.max_blocks=2",
        "drafter.total_tokens=12",
    ],
}
PINNED = {  # name: (digest, drafted nodes), recorded at 934fe81
    "eagle3": ("398d1435778d7444", 524),
    "eagle3_hsd": ("5fbfcade2d2f11a3", 532),
    "eagle3_k1_n3": ("192edb30532cf077", 393),
    "eagle3_k3_n8": ("30057287cc9feb3f", 1034),
    "eagle3_k4_n12_d3": ("070dc831dda2bee5", 1488),
    "specblock": ("03581f3e6dd9a4d8", 393),
    "specblock_b2": ("844434b34a56a07a", 1922),
    "specblock_bandit": ("9fa80f8bf3f048d1", 107),
    "specblock_bandit_b2": ("b829ca0861b9c824", 168),
    "specblock_w": ("296397a50cfe692c", 629),
}


@pytest.fixture(scope="module")
def pair():
    return tiny_pair(placement={"dtype": "float64"})


def tree_digest(compose, pair, overrides: list[str]) -> tuple[str, int]:
    """sha256 of every proposed draft (tokens, parents) and the generated tokens; nodes drafted."""
    seen: list = []
    for temperature in (0, 1):
        cfg = compose(
            "eval",
            [*overrides, f"sampling.temperature={temperature}", "model.placement.dtype=float64"],
        )
        m = build_method(cfg, pair)
        propose = m.drafter.propose

        def record(ctx, propose=propose):
            draft = propose(ctx)
            seen.append([draft.tokens.tolist(), draft.parent.tolist()])
            return draft

        m.drafter.propose = record
        for seed, text in enumerate(PROMPTS):
            out = generate(
                pair.tokenizer.encode(text),
                m.target,
                m.drafter,
                m.verifier,
                sampling=m.sampling,
                coins=TorchCoins(seed),
                max_new_tokens=24,
            )
            seen.append(out.tokens)
    nodes = sum(len(s[0]) - 1 for s in seen if len(s) == 2 and isinstance(s[0], list))
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()[:16], nodes


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_feature_drafter_trees_are_unchanged(compose, pair, name):
    got = tree_digest(compose, pair, SETTINGS[name])
    assert got == PINNED[name], f"{name}: drafts differ from those pinned at 934fe81"
