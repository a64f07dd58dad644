"""No module imports from a layer above its own (docs/architecture.md, "Layers and layout").

Every ``specdec`` module's imports are read with ``ast`` (module-level and function-level imports
alike, ``TYPE_CHECKING`` blocks included) and each import of a ``specdec`` module must point to the
importer's own layer or one below it. A module's layer is that of the longest name in ``LAYERS``
that it is or sits under.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specdec.testing.paths import REPO

PACKAGE = REPO / "specdec"

# lowest first; a module may import its own layer and the ones below it
LAYERS: list[tuple[str, ...]] = [
    ("errors", "paths"),  # paths: where the checkout's folders are
    (
        "rowops",
        "trees",
        "vocab",
        "threads",
        "cuda_sync",
        "forwards",
        "streaming",
        "cli_help",
        "sampling_params",
        "coins",
    ),
    # loading and placing models: the pair, its typed placement, its caches' kind
    ("models", "static_cache", "graphs"),
    ("core", "sampling", "metrics", "reconcile"),
    ("lm", "lm_base", "lm_inputs"),
    ("nets",),  # the networks drafters load: the drafters and the learners are built on them
    ("verifiers", "drafters"),
    ("engine",),
    ("compose",),
    ("data",),  # prompts and training data; its generators decode with a composed method
    ("learners",),  # training: reads data, trains and exports nets
    ("config",),  # config helpers (resolvers, the training hash)
    ("bench",),  # shared by the harness's two sides: the typed summary, records, cost model
    ("bench.report",),  # reading finished runs: never imports bench.run
    ("bench.run",),  # running an eval: may read its own run the way the report does
    ("api", "eval", "train", "report", "cli_check", ""),  # "": the package's __init__
    ("testing",),  # helpers for the tests, on top of everything they test
]


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def layer_of(module: str) -> int:
    """The layer index of a module name below ``specdec`` (``"bench.runner"``)."""
    best, level = -1, None
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".") or name == "") and len(name) > best:
                best, level = len(name), i
    assert level is not None, f"specdec.{module} is in no layer: add it to LAYERS"
    return level


def imports_of(path: Path) -> set[str]:
    """The ``specdec`` modules a file imports, as names below ``specdec`` ("" for the package)."""
    me = _module(path).split(".") if _module(path) else []
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:  # relative
            base = me if is_package else me[:-1]
            base = base[: len(base) - (node.level - 1)]
            names = ["specdec." + ".".join(base + ([node.module] if node.module else []))]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        out |= {
            n[len("specdec.") :] if n != "specdec" else ""
            for n in names
            if n == "specdec" or n.startswith("specdec.")
        }
    return out


FILES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    for path in FILES:
        layer_of(_module(path))


@pytest.mark.parametrize("path", FILES, ids=lambda p: _module(p) or "specdec")
def test_no_import_points_up(path):
    me = _module(path)
    up = sorted(
        f"specdec.{m} (layer {layer_of(m)})" for m in imports_of(path) if layer_of(m) > layer_of(me)
    )
    assert not up, f"specdec.{me} (layer {layer_of(me)}) imports from above: {up}"


def test_function_level_imports_count_and_a_loader_importing_a_learner_would_fail():
    """The SmolLM2 loader's draft import sits inside a function (it once named a learner)."""
    found = imports_of(PACKAGE / "models" / "smollm2.py")
    assert "models.reduced_draft" in found
    assert layer_of("learners.draft_lm.module") > layer_of("models.smollm2")


def test_learners_and_drafters_never_import_each_other():
    """Both build on ``nets``; data generation that decodes lives in ``data``, not in a learner."""

    def package(module: str) -> str:
        return module.split(".")[0]

    pairs = {(package(_module(p)), package(m)) for p in FILES for m in imports_of(p)}
    assert ("learners", "drafters") not in pairs and ("drafters", "learners") not in pairs


def test_one_layer_per_package():
    """A subpackage sits in its package's layer: ``LAYERS`` names only top-level names (and the
    harness's two sides), so no module of a package is an exception."""
    for names in LAYERS:
        for name in names:
            assert "." not in name or name in ("bench.report", "bench.run"), name


# the only run-side modules that import the report side, and why: the sweep objective is the
# leaderboard's own number (paired), the sweep's callback writes the leaderboard (leaderboard)
RUN_READS_REPORT = {"bench.run.paired", "bench.run.leaderboard"}


def test_bench_sides_rule():
    """``bench.report`` never imports ``bench.run`` (the layers above); ``bench.run`` imports
    ``bench.report`` only in ``RUN_READS_REPORT``; the shared ``bench`` modules import neither."""

    def side(module: str) -> str | None:
        return next(
            (
                s
                for s in ("run", "report")
                if module == f"bench.{s}" or module.startswith(f"bench.{s}.")
            ),
            None,
        )

    found = {_module(p): imports_of(p) for p in FILES if _module(p).startswith("bench")}
    reads = {
        m
        for m, deps in found.items()
        if side(m) == "run" and any(side(d) == "report" for d in deps)
    }
    assert reads <= RUN_READS_REPORT, f"bench.run modules importing bench.report: {sorted(reads)}"
    shared = {m: sorted(d for d in deps if side(d)) for m, deps in found.items() if not side(m)}
    assert not any(shared.values()), f"shared bench modules importing a side: {shared}"
    assert layer_of("bench.report.rows") < layer_of("bench.run.runner")
    assert layer_of("bench.records") < layer_of("bench.report.runs")
