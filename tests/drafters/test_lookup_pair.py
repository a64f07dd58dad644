"""Prompt lookup (``specdec.drafters.lookup``) on the tiny pair and through the eval: greedy = AR on
the tiny fp64 pair (chain and tree), the ``method=pld`` presets through the eval runner with their
counters, and a preset on a pair without a draft model. Match semantics and the exact tests:
``test_lookup.py``.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from specdec.bench.run.method import build_method, run_prompt
from specdec.bench.run.runner import run
from specdec.data.prompts import Prompt
from specdec.drafters import EmptyDrafter, PromptLookupDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import RecursiveRejection, Tokenwise

TEXTS = ("the cat sat on the mat. the cat sat on the mat. the cat", "1 2 3 1 2 3 1 2 3 1 2")


@pytest.mark.parametrize("branches", [1, 3], ids=["chain", "tree"])
def test_greedy_lookup_emits_ar_tokens_on_the_tiny_fp64_pair(tiny64, branches):
    sampling = Sampling(temperature=0.0)
    verifier = RecursiveRejection() if branches > 1 else Tokenwise()
    for text in TEXTS:
        ids = tiny64.tokenizer.encode(text)
        runs = [
            generate(
                ids,
                CachedLM(tiny64.target),
                drafter,
                verifier,
                sampling=sampling,
                coins=TorchCoins(0),
                max_new_tokens=24,
            )
            for drafter in (EmptyDrafter(), PromptLookupDrafter(Fixed(6), branches=branches))
        ]
        assert runs[1].tokens == runs[0].tokens, text
        c = runs[1].stats.counters
        assert c["lookup_hits"] > 0 and c["lookup_tokens"] >= c["lookup_hits"]
        assert c["lookup_hits"] + c.get("lookup_misses", 0) == runs[1].stats.target_forwards
        assert runs[1].stats.draft_forwards == 0


@pytest.mark.parametrize("method", ["pld", "pld_tree"])
def test_the_presets_run_through_the_eval_runner(compose, tmp_path, method):
    cfg = compose(
        "eval",
        [
            f"method={method}",
            "cost_model=false",
            "limit=2",
            "max_new_tokens=8",
            "warmup=0",
            "progress=false",
        ],
    )
    assert cfg.drafter.policy.gamma >= 1 and cfg.drafter.branches == (3 if method != "pld" else 1)
    summary = run(cfg)
    lines = (tmp_path / "records" / "tiny.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    assert len(records) == 2
    for r in records:
        c = r["counters"]
        assert c.get("lookup_hits", 0) + c.get("lookup_misses", 0) == r["target_forwards"]
        assert r["draft_forwards"] == 0
    total = summary["overall"]["counters"]
    assert total["lookup_hits"] == sum(r["counters"].get("lookup_hits", 0) for r in records) > 0
    assert total["lookup_tokens"] >= total["lookup_hits"]


def test_a_preset_runs_on_a_pair_without_a_draft(compose, tiny64):
    cfg = compose("eval", ["method=pld_tree"])
    pair = dataclasses.replace(tiny64, draft=None, info={})
    method = build_method(cfg, pair)
    prompt = Prompt(id="p", dataset="d", category="c", turns=("abc abc abc ab",))
    answer = run_prompt(prompt, pair, method, seed=0, max_new_tokens=6, chat_template=False)
    assert sum(len(t) for t in answer.output_ids) > 0
    assert answer.stats.counters.get("lookup_hits", 0) > 0
