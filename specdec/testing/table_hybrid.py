"""A hybrid drafter (``drafters.hybrid``) over table models, for its exact tests: a SpecBlock
table net with prompt lookup, and a bigram target whose greedy chain a prompt can repeat."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import torch

from specdec.core import Verifier
from specdec.drafters.hybrid import HybridDrafter
from specdec.drafters.lookup import PromptLookupDrafter
from specdec.drafters.policies import Fixed
from specdec.drafters.specblock import SpecBlockDrafter
from specdec.engine import generate
from specdec.models.placement import Placement
from specdec.sampling import Sampling
from specdec.testing.enumeration import enumerate_outcomes
from specdec.testing.specblock_table import save_table_specblock
from specdec.testing.table_lm import TableLM


def table_hybrid(folder: Path, vocab: int, **kw: Any) -> HybridDrafter:
    """The hybrid of a SpecBlock table net (saved under ``folder``) and two-branch lookup, depth
    3, in float64; ``kw`` overrides the hybrid's arguments."""
    path = save_table_specblock(folder / "sb", vocab)
    f64 = Placement.cpu(torch.float64)
    model = functools.partial(
        SpecBlockDrafter, path=path, widths=(1, 2, 2, 0), root_width=2, total_tokens=9
    )
    lookup = functools.partial(PromptLookupDrafter, branches=2, min_ngram=1, max_ngram=2)
    return HybridDrafter(
        Fixed(3), model=model, lookup=lookup, placement=f64, **{"lookup_depth": 3, **kw}
    )


class BigramTable(TableLM):
    """A TableLM whose logits read the last token only, so that its greedy chain repeats and a
    prompt made of it gives lookup matches the target accepts (a plain TableLM reads the whole
    prefix: a match's continuation would be a random guess)."""

    def logits(self, context: tuple[int, ...]) -> torch.Tensor:
        return super().logits(tuple(context[-1:]))


def repeating_prompt(target: TableLM, length: int = 5, again: int = 2) -> list[int]:
    """The target's greedy chain from token 0 (``length + 1`` tokens), then its first ``again``
    tokens once more: the suffix matches the chain's start."""
    chain = [0]
    for _ in range(length):
        chain.append(int(target.logits((chain[-1],)).argmax()))
    return chain + chain[:again]


def outcomes_and_counters(
    prompt: list[int],
    target: TableLM,
    drafter: HybridDrafter,
    verifier: Verifier,
    sampling: Sampling,
    length: int,
) -> tuple[dict, dict[str, int]]:
    """The exact distribution of ``length`` new tokens decoded through the engine (every random
    path enumerated) and the drafter's counters summed over those paths."""
    seen: dict[str, int] = {}

    def run(coins) -> tuple[int, ...]:
        out = generate(
            prompt, target, drafter, verifier, sampling=sampling, coins=coins, max_new_tokens=length
        )
        for k, v in out.stats.counters.items():
            seen[k] = seen.get(k, 0) + v
        return tuple(out.tokens)

    return enumerate_outcomes(run), seen
