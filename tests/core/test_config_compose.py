"""One way to compose a config, one spelling of the config folder, one ``_target_`` convention.

* ``specdec.config.compose_config`` is the only place that calls Hydra's ``initialize*`` /
  ``compose`` outside ``@hydra.main`` (the package, the scripts and the tests all go through it);
* ``specdec.paths.CONF_DIR`` is the only spelling of the config folder (no ``"conf"`` path literal
  elsewhere);
* a ``specdec`` ``_target_`` in ``conf/`` names the object by the package that exports it (its
  ``__init__`` lists the name in ``__all__``), else by a module (a ``.py`` file) that defines or
  re-exports it, never by a package that does not export it. Several spellings import, so nothing
  else enforces one; they are part of the config hashes, so the convention is the one the pinned
  hashes were taken with.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from hydra.core.global_hydra import GlobalHydra

from specdec.config import compose_config
from specdec.paths import CONF_DIR, ROOT

SOURCES = [p for folder in ("specdec", "scripts", "tests") for p in (ROOT / folder).rglob("*.py")]
HYDRA_CALL = re.compile(r"\binitialize(?:_config_dir|_config_module)?\(|\bhydra_compose\(|"
                        r"from hydra import [^\n]*\bcompose\b")
CONF_LITERAL = re.compile(r"""["']conf["']""")


def _own_text(path: Path) -> str:
    return path.read_text() if path != Path(__file__) else ""


def test_only_compose_config_calls_hydra_compose():
    found = [str(p.relative_to(ROOT)) for p in SOURCES if HYDRA_CALL.search(_own_text(p))]
    assert found == ["specdec/config.py"], found


def test_only_specdec_paths_spells_the_config_folder():
    found = [str(p.relative_to(ROOT)) for p in SOURCES if CONF_LITERAL.search(_own_text(p))]
    assert found == ["specdec/paths.py"], found


def test_compose_config_composes_as_the_command_line_and_leaves_hydra_clear():
    cfg = compose_config("eval", ["model=tiny", "benchmark=tiny", "method=sps"])
    assert cfg.method_name == "sps" and cfg.hydra.runtime.choices.model == "tiny"
    assert not GlobalHydra.instance().is_initialized()
    bare = compose_config("eval", ["model=tiny", "method=sps"], hydra_node=False)
    assert "hydra" not in bare and bare.method_name == "sps"
    assert CONF_DIR.parent == ROOT and (CONF_DIR / "eval.yaml").is_file()


def _targets() -> list[tuple[str, str]]:
    out = []
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        for match in re.finditer(r"_target_:\s*([\w.]+)", path.read_text()):
            if match.group(1).startswith("specdec."):
                out.append((str(path.relative_to(ROOT)), match.group(1)))
    return out


def split_target(target: str) -> tuple[str, str, str]:
    """``(module, name, rest)`` of a ``_target_``: the longest importable module, the object it
    holds, and attributes below it (``Class.method`` targets: ``rest`` = ``.method``)."""
    parts = target.split(".")
    for n in range(len(parts) - 1, 0, -1):
        try:
            importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError:
            continue
        return ".".join(parts[:n]), parts[n], "".join(f".{p}" for p in parts[n + 1:])
    raise AssertionError(f"{target}: no module of it imports")


def exported_as(target: str) -> str | None:
    """``package.Name`` when a package on the object's module path lists it in ``__all__``."""
    module, name, rest = split_target(target)
    obj = getattr(importlib.import_module(module), name)
    parts = obj.__module__.split(".")
    for n in range(1, len(parts)):
        package = importlib.import_module(".".join(parts[:n]))
        if name in getattr(package, "__all__", ()):
            return f"{package.__name__}.{name}{rest}"
    return None


def spelling_error(target: str) -> str | None:
    """What is wrong with a ``_target_``'s spelling (None: it follows the convention)."""
    exported = exported_as(target)
    if exported is not None:
        return None if target == exported else f"write {exported}, as its package exports it"
    module = importlib.import_module(split_target(target)[0])
    if hasattr(module, "__path__"):  # a package that does not list the name in __all__
        return f"{module.__name__} does not export it: name the module that defines it"
    return None


def test_every_specdec_target_follows_one_spelling():
    targets = _targets()
    assert len(targets) > 30
    wrong = [f"{where}: {t}: {spelling_error(t)}" for where, t in targets if spelling_error(t)]
    assert wrong == [], wrong


def test_the_spelling_rule_on_each_kind(monkeypatch):
    import specdec.drafters
    from specdec.drafters.eagle3 import Eagle3Drafter

    assert spelling_error("specdec.drafters.TopKTreeDrafter") is None  # exported by its package
    assert "write specdec.drafters.TopKTreeDrafter" in spelling_error(
        "specdec.drafters.tree.TopKTreeDrafter")
    assert spelling_error("specdec.drafters.eagle3.Eagle3Drafter") is None  # its module
    # reachable through the package, which does not list it in __all__
    monkeypatch.setattr(specdec.drafters, "Eagle3Drafter", Eagle3Drafter, raising=False)
    assert "does not export it" in spelling_error("specdec.drafters.Eagle3Drafter")
