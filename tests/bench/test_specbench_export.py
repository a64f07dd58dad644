"""Spec-Bench-compatible export (``python -m specdec.report --format specbench``): answer files in
Spec-Bench's format and its speed table, checked against the runs' own records.

Old records, bad steps and the CLI: ``test_specbench_inputs.py``. Runs (``specbench_runs``,
``tests/bench/conftest.py``): the tiny pair, ``benchmark=tiny2`` (the tiny dataset and
``tests/fixtures/tiny_specbench.jsonl``: translation ×2, qa, a two-turn writing item), ``ar`` and
``sps`` at temperature 0, the latter with its draft equal to the target (every draft accepted,
turns cut mid-step by the token budget). No statistical test here: every number is recomputed
from the records, or from the answer files as Spec-Bench's ``evaluation/speed.py`` defines its
numbers (deterministic).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from specdec.bench.report import specbench as sb

DATASETS = ("tiny", "tiny_sb")
CHOICE_KEYS = {"index", "turns", "decoding_steps", "new_tokens", "wall_time", "accept_lengths"}


def _records(run_dir: Path) -> list[dict]:
    return [
        json.loads(line)
        for ds in DATASETS
        for line in (run_dir / "records" / f"{ds}.jsonl").read_text().splitlines()
    ]


def _answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _split(lengths: list[int], steps: list[int]) -> list[list[int]]:
    out, i = [], 0
    for n in steps:
        out.append(lengths[i : i + n])
        i += n
    return out


def test_records_carry_per_turn_seconds_and_steps(specbench_runs):
    for method in ("ar", "sps"):
        for rec in _records(specbench_runs[method]):
            assert len(rec["turn_s"]) == len(rec["turn_steps"]) == rec["turns"]
            assert sum(rec["turn_steps"]) == rec["target_forwards"]
            assert math.isclose(sum(rec["turn_s"]), rec["total_s"], rel_tol=1e-9)


def test_answer_rows_follow_specbench_and_match_the_records(specbench_runs, specbench_exported):
    out, done = specbench_exported
    assert sorted(p.name for p in done.files) == ["ar-tiny.jsonl", "sps-tiny.jsonl"]
    for method in ("ar", "sps"):
        recs = _records(specbench_runs[method])
        rows = _answers(out / f"{method}-tiny.jsonl")
        assert [r["question_id"] for r in rows] == [r["prompt_id"] for r in recs]
        assert len({r["answer_id"] for r in rows}) == len(rows)
        for row, rec in zip(rows, recs):
            assert {"question_id", "category", "answer_id", "model_id", "choices", "tstamp"} <= set(
                row
            ) and "note" not in row
            assert row["model_id"] == f"{method}-tiny" and row["category"] == rec["category"]
            (choice,) = row["choices"]
            assert set(choice) == CHOICE_KEYS and choice["index"] == 0
            turns = rec["turns"]
            assert (
                choice["turns"] == rec.get("answers", [rec["text"]])
                and len(choice["turns"]) == turns
            )
            assert (
                len(choice["decoding_steps"])
                == len(choice["new_tokens"])
                == len(choice["wall_time"])
                == turns
            )
            assert sum(choice["new_tokens"]) == rec["new_tokens"]
            assert choice["new_tokens"] == [len(ids) for ids in rec["output_ids"]]
            assert (
                sum(choice["decoding_steps"])
                == len(choice["accept_lengths"])
                == rec["target_forwards"]
            )
            per_turn = _split(choice["accept_lengths"], choice["decoding_steps"])
            assert [sum(t) for t in per_turn] == choice["new_tokens"]
            # a step adds its accepted tokens + 1, but a turn's last may be cut
            for steps, acc in zip(
                per_turn, _split(rec["accepted_per_step"], choice["decoding_steps"])
            ):
                assert steps[:-1] == [a + 1 for a in acc[:-1]] and 1 <= steps[-1] <= acc[-1] + 1
            if method == "ar":
                assert set(choice["accept_lengths"]) == {1}
            else:  # drafts accepted whole; the budget (6) cuts each turn's last step
                assert max(choice["accept_lengths"]) > 1 and choice["accept_lengths"][-1] < max(
                    choice["accept_lengths"]
                )
            assert math.isclose(sum(choice["wall_time"]), rec["total_s"], rel_tol=1e-9)


def _tokens_per_s(recs: list[dict]) -> float:
    """Spec-Bench's tokens/s from our records: mean over prompts of new tokens / total seconds."""
    return sum(r["new_tokens"] / r["total_s"] for r in recs) / len(recs)


