"""The eval config as ``@hydra.main`` would pass it, on the tiny pair, for in-process eval tests."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from specdec.config import compose_config

#: a short run: two prompts of the tiny fixture dataset, six new tokens, one warm-up, no bar
FAST = ["model=tiny", "benchmark=tiny", "limit=2", "max_new_tokens=6", "warmup=1", "progress=false"]


def eval_cfg(out_dir: Path, overrides: list[str]) -> DictConfig:
    """The eval config as ``@hydra.main`` would pass it, with its run directory at ``out_dir``."""
    cfg = compose_config("eval", [*FAST, *overrides], hydra_node=False)
    cfg.paths.output_dir = str(out_dir)
    cfg.paths.cache_dir = str(out_dir / "cache")
    return cfg
