"""Verifiers: pure accept/resample rules ``verify(draft, p, coins) -> Verdict`` (see ``specdec.core``)."""

from specdec.verifiers.tokenwise import Tokenwise

__all__ = ["Tokenwise"]
