"""``python -m specdec.eval``: benchmark method presets on a model pair (Hydra entry point).

The work is ``specdec.bench.runner.run``; this file only binds it to ``conf/eval.yaml``.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from specdec.bench.runner import run
from specdec.config import register_resolvers


@hydra.main(version_base="1.3", config_path="../conf", config_name="eval")
def main(cfg: DictConfig) -> dict:
    """Run one eval job (a multirun calls it once per method preset)."""
    return run(cfg)


if __name__ == "__main__":
    register_resolvers()
    main()