#: the categories speed.py's mt_bench task selects
MT_BENCH = {
    "writing",
    "roleplay",
    "reasoning",
    "math",
    "coding",
    "extraction",
    "stem",
    "humanities",
}


def _task(category: str) -> str:
    return "mt_bench" if category in MT_BENCH else category


def test_speed_table_equals_tau_and_the_tokens_per_s_of_the_records(
    specbench_runs, specbench_exported
):
    out, done = specbench_exported
    recs = {m: _records(specbench_runs[m]) for m in ("ar", "sps")}
    summary = json.loads((specbench_runs["sps"] / "summary.json").read_text())
    by_key = {(r.model_id, r.category): r for r in done.rows}
    tasks = sorted({_task(r["category"]) for r in recs["sps"]})
    assert [r.category for r in done.rows if r.model_id == "sps-tiny"] == [*tasks, "overall"]
    assert "mt_bench" in tasks and done.refused == {}
    overall = by_key[("sps-tiny", "overall")]
    assert math.isclose(overall.mean_accepted_tokens, summary["overall"]["block_efficiency"])
    for task in [*tasks, "overall"]:
        mine = [r for r in recs["sps"] if task == "overall" or _task(r["category"]) == task]
        row = by_key[("sps-tiny", task)]
        assert row.questions == len(mine)
        tau = sum(r["new_tokens"] for r in mine) / sum(r["target_forwards"] for r in mine)
        assert math.isclose(row.mean_accepted_tokens, tau)
        assert math.isclose(row.tokens_per_s, _tokens_per_s(mine))
        assert by_key[("ar-tiny", task)].mean_accepted_tokens == 1.0
    with (out / "speed.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(done.rows) and tuple(table[0]) == sb.COLUMNS
    assert math.isclose(float(table[-1]["speedup"]), done.rows[-1].speedup)
    assert (out / "speed.md").read_text() == done.text and "| sps-tiny | overall |" in done.text


def _speed_py(method: list[dict], base: list[dict], tokenizer, task: str) -> list[float]:
    """Spec-Bench's speed.py numbers of one task, from its definition: the rows of each file
    whose category is the task's; mean accepted tokens over every accept_lengths entry; per row
    Σ new_tokens / Σ wall_time (the method) and Σ (len(tokenizer(turn).input_ids) - 1) /
    Σ wall_time (the baseline: its text re-tokenised), each averaged over rows; their ratio."""

    def pick(rows):
        return [r["choices"][0] for r in rows if task == "overall" or _task(r["category"]) == task]

    own, theirs = pick(method), pick(base)
    accepted = [n for c in own for n in c["accept_lengths"]]
    speed = sum(sum(c["new_tokens"]) / sum(c["wall_time"]) for c in own) / len(own)
    base_speed = sum(
        sum(len(tokenizer(t).input_ids) - 1 for t in c["turns"]) / sum(c["wall_time"])
        for c in theirs
    ) / len(theirs)
    return [sum(accepted) / len(accepted), speed, base_speed, speed / base_speed]


def test_speed_md_is_what_specbench_speed_py_computes_on_the_answer_files(specbench_exported):
    from transformers import AutoTokenizer

    out, done = specbench_exported
    tokenizer = AutoTokenizer.from_pretrained(str(out / "tokenizer-tiny"))  # --tokenizer-path
    base = _answers(out / "ar-tiny.jsonl")
    # the re-tokenised count is not the generated one (the test would not tell them apart)
    assert any(
        sum(len(tokenizer(t).input_ids) - 1 for t in r["choices"][0]["turns"])
        != sum(r["choices"][0]["new_tokens"])
        for r in base
    )
    assert all(isinstance(r["question_id"], str) for r in base)  # the fixture's ids: strings
    shown = {
        tuple(c.strip() for c in line.strip("|").split("|")[:2]): line
        for line in done.text.splitlines()
        if line.startswith("| ") and "-tiny |" in line
    }
    for row in done.rows:
        method = _answers(out / f"{row.model_id}.jsonl")
        want = _speed_py(method, base, tokenizer, row.category)
        got = [row.mean_accepted_tokens, row.tokens_per_s, row.baseline_tokens_per_s, row.speedup]
        assert all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(got, want)), row
        cells = [c.strip() for c in shown[(row.model_id, row.category)].strip("|").split("|")]
        assert cells[3:] == [f"{x:.3f}" for x in want]  # speed.md to 3 digits
    assert (
        "re-tokenised with the tiny pair's byte-level tokenizer (--tokenizer-path "
        "tokenizer-tiny)" in done.text
    )
