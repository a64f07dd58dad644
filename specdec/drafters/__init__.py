"""Drafters propose token trees rooted at the last committed token (see ``specdec.core``)."""

from specdec.drafters.empty import EmptyDrafter
from specdec.drafters.lookup import PromptLookupDrafter
from specdec.drafters.model import ModelDrafter
from specdec.drafters.multi import MultiDraftDrafter
from specdec.drafters.tree import TopKTreeDrafter

__all__ = [
    "EmptyDrafter",
    "ModelDrafter",
    "MultiDraftDrafter",
    "PromptLookupDrafter",
    "TopKTreeDrafter",
]
