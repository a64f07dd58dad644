"""NodeBudget: how many draft nodes a tree drafter sends to verification, fixed or chosen by cost.

A tree drafter grows more candidates than it verifies and keeps the ``n`` best (EAGLE-2, Li et al.
2024, arXiv 2406.16858: the ``total_tokens`` best by score). With a per-node estimate ``a_i`` of
the probability that node ``i``'s path is accepted, sorted so that ``a_1 >= a_2 >= ...`` (and every
node after its ancestors), keeping the first ``n`` emits in expectation

    E(n) = 1 + sum_{i <= n} a_i        (accepted nodes + the recovered or bonus token)

tokens (at most one node per depth is accepted, so the indicators add up). The step costs the
drafting already done, ``D`` seconds, plus one target forward of ``n + 1`` tokens (the root too)
at the context ``c``: ``V(n + 1, c)``. The cost rule keeps

    n* = argmax_{0 <= n <= max_nodes} E(n) / (D + V(n + 1, c))

(the ratio is the step's expected tokens per second; ties: the smaller ``n``). ``V`` comes from a
calibrated cost table (``VerifyCost``: any object with ``cost(role, new_tokens, context)``, e.g.
the eval's ``CostTable``, given in the drafter's config); the ``a_i`` come from the drafter's
running acceptance (``drafters.acceptance``). On a CPU where verifying 8 tokens costs ~1.2x one,
``V`` is nearly flat and ``n*`` keeps every node whose ``a_i`` is not tiny; on an accelerator-like
table with a steep ``V`` it keeps only confident nodes, and none (an AR step) when even the best
node does not pay for its verification.

The static rule (``mode="static"``) keeps ``total`` nodes every step, whatever the estimates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from specdec.errors import BadInput

MODES = ("static", "cost")


@runtime_checkable
class VerifyCost(Protocol):
    """Seconds of one forward of ``new_tokens`` tokens by ``role`` after ``context`` tokens."""

    def cost(self, role: str, new_tokens: int, context: int) -> float: ...


def best_count(accept: Sequence[float], verify: Sequence[float], draft_s: float) -> int:
    """``n`` maximising ``(1 + sum(accept[:n])) / (draft_s + verify[n])`` (ties: the smallest).

    Args:
        accept: per-node acceptance estimates in the order nodes would be kept.
        verify: ``verify[n]``: seconds to verify ``n`` kept nodes plus the root
            (``len(verify) == len(accept) + 1``).
        draft_s: seconds already spent drafting this step.
    """
    assert len(verify) == len(accept) + 1, (len(verify), len(accept))
    best_n, best_rate, tokens = 0, -1.0, 1.0
    for n, seconds in enumerate(verify):
        # 1. tokens emitted in expectation when the first n nodes are kept
        if n > 0:
            tokens += max(0.0, float(accept[n - 1]))
        rate = tokens / max(draft_s + float(seconds), 1e-12)
        if rate > best_rate * (1 + 1e-12):
            best_n, best_rate = n, rate
    return best_n


class NodeBudget:
    """The number of candidates a step keeps: ``total`` (static) or chosen by cost.

    Args:
        mode: ``static`` (keep ``total``) or ``cost`` (keep ``n*`` of the module docstring, at
            most ``max_nodes``).
        total: nodes kept by the static rule.
        max_nodes: the most nodes the cost rule may keep.
        costs: the verify cost table (needed by ``cost``; ``role`` forwards priced).
        role: the role whose forwards verify (the target's).
    """

    def __init__(
        self,
        mode: str = "static",
        total: int = 8,
        max_nodes: int = 16,
        costs: VerifyCost | None = None,
        role: str = "target",
    ) -> None:
        if mode not in MODES:
            raise BadInput(f"drafter.budget must be one of {list(MODES)}, got {mode!r}")
        if total < 1 or max_nodes < 1:
            raise BadInput(
                f"drafter.total_tokens and drafter.max_tokens must be >= 1, got "
                f"{total} and {max_nodes}"
            )
        if mode == "cost" and not isinstance(costs, VerifyCost):
            raise BadInput(
                "drafter.budget=cost needs a verify cost table: set drafter.costs to a "
                "table (a run's summary.json cost_table under _target_: "
                "specdec.bench.pricing.CostTable.from_dict), or drafter.budget=static"
            )
        self.mode, self.total, self.max_nodes = mode, int(total), int(max_nodes)
        self.costs, self.role = costs, role

    @property
    def largest(self) -> int:
        """The most nodes a step can keep."""
        return self.total if self.mode == "static" else self.max_nodes

    def verify_seconds(self, nodes: int, context: int) -> list[float]:
        """``[V(1, c), ..., V(nodes + 1, c)]``: verifying 0..``nodes`` kept nodes plus the root."""
        return [self.costs.cost(self.role, n + 1, context) for n in range(nodes + 1)]

    def choose(self, accept: Sequence[float], context: int, draft_s: float = 0.0) -> int:
        """Nodes to keep of candidates with estimates ``accept`` (in keeping order), at target
        context ``context`` after ``draft_s`` seconds of drafting."""
        if self.mode == "static":
            return min(self.total, len(accept))
        accept = list(accept[: self.max_nodes])
        return best_count(accept, self.verify_seconds(len(accept), context), draft_s)
