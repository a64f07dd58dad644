"""Running acceptance estimates of draft nodes, per source: lookup matches and a draft model.

Under the point-mass tree rules (``rrs``, ``hsd``), a drafted node whose parent was accepted is
accepted with the target's probability of its token; the probability that a node is accepted is
the product of these along its path. A hybrid drafter (``drafters.hybrid``) ranks nodes of two
sources by estimates of it:

* **lookup** (``LookupRates``): a match continuation's node at depth ``d`` below a suffix match of
  ``L`` tokens gets ``prod_{j <= d} r(L, j)``, with ``r(L, j)`` the running rate at which such
  nodes were accepted when their parent was (a Beta(``prior * weight``, ``(1 - prior) *
  weight``) prior, counts discounted by ``discount`` per update): a long verbatim match that kept
  being accepted earns high estimates deep down its chain, a one-token match that failed low ones;
* **model** (``ModelCalibration``): a model node's own path probability ``p`` (its cumulative
  draft probability), scaled by ``k = (accepted + weight) / (predicted + weight)``, the running
  ratio of the model nodes accepted to the sum of their ``p`` (``min(1, k p)``; ``k`` corrects a
  draft that is over- or under-confident on this text).

Both estimates fall along a path (rates and ``p`` never exceed 1), so keeping the best nodes keeps
their ancestors. Match lengths are counted up to ``max_length`` (longer ones share its rates).
"""

from __future__ import annotations

from collections.abc import Sequence


class LookupRates:
    """Per (match length, depth) acceptance rates of lookup nodes, given their parent accepted.

    Args:
        max_length: match lengths above it share its rates.
        depth: the deepest lookup node.
        prior: the prior rate; weight: its pseudo-count; discount: per-update decay of counts.
    """

    def __init__(
        self,
        max_length: int,
        depth: int,
        prior: float = 0.5,
        weight: float = 2.0,
        discount: float = 0.98,
    ) -> None:
        self.max_length, self.depth = int(max_length), int(depth)
        self.prior, self.weight, self.discount = float(prior), float(weight), float(discount)
        shape = (self.max_length + 1, self.depth + 1)
        self.hits = [[0.0] * shape[1] for _ in range(shape[0])]  # [L][d]
        self.tries = [[0.0] * shape[1] for _ in range(shape[0])]  # [L][d]

    def _length(self, length: int) -> int:
        return max(1, min(int(length), self.max_length))

    def rate(self, length: int, depth: int) -> float:
        """``r(L, d)``: the smoothed rate of depth ``d`` nodes below a length-``L`` match."""
        row = self._length(length)
        d = min(max(depth, 1), self.depth)
        return (self.hits[row][d] + self.prior * self.weight) / (self.tries[row][d] + self.weight)

    def path(self, length: int, depth: int) -> list[float]:
        """Estimates of the nodes at depths ``1..depth`` of one match's chain."""
        out, prob = [], 1.0
        for d in range(1, depth + 1):
            prob *= self.rate(length, d)
            out.append(prob)
        return out

    def update(self, length: int, accepted: Sequence[bool]) -> None:
        """One chain's outcome: ``accepted[j]`` for its kept nodes at depth ``j + 1`` (a node is
        tried when its parent was accepted; the tries stop after the first rejection)."""
        row = self._length(length)
        for d in range(1, self.depth + 1):  # 1. decay every count of this match length
            self.hits[row][d] *= self.discount
            self.tries[row][d] *= self.discount
        for j, ok in enumerate(accepted[: self.depth]):  # 2. count the tried nodes
            self.tries[row][j + 1] += 1.0
            self.hits[row][j + 1] += float(ok)
            if not ok:
                break


class ModelCalibration:
    """The running ratio ``k`` of accepted model nodes to their predicted count.

    Args:
        weight: pseudo-count of the prior ``k = 1``; discount: per-update decay of the counts.
    """

    def __init__(self, weight: float = 2.0, discount: float = 0.98) -> None:
        self.weight, self.discount = float(weight), float(discount)
        self.accepted = self.predicted = 0.0

    @property
    def scale(self) -> float:
        return (self.accepted + self.weight) / (self.predicted + self.weight)

    def estimate(self, prob: float) -> float:
        """``min(1, k p)`` for a node of path probability ``p``."""
        return min(1.0, self.scale * float(prob))

    def update(self, predicted: float, accepted: int) -> None:
        """A step's model nodes: the sum of their ``p`` and how many were accepted."""
        self.accepted = self.discount * self.accepted + float(accepted)
        self.predicted = self.discount * self.predicted + float(predicted)
