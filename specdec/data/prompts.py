"""Evaluation prompts: loading prepared question files and formatting them for the target tokenizer.

A prepared file (``scripts/prepare_data.py`` writes them under ``paths.data_dir``) is JSONL with
``id``, ``category``, ``turns`` (list of user turns; MT-bench items have two), ``reference`` (or
null) and ``meta`` (task data for quality checks: GSM8K ``answer``, HumanEval ``entry_point`` and
``test``). The Spec-Bench / EAGLE schema (``question_id`` instead of ``id``) is read too, so the
project's own fixture ``tests/fixtures/tiny_prompts.jsonl`` loads unchanged.

Files are loaded through ``datasets.load_dataset("json", ...)``, after a line-by-line check that
names the file, the line and the problem (invalid JSON, no ``id``, no ``turns``) instead of a
pyarrow traceback. ``read_prompt_file`` also returns the SHA-256 of the file's bytes: the eval's
config hash covers it, so an edited prompt file never resumes the answers to its old text. The
digest names the ``datasets`` cache entry too: ``datasets`` keys its cache on the file's path,
size and modification time, and would serve the old rows of a file rewritten at the same size
and time.

Formatting uses the tokenizer's chat template when the dataset asks for it and the tokenizer has
one, else the raw text; the chat template is applied here and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from specdec.errors import BadInput, MissingInput

PREPARE_HINT = (
    "run `python scripts/prepare_data.py` to fill the data directory (paths.data_dir, env "
    "SPECDEC_DATA_DIR); see docs/evaluation.md, data preparation"
)
FIX_HINT = "fix or remove the line, or re-run `python scripts/prepare_data.py`"
MULTI_TURN = "multi-turn"  # the report's category of every prompt with more than one turn


@dataclass(frozen=True)
class Prompt:
    """One evaluation prompt (multi-turn items keep every user turn)."""

    id: str
    dataset: str
    category: str
    turns: tuple[str, ...]
    reference: str | None = None
    meta: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class PromptFile:
    """Every prompt of a question file (file order) and the SHA-256 of the file's bytes."""

    path: Path
    prompts: tuple[Prompt, ...]
    sha256: str


def read_prompt_file(
    path: str | Path, dataset: str, *, cache_dir: str | Path | None = None
) -> PromptFile:
    """Check and read a whole question file through ``datasets``.

    Raises:
        FileNotFoundError: naming the file and the script that prepares it.
        ValueError: naming the file and line of a malformed row, or on duplicate prompt ids
            (resume and paired comparisons key on them).
    """
    from datasets import load_dataset

    path = Path(path)
    if not path.exists():
        raise MissingInput(f"prompt file {path} not found for dataset {dataset!r}; " + PREPARE_HINT)
    data = path.read_bytes()
    count = _check_lines(data, path)
    digest = hashlib.sha256(data).hexdigest()
    rows = load_dataset(
        "json",
        name=f"sha256-{digest[:16]}",
        data_files=str(path),
        split="train",
        cache_dir=str(cache_dir) if cache_dir else None,
    )
    assert len(rows) == count, f"{path}: {len(rows)} rows loaded, {count} checked"
    out = tuple(_to_prompt(row, dataset) for row in rows)
    ids = [p.id for p in out]
    if len(set(ids)) != len(ids):
        raise BadInput(f"{path} has duplicate prompt ids; re-run scripts/prepare_data.py")
    return PromptFile(path, out, digest)


def load_prompts(
    path: str | Path,
    dataset: str,
    limit: int | None = None,
    *,
    cache_dir: str | Path | None = None,
) -> list[Prompt]:
    """The first ``limit`` prompts of a question file (file order); see ``read_prompt_file``."""
    prompts = read_prompt_file(path, dataset, cache_dir=cache_dir).prompts
    return list(prompts if limit is None else prompts[: int(limit)])


def _check_lines(data: bytes, path: Path) -> int:
    """Raise ``ValueError`` naming ``path:line`` for the first malformed row, or the file when it
    has no rows; returns the rows."""
    rows, blank, kinds, mixed = 0, None, {}, None  # kinds: field -> (list|string, first line)
    lines = data.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the newline that ends the last line starts no line
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            blank = blank or number
            continue
        where = f"prompt file {path}, line {number}"
        try:
            row = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise BadInput(f"{where}: not UTF-8 ({err.reason}); {FIX_HINT}") from None
        except json.JSONDecodeError as err:
            raise BadInput(
                f"{where}: not valid JSON ({err.msg} at column {err.colno}); " + FIX_HINT
            ) from None
        _check_row(row, where)
        mixed = mixed or _mixed_kind(row, number, kinds)
        rows += 1
    if rows == 0:
        raise BadInput(
            f"prompt file {path} has no prompts (it is empty or only blank lines); "
            f"{PREPARE_HINT}, or point the dataset's path at a filled file"
        )
    if mixed and blank:
        # a field whose type changes sends datasets to its line-by-line reader, which fails on
        # a blank line ("Expected object or value")
        raise BadInput(
            f"prompt file {path}, line {blank}: a blank line in a file whose {mixed}; "
            "datasets cannot read that mix: remove the blank lines, or give the "
            "field one type on every line"
        )
    return rows


def category_for(category: str, turns: int) -> str:
    """The category a prompt is reported under: ``multi-turn`` for more than one turn
    (Spec-Bench's grouping of MT-bench's eight categories), else its own."""
    return MULTI_TURN if turns > 1 else category


