"""Simulated ranks of a data-parallel eval, run one after another in one process."""

from __future__ import annotations

from specdec.bench.run.ranks import Ranks


class InProcessRanks(Ranks):
    """A rank of a simulated run: the ranks run one after another, so meetings are no-ops."""

    def start(self, device: str, timeout_s: float) -> None:
        pass

    def barrier(self, what: str, timeout_s: float) -> None:
        pass

    def broadcast(self, obj: object) -> object:
        return obj
