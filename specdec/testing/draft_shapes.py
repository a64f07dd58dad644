"""The draft shapes the exact verifier tests run on: chains, point-mass chains, trees.

``make`` builds a TableLM target and a TableLM-backed drafter of one shape (fixed draft length
``gamma``); the exact tests enumerate every verifier over every shape.
"""

from __future__ import annotations

from collections.abc import Callable

from specdec.core import Drafter
from specdec.drafters import ModelDrafter, MultiDraftDrafter, TopKTreeDrafter
from specdec.drafters.policies import Fixed
from specdec.sampling import Sampling
from specdec.testing.table_lm import TableLM

PROMPT = [0, 1]


class PointMassChain(ModelDrafter):
    """A chain drafter whose proposals are verified as point masses (q = None)."""

    def propose(self, ctx):
        d = super().propose(ctx)
        return type(d)(d.tokens, d.parent, None)


SHAPES: dict[str, Callable[..., Drafter]] = {
    "chain": lambda lm, pol: ModelDrafter(lm, pol),
    "chain_point_mass": lambda lm, pol: PointMassChain(lm, pol),
    "multi2": lambda lm, pol: MultiDraftDrafter(lm, pol, num_drafts=2),
    "multi3": lambda lm, pol: MultiDraftDrafter(lm, pol, num_drafts=3),
    "topk_tree": lambda lm, pol: TopKTreeDrafter(lm, pol, branching=[2, 2, 1]),
}


def make(
    shape: str, vocab: int, gamma: int, temperature: float, seed: int
) -> tuple[TableLM, Drafter, Sampling]:
    """A TableLM target (``seed``), a drafter of ``shape`` on another TableLM, their sampling."""
    sampling = Sampling(temperature=temperature)
    target = TableLM(vocab, seed)
    drafter = SHAPES[shape](TableLM(vocab, seed + 1000, role="draft"), Fixed(gamma))
    return target, drafter, sampling
