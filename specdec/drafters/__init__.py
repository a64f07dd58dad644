"""Drafters propose token trees rooted at the last committed token (see ``specdec.core``)."""

from specdec.drafters.empty import EmptyDrafter
from specdec.drafters.model import ModelDrafter

__all__ = ["EmptyDrafter", "ModelDrafter"]
