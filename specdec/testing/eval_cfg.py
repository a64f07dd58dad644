"""The eval config as ``@hydra.main`` would pass it, on the tiny pair, for in-process eval tests."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from specdec.config import register_resolvers
from specdec.testing.paths import CONF

#: a short run: two prompts of the tiny fixture dataset, six new tokens, one warm-up, no bar
FAST = ["model=tiny", "benchmark=tiny", "limit=2", "max_new_tokens=6", "warmup=1",
        "progress=false"]


def eval_cfg(out_dir: Path, overrides: list[str]) -> DictConfig:
    """The eval config as ``@hydra.main`` would pass it, with its run directory at ``out_dir``."""
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("eval", overrides=[*FAST, *overrides])
    GlobalHydra.instance().clear()
    cfg.paths.output_dir = str(out_dir)
    cfg.paths.cache_dir = str(out_dir / "cache")
    return cfg
