"""A module that finds a folder from its own place (``Path(__file__).resolve().parents[n]``) lands
on the repository root (the package itself only for its ``assets``), whatever folder it sits in.

Moving a module one folder down (``bench/`` into ``bench/run/``) silently shifts every such path
one level: ``preflight.CONF`` pointed at ``specdec/conf`` (missing, so the hint naming the
experiment that trains an asset was lost) and the provenance's git root at ``specdec/``.
"""

from __future__ import annotations

import re

from specdec.testing.paths import REPO

PACKAGE = REPO / "specdec"
ROOT = PACKAGE.parent
PATTERN = re.compile(r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]( / \"assets\")?")


def test_every_module_relative_root_is_the_repository():
    found, wrong = 0, []
    for path in sorted(PACKAGE.rglob("*.py")):
        for match in PATTERN.finditer(path.read_text()):
            found += 1
            where = path.resolve().parents[int(match.group(1))]
            if where != (PACKAGE if match.group(2) else ROOT):
                wrong.append(f"{path.relative_to(ROOT)}: parents[{match.group(1)}] is {where}")
    assert found >= 5 and not wrong, wrong


def test_the_config_folder_is_the_repository_conf():
    from specdec.paths import CONF_DIR

    assert CONF_DIR.parent == ROOT and (CONF_DIR / "experiment" / "eagle3_tiny.yaml").is_file()
