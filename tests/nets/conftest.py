"""Fixtures of the tests of the networks drafters load (``specdec.nets``) and their formats."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def tiny32():
    """The tiny random pair in float32 (one per module)."""
    from specdec.models.tiny import tiny_pair

    return tiny_pair(placement={"dtype": "float32"})
