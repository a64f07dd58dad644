"""Every reference the documentation makes resolves inside the repository.

Scanned: the docs (``README.md``, ``docs/*.md``, ``scripts/README.md``, the model cards under
``specdec/assets``) and the docstrings and comments of ``specdec/``, ``scripts/`` and ``conf/``.
A reference fails when it names

* a repository path (``specdec/...``, ``conf/...``, ``scripts/...``, ``tests/...``,
  ``docs/...``) that matches no file or folder (``<name>`` and ``*`` match any one name,
  ``{a,b}`` either, ``::test`` after a test file is ignored);
* a dotted module ``specdec.x.y`` (optionally followed by one attribute) that is not a module of
  the package, or whose attribute the module does not define or import;
* a config choice (``method=foo``, ``+experiment=bar``, any ``<group>=<option>`` of a folder of
  ``conf/``; lists ``a,b`` and alternatives ``a|b`` are checked one by one) with no YAML file;
* a Markdown link (``[text](page.md#anchor)``, relative to the page) to a file that does not
  exist or to an anchor that is none of the page's headings;
* a document that is not in the repository: the design notes ``ARCHITECTURE`` and the seed
  digest, paper file ids (``specblock_002``) and ``issue N`` (a reader cannot follow them).

Each rule is tested on planted text first, so a rule that stopped matching would fail too.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from specdec.paths import CONF_DIR, ROOT

PATH = re.compile(r"(?<![\w./-])((?:specdec|conf|scripts|tests|docs)/(?:[\w./*{},-]|<[^<>\n]*>)*)")
MODULE = re.compile(r"(?<![\w./-])(specdec(?:\.[A-Za-z_]\w*)+)")
GROUPS = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and p.name != "hydra")
CHOICE = re.compile(r"(?<![\w.$/-])(\+?)(" + "|".join(GROUPS) + r")=((?:[\w|,\[\]*-]|<[^<>\s]*>)+)")
OUTSIDE = [
    (re.compile(r"ARCHITECTURE"), "the design notes are not in the repository"),
    (
        re.compile(r"seed[- ]?(?:code[- ]?)?digest|digest §", re.I),
        "the seed digest is not in the repository",
    ),
    (
        re.compile(r"\b(?:hsd|specblock|specbranch|specdecpp|ssd)_\d{3}\b"),
        "a paper file id: cite title, authors, arXiv",
    ),
    (re.compile(r"\bissues? #?\d+", re.I), "'issue N' means nothing to a reader: say the reason"),
    (re.compile(r"shared/(?:papers|design|hooks)"), "a folder outside the repository"),
]


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def link_problems(page: Path) -> list[str]:
    """Every relative link of a Markdown page whose file or heading anchor does not exist."""
    out = []
    for m in LINK.finditer(page.read_text()):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            out.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", dest.read_text(), re.M)
            if anchor not in {_anchor(h) for h in headings}:
                out.append(f"{target}: no such heading")
    return out


def _doc_files() -> list[Path]:
    docs = [ROOT / "README.md", ROOT / "scripts" / "README.md"]
    return [
        *docs,
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "specdec" / "assets").rglob("*.md")),
    ]


def python_text(source: str) -> str:
    """The comments and docstrings of a Python file, one per line."""
    out = [
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append(doc)
    return "\n".join(out)


def comment_text(source: str) -> str:
    """The ``#`` comments of a YAML or shell file (a ``#`` after a space, or at a line's start)."""
    return "\n".join(m.group(1) for m in re.finditer(r"(?:^|\s)(#.*)$", source, re.M))


def scanned() -> dict[str, str]:
    """``relative path -> the text whose references must resolve``."""
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in _doc_files()}
    for folder in ("specdec", "scripts"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            texts[str(p.relative_to(ROOT))] = python_text(p.read_text())
    for p in [
        *sorted(CONF_DIR.rglob("*.yaml")),
        *sorted((ROOT / "scripts").rglob("*.sh")),
        *sorted((ROOT / "scripts").rglob("*.yaml")),
    ]:
        texts[str(p.relative_to(ROOT))] = comment_text(p.read_text())
    return texts


def _expand(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    return [
        x
        for alt in match.group(1).split(",")
        for x in _expand(pattern[: match.start()] + alt + pattern[match.end() :])
    ]


def path_exists(ref: str, root: Path = ROOT) -> bool:
    """Whether a path reference matches something in the checkout."""
    ref = ref.split("::")[0].rstrip(".,;:)")
    ref = re.sub(r"<[^<>/]*>", "*", ref)
    for pattern in _expand(ref):
        pattern = pattern.rstrip("/") or pattern
        if any(c in pattern for c in "*?[") and any(root.glob(pattern)):
            return True
        if (root / pattern).exists():
            return True
    return False


def _defines(module: Path, name: str) -> bool:
    tree = ast.parse(module.read_text())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name == name
        ):
            return True
        if isinstance(node, ast.Import | ast.ImportFrom) and any(
            (a.asname or a.name.split(".")[0]) == name for a in node.names
        ):
            return True
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def module_resolves(ref: str, root: Path = ROOT) -> bool:
    """Whether ``specdec.a.b[.attr]`` names a module of the package (and, after it, a name that
    module defines or imports; later names, e.g. a method of a class, are not checked)."""
    parts = ref.rstrip(".").split(".")
    for n in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:n])
        for file in (base.with_suffix(".py"), base / "__init__.py"):
            if file.is_file():
                return n == len(parts) or _defines(file, parts[n])
    return False


