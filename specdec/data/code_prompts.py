"""Raw code-completion prompts: documented Python functions cut after their docstring.

A code-completion benchmark (HumanEval, Chen et al. 2021, "Evaluating Large Language Models
Trained on Code") hands the target a bare signature and docstring, with no chat template. A feature
drafter trained only on chat turns has never read the target's hidden states in that mode, and its
acceptance there is the lowest of the default datasets. These prompts add the mode, not the
benchmark: from a folder of Python files (by default the running interpreter's standard library,
present wherever the project runs) every documented function becomes one prompt — its ``def``
line(s) and docstring, dedented — and the target's own greedy continuation is the trace
(``traces_code_*`` files, encoded without the chat template like a completion benchmark's prompts).

Kept: docstrings of 40..1200 characters on functions with at least two statements after them,
prompts of at most 2000 characters, files outside ``test``/``tests``/``idlelib`` folders; never a
prompt equal to an eval prompt (``sources.eval_texts``) nor a function whose name is defined in one.
The sample is deterministic (ordered by a text hash); ``code_prompts.jsonl`` in the traces folder
records each kept prompt's file and function.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import sysconfig
import textwrap
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

from specdec.data.training import eval_texts, hash_text, norm_text
from specdec.errors import BadInput

log = logging.getLogger(__name__)
FILE = "code_prompts.jsonl"
SKIP_DIRS = {"test", "tests", "idlelib", "site-packages", "__pycache__"}


def documented_functions(path: Path) -> Iterator[tuple[str, str]]:
    """``(name, prompt)`` for each function of one file whose docstring passes the filters."""
    try:
        source = path.read_text(encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in old stdlib files
            tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    lines = source.splitlines()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        doc = ast.get_docstring(node)
        if doc is None or not 40 <= len(doc) <= 1200 or len(node.body) < 3:
            continue
        # 1. The def line(s) through the docstring's last line (decorators left out).
        first, last = node.lineno - 1, node.body[0].end_lineno
        prompt = textwrap.dedent("\n".join(lines[first:last])) + "\n"
        if len(prompt) <= 2000:
            yield node.name, prompt


def code_prompts(
    count: int, *, roots: Sequence[str | Path] | None = None, source_dir: str | Path | None = None
) -> list[tuple[str, str, str]]:
    """Up to ``count`` ``(file, function, prompt)`` triples from the ``.py`` files under ``roots``.

    Args:
        roots: folders to walk (default: the standard library of this interpreter).
        source_dir: shared data folder; its eval prompts (and the function names they define)
            are excluded.

    Raises:
        BadInput: a root is not a folder, or no documented function was found.
    """
    roots = [Path(r) for r in (roots or [sysconfig.get_paths()["stdlib"]])]
    banned = eval_texts(Path(source_dir)) if source_dir is not None else set()
    banned_names = {m for text in banned for m in re.findall(r"def (\w+)\s*\(", text)}
    found: dict[str, tuple[str, str, str]] = {}
    for root in roots:
        if not root.is_dir():
            raise BadInput(
                f"code prompt root {root} is not a folder; set "
                "data_gen.code_completion.roots to folders of .py files"
            )
        for path in sorted(root.rglob("*.py")):
            if SKIP_DIRS & set(path.relative_to(root).parts[:-1]):
                continue
            for name, prompt in documented_functions(path):
                key = norm_text(prompt)
                if key in banned or name in banned_names or key in found:
                    continue
                found[key] = (str(path.relative_to(root)), name, prompt)
    if not found:
        raise BadInput(
            f"no documented Python function under {[str(r) for r in roots]}; set "
            "data_gen.code_completion.roots"
        )
    picked = sorted(found.values(), key=lambda row: hash_text(row[2]))[:count]
    log.info(
        "code prompts: %d of %d documented functions under %s",
        len(picked),
        len(found),
        [str(r) for r in roots],
    )
    return picked


def write_code_prompts(
    out_dir: str | Path,
    count: int,
    *,
    roots: Sequence[str | Path] | None = None,
    source_dir: str | Path | None = None,
) -> list[str]:
    """The prompts of ``code_prompts``, recorded in ``out_dir/code_prompts.jsonl``.

    A folder that already has the record keeps its prompts (a rerun on another interpreter's
    standard library would otherwise change the prompts of finished chunks).
    """
    record = Path(out_dir) / FILE
    if record.exists():
        rows = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]
        if len(rows) >= count:
            return [r["text"] for r in rows[:count]]
    picked = code_prompts(count, roots=roots, source_dir=source_dir)
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_suffix(".tmp")
    tmp.write_text(
        "".join(json.dumps({"file": f, "function": n, "text": t}) + "\n" for f, n, t in picked)
    )
    tmp.replace(record)
    return [t for _, _, t in picked]
