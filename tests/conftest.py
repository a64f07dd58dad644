"""Shared fixtures: tiny fp64 HF pair, offline environment, Hydra compose helper."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")


@pytest.fixture(scope="session")
def tiny64():
    """The tiny random pair in float64 (exactness tests)."""
    from specdec.models.tiny import tiny_pair

    return tiny_pair(dtype="float64")
