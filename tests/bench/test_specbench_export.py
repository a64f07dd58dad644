"""Spec-Bench-compatible export (``python -m specdec.report --format specbench``): answer files in
Spec-Bench's format and its speed table, checked against the runs' own records.

Runs: the tiny pair, ``benchmark=tiny2`` (the tiny dataset and
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
import shutil
from pathlib import Path

import pytest

import specdec.bench.run.runner as ev
from specdec.bench.report import board as rp
from specdec.bench.report import specbench as sb
from specdec.bench.report.runs import read_run
from specdec.bench.report.specbench_answers import OLD_RECORD_NOTE
from specdec.errors import BadInput
from specdec.testing.eval_cfg import eval_cfg

DATASETS = ("tiny", "tiny_sb")
CHOICE_KEYS = {"index", "turns", "decoding_steps", "new_tokens", "wall_time", "accept_lengths"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sbruns")
    same = ["model.draft_seed=0", "model.draft_layers=2"]  # the tiny draft = the tiny target
    for method, extra in (("ar", []), ("sps", same)):
        ev.run(eval_cfg(root / method, [f"method={method}", "benchmark=tiny2", "limit=4",
                                        "max_new_tokens=6", "warmup=0", "progress=false",
                                        *extra]))
    return {m: root / m for m in ("ar", "sps")}


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("sbout")
    return out, sb.export([runs["ar"], runs["sps"]], out, warn=False)


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for ds in DATASETS
            for line in (run_dir / "records" / f"{ds}.jsonl").read_text().splitlines()]


def _answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _split(lengths: list[int], steps: list[int]) -> list[list[int]]:
    out, i = [], 0
    for n in steps:
        out.append(lengths[i:i + n])
        i += n
    return out


def test_records_carry_per_turn_seconds_and_steps(runs):
    for method in ("ar", "sps"):
        for rec in _records(runs[method]):
            assert len(rec["turn_s"]) == len(rec["turn_steps"]) == rec["turns"]
            assert sum(rec["turn_steps"]) == rec["target_forwards"]
            assert math.isclose(sum(rec["turn_s"]), rec["total_s"], rel_tol=1e-9)


def test_answer_rows_follow_specbench_and_match_the_records(runs, exported):
    out, done = exported
    assert sorted(p.name for p in done.files) == ["ar-tiny.jsonl", "sps-tiny.jsonl"]
    for method in ("ar", "sps"):
        recs = _records(runs[method])
        rows = _answers(out / f"{method}-tiny.jsonl")
        assert [r["question_id"] for r in rows] == [r["prompt_id"] for r in recs]
        assert len({r["answer_id"] for r in rows}) == len(rows)
        for row, rec in zip(rows, recs):
            assert {"question_id", "category", "answer_id", "model_id", "choices",
                    "tstamp"} <= set(row) and "note" not in row
            assert row["model_id"] == f"{method}-tiny" and row["category"] == rec["category"]
            (choice,) = row["choices"]
            assert set(choice) == CHOICE_KEYS and choice["index"] == 0
            turns = rec["turns"]
            assert choice["turns"] == rec.get("answers", [rec["text"]]) and len(
                choice["turns"]) == turns
            assert len(choice["decoding_steps"]) == len(choice["new_tokens"]) == len(
                choice["wall_time"]) == turns
            assert sum(choice["new_tokens"]) == rec["new_tokens"]
            assert choice["new_tokens"] == [len(ids) for ids in rec["output_ids"]]
            assert sum(choice["decoding_steps"]) == len(choice["accept_lengths"]) == rec[
                "target_forwards"]
            per_turn = _split(choice["accept_lengths"], choice["decoding_steps"])
            assert [sum(t) for t in per_turn] == choice["new_tokens"]
            # a step adds its accepted tokens + 1, but a turn's last may be cut
            for steps, acc in zip(per_turn, _split(rec["accepted_per_step"],
                                                   choice["decoding_steps"])):
                assert steps[:-1] == [a + 1 for a in acc[:-1]] and 1 <= steps[-1] <= acc[-1] + 1
            if method == "ar":
                assert set(choice["accept_lengths"]) == {1}
            else:  # drafts accepted whole; the budget (6) cuts each turn's last step
                assert max(choice["accept_lengths"]) > 1 and choice["accept_lengths"][-1] < max(
                    choice["accept_lengths"])
            assert math.isclose(sum(choice["wall_time"]), rec["total_s"], rel_tol=1e-9)


def _tokens_per_s(recs: list[dict]) -> float:
    """Spec-Bench's tokens/s from our records: mean over prompts of new tokens / total seconds."""
    return sum(r["new_tokens"] / r["total_s"] for r in recs) / len(recs)


#: the categories speed.py's mt_bench task selects
MT_BENCH = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem",
            "humanities"}


def _task(category: str) -> str:
    return "mt_bench" if category in MT_BENCH else category


def test_speed_table_equals_tau_and_the_tokens_per_s_of_the_records(runs, exported):
    out, done = exported
    recs = {m: _records(runs[m]) for m in ("ar", "sps")}
    summary = json.loads((runs["sps"] / "summary.json").read_text())
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
    base_speed = sum(sum(len(tokenizer(t).input_ids) - 1 for t in c["turns"])
                     / sum(c["wall_time"]) for c in theirs) / len(theirs)
    return [sum(accepted) / len(accepted), speed, base_speed, speed / base_speed]


