"""The test suite mirrors the package (docs/architecture.md), and no test module imports another.

* every test module sits in a folder of ``tests/`` named after a part of the package (a
  ``specdec`` subpackage, or ``core`` / ``cli`` for the top-level modules), never at the top;
* each such folder is a package (``__init__.py``, so equal basenames in two folders do not clash)
  with its own ``conftest.py``;
* a test module or conftest imports no test module and no conftest (``test_*``, ``conftest``,
  ``tests.*``, relative imports): shared helpers live in ``specdec/testing/``, shared fixtures in
  a conftest.

Each rule is a function of a folder, so the last test plants every violation in a scratch tree
and checks that each is reported.
"""

from __future__ import annotations

import ast
from pathlib import Path

from specdec.testing.paths import REPO

TESTS = REPO / "tests"
#: folders for the package's top-level modules (engine, lm, ...) and for its entry points
EXTRA_FOLDERS = {"core", "cli"}
NOT_TESTS = {"fixtures", "__pycache__"}


def top_level_tests(tests: Path) -> list[str]:
    """Test modules directly in ``tests/`` (they belong in a folder)."""
    return sorted(p.name for p in tests.glob("test_*.py"))


def misplaced_folders(tests: Path, package: Path) -> list[str]:
    """Folders of ``tests/`` that name no part of ``package``."""
    parts = {p.name for p in package.iterdir() if (p / "__init__.py").exists()} | EXTRA_FOLDERS
    return sorted(
        p.name
        for p in tests.iterdir()
        if p.is_dir() and p.name not in NOT_TESTS and p.name not in parts
    )


def folders_missing_files(tests: Path) -> list[str]:
    """``folder/file`` for each test folder (and ``tests/``) lacking its ``__init__.py`` or
    ``conftest.py``."""
    folders = [
        tests,
        *(
            p
            for p in tests.rglob("*")
            if p.is_dir()
            and any(p.glob("test_*.py"))
            and not NOT_TESTS & set(p.relative_to(tests).parts)
        ),
    ]
    return sorted(
        f"{p.relative_to(tests.parent)}/{name}"
        for p in folders
        for name in ("__init__.py", "conftest.py")
        if not (p / name).exists()
    )


def _is_test_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "tests" or any(p == "conftest" or p.startswith("test_") for p in parts)


def imports_of_test_modules(tests: Path) -> list[str]:
    """``file: module`` for each import of a test module or conftest by a file under ``tests``."""
    out = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level:  # relative: inside tests/
                names = ["." * node.level + (node.module or "")]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
                names += [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            out += [
                f"{path.relative_to(tests.parent)}: {n}"
                for n in names
                if n.startswith(".") or _is_test_module(n)
            ]
    return sorted(set(out))


def test_no_test_module_sits_at_the_top_level():
    assert top_level_tests(TESTS) == [], "move each into the tests/ folder of the code it tests"


def test_every_test_folder_names_a_part_of_the_package():
    assert misplaced_folders(TESTS, REPO / "specdec") == []


def test_every_test_folder_is_a_package_with_its_own_conftest():
    assert folders_missing_files(TESTS) == []


def test_no_test_module_imports_another():
    assert imports_of_test_modules(TESTS) == [], (
        "move shared helpers to specdec/testing/ and shared fixtures to a conftest"
    )


def test_each_rule_reports_a_planted_violation(tmp_path):
    package, tests = tmp_path / "specdec", tmp_path / "tests"
    for folder in (
        package / "bench",
        tests / "bench",
        tests / "core",
        tests / "nowhere",
        tests / "fixtures",
    ):
        folder.mkdir(parents=True)
    (package / "bench" / "__init__.py").write_text("")
    for folder in (tests, tests / "bench", tests / "core"):
        (folder / "__init__.py").write_text("")
        (folder / "conftest.py").write_text("")
    (tests / "core" / "conftest.py").unlink()
    (tests / "test_top.py").write_text("")
    (tests / "nowhere" / "test_x.py").write_text("")
    (tests / "fixtures" / "test_data.py").write_text("")  # not a test folder: no rule applies
    (tests / "bench" / "test_a.py").write_text(
        "import json\nfrom test_b import helper\nimport tests.core.test_c\n"
        "from tests.core import test_c\nfrom specdec.testing.paths import REPO\n"
    )
    (tests / "core" / "test_c.py").write_text(
        "from . import test_a\nfrom .conftest import fx\nfrom conftest import fx\n"
        "from specdec.testing import step\n"
    )
    assert top_level_tests(tests) == ["test_top.py"]
    assert misplaced_folders(tests, package) == ["nowhere"]
    assert folders_missing_files(tests) == [
        "tests/core/conftest.py",
        "tests/nowhere/__init__.py",
        "tests/nowhere/conftest.py",
    ]
    assert imports_of_test_modules(tests) == [
        "tests/bench/test_a.py: test_b",
        "tests/bench/test_a.py: test_b.helper",
        "tests/bench/test_a.py: tests.core",
        "tests/bench/test_a.py: tests.core.test_c",
        "tests/core/test_c.py: .",
        "tests/core/test_c.py: .conftest",
        "tests/core/test_c.py: conftest",
        "tests/core/test_c.py: conftest.fx",
    ]
