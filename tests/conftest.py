"""Fixtures of many test folders: tiny fp64 HF pair, offline environment, Hydra compose helper.

A fixture only one folder uses lives in that folder's ``conftest.py``; helpers that test modules
import live in ``specdec/testing/`` (a test module never imports another test module:
``tests/core/test_suite_layout.py``).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
# the tiny pair's timings on a shared test machine are load and noise: runs keep their speedups
# beside the timing flag (specdec/bench/timing.py); the tests of the strict mode set it themselves
os.environ.setdefault("SPECDEC_TIMING", "lenient")


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Tiny models gain nothing from intra-op threads, and threads stall on a busy machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny64():
    """The tiny random pair in float64 (exactness tests)."""
    from specdec.models.tiny import tiny_pair

    return tiny_pair(placement={"dtype": "float64"})


@pytest.fixture
def compose(tmp_path):
    """Compose a primary config (``eval`` or ``train``) with overrides; outputs go to tmp_path."""
    from omegaconf import open_dict

    from specdec.config import compose_config

    def _compose(name: str, overrides: list[str] | None = None):
        overrides = list(overrides or [])
        if name == "eval":  # tests default to the tiny pair and the tiny fixture dataset
            for key, value in (("model", "tiny"), ("benchmark", "tiny")):
                if not any(o.startswith(f"{key}=") for o in overrides):
                    overrides.insert(0, f"{key}={value}")
        cfg = compose_config(name, overrides)
        with open_dict(cfg):
            cfg.paths.output_dir = str(tmp_path)
            cfg.paths.log_dir = str(tmp_path)
        return cfg

    return _compose
