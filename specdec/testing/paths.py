"""Where the checkout's own folders are, for tests wherever they sit under ``tests/``.

The tests read files of the checkout (``conf/``, ``scripts/``, ``notebooks/``, the fixtures in
``tests/fixtures/``); they name them from here rather than from their own ``__file__``, so a test
module's folder can change without its paths changing.
"""

from __future__ import annotations

from pathlib import Path

#: the checkout's root (``specdec/testing/paths.py`` is two folders below it)
REPO: Path = Path(__file__).resolve().parents[2]
CONF: Path = REPO / "conf"
FIXTURES: Path = REPO / "tests" / "fixtures"
