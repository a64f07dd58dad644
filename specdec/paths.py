"""Where the checkout's own folders are: the repository root and the Hydra config folder.

The package is installed editable (``pip install -e .``), so its configs are read from the
checkout. ``CONF_DIR`` is the one spelling of the config folder for the package, the scripts and
the tests; ``specdec.config.compose_config`` composes a config from it outside ``@hydra.main``.
"""

from __future__ import annotations

from pathlib import Path

#: the repository root (``specdec/paths.py`` sits one folder below it)
ROOT: Path = Path(__file__).resolve().parents[1]
#: the Hydra config folder: ``eval.yaml``, ``train.yaml`` and one folder per config group
CONF_DIR: Path = ROOT / "conf"
