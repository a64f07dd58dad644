"""Where the checkout's own folders are, for tests wherever they sit under ``tests/``.

The tests read files of the checkout (``scripts/``, ``notebooks/``, the fixtures in
``tests/fixtures/``); they name them from here rather than from their own ``__file__``, so a test
module's folder can change without its paths changing.
"""

from __future__ import annotations

from pathlib import Path

from specdec.paths import ROOT

#: the checkout's root (the config folder is ``specdec.paths.CONF_DIR``)
REPO: Path = ROOT
FIXTURES: Path = REPO / "tests" / "fixtures"