def choice_exists(group: str, value: str, conf: Path = CONF_DIR) -> bool:
    """Whether every option in ``value`` (``a,b``, ``a|b``, ``[a,b]``) is a YAML of ``group``.

    Placeholders pass: ``<name>``, ``eagle3_<model>``, ``*``, a capitalised word (``X``, ``None``)
    and the group's own name (a Python keyword argument, ``experiment=experiment``)."""
    options = [v for v in re.split(r"[|,\[\]]", value) if v]
    real = [o for o in options if not (set("<*") & set(o) or o[0].isupper() or o == group)]
    return all((conf / group / f"{o}.yaml").is_file() for o in real)


def problems(text: str, root: Path = ROOT, conf: Path = CONF_DIR) -> list[str]:
    """Every reference in ``text`` that does not resolve, as ``"<reference>: <why>"``."""
    out = []
    for pattern, why in OUTSIDE:
        out += [f"{m.group(0)}: {why}" for m in pattern.finditer(text)]
    for m in PATH.finditer(text):
        if not path_exists(m.group(1), root):
            out.append(f"{m.group(1)}: no such path in the repository")
    for m in MODULE.finditer(text):
        if not module_resolves(m.group(1), root):
            out.append(f"{m.group(1)}: no such module or name in the package")
    for m in CHOICE.finditer(text):
        if not choice_exists(m.group(2), m.group(3), conf):
            out.append(f"{m.group(0)}: no such option in conf/{m.group(2)}/")
    return out


@pytest.mark.parametrize(
    "planted",
    [
        "see ARCHITECTURE §0.2",
        "as in the seed-code digest §3",
        "SpecBlock (specblock_002)",
        "fixes issue 27",
        "../shared/papers/ssd_paper.txt",
        "specdec/no_such_module.py",
        "conf/method/no_such.yaml",
        "specdec.no_such_module",
        "specdec.engine.no_such_function",
        "python -m specdec.eval method=no_such",
        "+experiment=no_such",
        "-m method=ar,no_such",
        "trainer=cpu|no_such",
        "tests/core/test_no_such.py::test_x",
    ],
)
def test_each_rule_reports_a_planted_reference(planted):
    assert problems(f"text ({planted}) more") != [], planted


@pytest.mark.parametrize(
    "fine",
    [
        "specdec/assets/eagle3/<model>/",
        "conf/learner/{eagle3,specblock}.yaml",
        "specdec.engine",
        "specdec.errors.BadInput",
        "`method=ar,sps`",
        "+experiment=eagle3_tiny",
        "trainer=cpu|gpu",
        "tests/verifiers/test_verifiers_hsd.py::test_joint",
        "specdec/drafters/",
        "method=X alone",
        "model.draft=truncated",
        "tests/learners/test_eagle3_published*.py",
        "specdec/paths.py.",
    ],
)
def test_references_that_resolve_pass(fine):
    assert problems(fine) == [], fine


def test_a_broken_link_is_reported(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## Some heading\n")
    page.write_text("[a](other.md#some-heading) [b](https://x.org/y) [c](#top)\n# Top\n")
    assert link_problems(page) == []
    page.write_text("[a](missing.md) [b](other.md#no-such)\n")
    assert link_problems(page) == ["missing.md: no such file", "other.md#no-such: no such heading"]


def test_every_link_of_the_docs_resolves():
    bad = [f"{p.relative_to(ROOT)}: {x}" for p in _doc_files() for x in link_problems(p)]
    assert bad == [], "\n".join(bad)


def test_every_reference_in_the_docs_and_comments_resolves():
    found = {name: problems(text) for name, text in scanned().items()}
    assert len(found) > 100  # the scan reaches the package, the scripts, conf and the docs
    bad = [f"{name}: {p}" for name, ps in found.items() for p in ps]
    assert bad == [], "\n".join(bad)