def test_speed_md_is_what_specbench_speed_py_computes_on_the_answer_files(exported):
    from transformers import AutoTokenizer

    out, done = exported
    tokenizer = AutoTokenizer.from_pretrained(str(out / "tokenizer-tiny"))  # --tokenizer-path
    base = _answers(out / "ar-tiny.jsonl")
    # the re-tokenised count is not the generated one (the test would not tell them apart)
    assert any(sum(len(tokenizer(t).input_ids) - 1 for t in r["choices"][0]["turns"])
               != sum(r["choices"][0]["new_tokens"]) for r in base)
    assert all(isinstance(r["question_id"], str) for r in base)  # the fixture's ids: strings
    shown = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line
             for line in done.text.splitlines() if line.startswith("| ") and "-tiny |" in line}
    for row in done.rows:
        method = _answers(out / f"{row.model_id}.jsonl")
        want = _speed_py(method, base, tokenizer, row.category)
        got = [row.mean_accepted_tokens, row.tokens_per_s, row.baseline_tokens_per_s,
               row.speedup]
        assert all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(got, want)), row
        cells = [c.strip() for c in shown[(row.model_id, row.category)].strip("|").split("|")]
        assert cells[3:] == [f"{x:.3f}" for x in want]  # speed.md to 3 digits
    assert "re-tokenised with the tiny pair's byte-level tokenizer (--tokenizer-path " \
           "tokenizer-tiny)" in done.text


def test_an_old_record_becomes_one_turn_with_its_totals(runs, exported, tmp_path):
    out, _ = exported
    old = tmp_path / "old_sps"
    shutil.copytree(runs["sps"], old)
    for ds in DATASETS:
        path = old / "records" / f"{ds}.jsonl"
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        for r in recs:
            r.pop("turn_s"), r.pop("turn_steps")
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    rows = _answers(sb.write_answers(read_run(old / "summary.json"), tmp_path / "o"))
    new = {r["question_id"]: r for r in _answers(out / "sps-tiny.jsonl")}
    for row in rows:
        (choice,), now = row["choices"], new[row["question_id"]]["choices"][0]
        # the per-step tokens are rebuilt exactly; only the per-turn split of time is lost
        assert choice["accept_lengths"] == now["accept_lengths"]
        assert choice["new_tokens"] == [sum(now["new_tokens"])]
        assert choice["decoding_steps"] == [sum(now["decoding_steps"])]
        assert math.isclose(choice["wall_time"][0], sum(now["wall_time"]), rel_tol=1e-9)
        several = len(now["turns"]) > 1
        assert row.get("note") == (OLD_RECORD_NOTE if several else None)
        assert choice["turns"] == (["\n\n".join(now["turns"])] if several else now["turns"])
    assert any("note" in r for r in rows)  # the two-turn item


def test_records_without_output_ids_trim_the_surplus_and_bad_steps_are_named():
    old = {"prompt_id": "p", "dataset": "d", "turns": 1, "text": "x", "new_tokens": 6,
           "accepted_per_step": [3, 3], "wall_s": 0.5, "prefill_s": 0.1}
    choice, note = sb.choice_of(old)
    assert note is None and choice["accept_lengths"] == [4, 2]
    assert choice["new_tokens"] == [6] and math.isclose(choice["wall_time"][0], 0.6)
    bad = {**old, "output_ids": [[1] * 6], "turn_s": [0.6], "turn_steps": [3]}
    with pytest.raises(BadInput, match="record 'p' of dataset d: turn_steps sum to 3"):
        sb.choice_of(bad)
    with pytest.raises(BadInput, match="cannot have made 9 tokens"):
        sb.choice_of({**bad, "output_ids": [[1] * 9], "turn_steps": [2]})


def test_cli_writes_specbench_skips_an_unreadable_run_and_keeps_the_default(runs, tmp_path,
                                                                            capsys):
    broken = tmp_path / "broken"
    shutil.copytree(runs["sps"], broken)
    (broken / "summary.json").write_text('{"method": "sps", "datas')  # cut short
    args = [str(runs["ar"]), str(runs["sps"]), str(broken), "--out", str(tmp_path / "sb")]
    assert rp.main([*args, "--format", "specbench"]) == 0
    captured = capsys.readouterr()
    assert f"skipped (unreadable): {broken / 'summary.json'}" in captured.err
    assert "| sps-tiny | overall |" in captured.out
    assert sorted(p.name for p in (tmp_path / "sb").iterdir()) == [
        "ar-tiny.jsonl", "speed.csv", "speed.md", "sps-tiny.jsonl", "tokenizer-tiny"]
    assert rp.main([*args, "--format", "specbench", "--strict"]) == 2
    capsys.readouterr()
    assert rp.main([str(broken), "--format", "specbench", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: no readable summary.json")
    # a method run with no baseline among the inputs: answers and τ, no speedup, a note
    alone = tmp_path / "alone"
    assert rp.main([str(runs["sps"]), "--format", "specbench", "--out", str(alone)]) == 0
    assert "no speedup: sps-tiny: no `ar` run" in capsys.readouterr().err
    # the default format is still the leaderboard
    assert rp.main([str(runs["ar"]), str(runs["sps"]), "--no-plots", "--out",
                    str(tmp_path / "lb")]) == 0
    assert sorted(p.name for p in (tmp_path / "lb").iterdir()) == [
        "leaderboard.csv", "leaderboard.md", "leaderboard.tex"]
