"""Fixtures of the tests of learned networks, their data and training.

``specdec.learners`` and ``specdec.train``.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def tiny32():
    """The tiny random pair in float32 (one per module, as the modules built it themselves)."""
    from specdec.models.tiny import tiny_pair

    return tiny_pair(placement={"dtype": "float32"})
