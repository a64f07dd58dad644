"""Verifiers: pure accept/resample rules ``verify(draft, p, coins) -> Verdict`` (see core)."""

from specdec.verifiers.blockwise import Blockwise
from specdec.verifiers.hsd import Hierarchical
from specdec.verifiers.rrs import RecursiveRejection
from specdec.verifiers.tokenwise import Tokenwise

__all__ = ["Blockwise", "Hierarchical", "RecursiveRejection", "Tokenwise"]
