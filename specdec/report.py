"""``python -m specdec.report RUN_DIRS...``: leaderboard entry point
(``specdec.bench.report.board``)."""

from __future__ import annotations

import sys

from specdec.bench.report.board import main

if __name__ == "__main__":
    sys.exit(main())