def report_category(prompt: Prompt) -> str:
    """``category_for`` of a prompt (the report's per-category tables use the same rule)."""
    return category_for(prompt.category, len(prompt.turns))


def _mixed_kind(row: dict, number: int, kinds: dict) -> str | None:
    """How a list-or-string field changes type at this line (None: it does not)."""
    for key in ("turns", "reference"):
        if row.get(key) is None:
            continue
        kind = "list" if isinstance(row[key], list) else "string"
        first = kinds.setdefault(key, (kind, number))
        if first[0] != kind:
            return f"'{key}' is a {first[0]} on line {first[1]} but a {kind} on line {number}"
    return None


def _check_row(row: object, where: str) -> None:
    """The fields ``datasets`` and ``_to_prompt`` rely on (a bad one would fail inside pyarrow,
    or be changed silently: pyarrow drops a lone surrogate from a string)."""
    if not isinstance(row, dict):
        raise BadInput(
            f"{where}: a row must be a JSON object, got {type(row).__name__}; " + FIX_HINT
        )
    try:
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        bad = err.object[err.start : err.end].encode("unicode_escape").decode()
        raise BadInput(
            f"{where}: holds a lone UTF-16 surrogate ({bad}), which is no text; " + FIX_HINT
        ) from None
    pid = row.get("id", row.get("question_id"))
    if pid is None:
        raise BadInput(f"{where}: the row has no 'id' (or 'question_id'); {FIX_HINT}")
    if not isinstance(pid, str | int) or isinstance(pid, bool):
        raise BadInput(
            f"{where}: the id must be a string or an integer, got "
            f"{json.dumps(pid)[:80]}; {FIX_HINT}"
        )
    turns = row.get("turns")
    if turns is None:
        raise BadInput(f"{where}: the row has no 'turns' (the user turns); {FIX_HINT}")
    if not isinstance(turns, str) and not (
        isinstance(turns, list) and turns and all(isinstance(t, str) for t in turns)
    ):
        raise BadInput(
            f"{where}: 'turns' must be a string or a non-empty list of strings, "
            f"got {json.dumps(turns)[:80]}; {FIX_HINT}"
        )
    if any(not t.strip() for t in ([turns] if isinstance(turns, str) else turns)):
        raise BadInput(f"{where}: a turn is empty (no text to answer); {FIX_HINT}")
    kinds = {"meta": (dict,), "category": (str,), "reference": (str, list)}
    for key, types in kinds.items():
        value = row.get(key)
        if value is not None and not isinstance(value, types):
            want = {
                "meta": "an object",
                "category": "a string",
                "reference": "a string or a list of strings",
            }[key]
            raise BadInput(
                f"{where}: '{key}' must be {want} or null, got {json.dumps(value)[:80]}; {FIX_HINT}"
            )


def first_per_category(prompts: Sequence[Prompt], n: int | None) -> list[Prompt]:
    """The first ``n`` prompts of each category the report shows (``report_category``), in file
    order (all of them when ``n`` is None).

    A category-balanced subset (``per_category=3`` on Spec-Bench: 18 prompts, three of each of
    its six categories, multi-turn counted once rather than per MT-bench category), where
    ``limit`` would take the file's first category only.
    """
    if n is None:
        return list(prompts)
    seen: dict[str, int] = {}
    out = []
    for prompt in prompts:
        cat = report_category(prompt)
        if seen.get(cat, 0) < n:
            seen[cat] = seen.get(cat, 0) + 1
            out.append(prompt)
    return out


def load_jsonl_prompts(path: str | Path, dataset: str, limit: int | None = None) -> list[Prompt]:
    """Back-compatible name of :func:`load_prompts`."""
    return load_prompts(path, dataset, limit)


def _to_prompt(row: dict, dataset: str) -> Prompt:
    pid = row["id"] if row.get("id") is not None else row.get("question_id")  # absent: None
    turns = row["turns"] if isinstance(row["turns"], list) else [row["turns"]]
    ref = row.get("reference")
    if isinstance(ref, list):
        ref = ref[0] if ref else None
    meta = {k: str(v) for k, v in (row.get("meta") or {}).items() if v is not None}
    return Prompt(str(pid), dataset, str(row.get("category") or dataset), tuple(turns), ref, meta)


def prompt_ids_hash(ids: list[str]) -> str:
    """Fingerprint of an ordered list of prompt ids (the report compares runs on it)."""
    return hashlib.sha256(json.dumps(list(ids)).encode()).hexdigest()[:16]


def format_turn(turn: str, template: str) -> str:
    """Put a user turn into the dataset's template (``{turn}`` marks where; no other braces)."""
    if "{turn}" not in template:
        raise BadInput(f"dataset template {template!r} must contain '{{turn}}'")
    return template.replace("{turn}", turn)


def encode_turn(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]], *, chat_template: bool
) -> list[int]:
    """Token ids of a conversation ending with a user turn, ready for the assistant's answer.

    Args:
        tokenizer: the target tokenizer.
        messages: ``[{"role": "user"|"assistant", "content": ...}, ...]``.
        chat_template: use the tokenizer's chat template if it has one; otherwise the conversation
            is encoded as plain text (turns joined by blank lines: a completion prompt).
    """
    if chat_template and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return tokenizer.encode(text, add_special_tokens=False)
    if len(messages) == 1:
        return tokenizer.encode(messages[0]["content"])
    return tokenizer.encode("\n\n".join(m["content"] for m in messages))
