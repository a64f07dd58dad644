"""Spec-Bench export of other inputs (``python -m specdec.report --format specbench``): an old
record without per-turn fields becomes one turn with its totals, records without output ids trim
the surplus and bad step counts are named, and the CLI skips an unreadable run, refuses it with
``--strict``, notes a run without a baseline and keeps the leaderboard as the default format.
Runs: ``specbench_runs`` (``tests/bench/conftest.py``), as in ``test_specbench_export.py``.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest

from specdec.bench.report import board as rp
from specdec.bench.report import specbench as sb
from specdec.bench.report.runs import read_run
from specdec.bench.report.specbench_answers import OLD_RECORD_NOTE
from specdec.errors import BadInput
from specdec.testing.run_files import read_jsonl

DATASETS = ("tiny", "tiny_sb")


def test_an_old_record_becomes_one_turn_with_its_totals(
    specbench_runs, specbench_exported, tmp_path
):
    out, _ = specbench_exported
    old = tmp_path / "old_sps"
    shutil.copytree(specbench_runs["sps"], old)
    for ds in DATASETS:
        path = old / "records" / f"{ds}.jsonl"
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        for r in recs:
            r.pop("turn_s"), r.pop("turn_steps")
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    rows = read_jsonl(sb.write_answers(read_run(old / "summary.json"), tmp_path / "o"))
    new = {r["question_id"]: r for r in read_jsonl(out / "sps-tiny.jsonl")}
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
    old = {
        "prompt_id": "p",
        "dataset": "d",
        "turns": 1,
        "text": "x",
        "new_tokens": 6,
        "accepted_per_step": [3, 3],
        "wall_s": 0.5,
        "prefill_s": 0.1,
    }
    choice, note = sb.choice_of(old)
    assert note is None and choice["accept_lengths"] == [4, 2]
    assert choice["new_tokens"] == [6] and math.isclose(choice["wall_time"][0], 0.6)
    bad = {**old, "output_ids": [[1] * 6], "turn_s": [0.6], "turn_steps": [3]}
    with pytest.raises(BadInput, match="record 'p' of dataset d: turn_steps sum to 3"):
        sb.choice_of(bad)
    with pytest.raises(BadInput, match="cannot have made 9 tokens"):
        sb.choice_of({**bad, "output_ids": [[1] * 9], "turn_steps": [2]})


def test_cli_writes_specbench_skips_an_unreadable_run_and_keeps_the_default(
    specbench_runs, tmp_path, capsys
):
    broken = tmp_path / "broken"
    shutil.copytree(specbench_runs["sps"], broken)
    (broken / "summary.json").write_text('{"method": "sps", "datas')  # cut short
    args = [
        str(specbench_runs["ar"]),
        str(specbench_runs["sps"]),
        str(broken),
        "--out",
        str(tmp_path / "sb"),
    ]
    assert rp.main([*args, "--format", "specbench"]) == 0
    captured = capsys.readouterr()
    assert f"skipped (unreadable): {broken / 'summary.json'}" in captured.err
    assert "| sps-tiny | overall |" in captured.out
    assert sorted(p.name for p in (tmp_path / "sb").iterdir()) == [
        "ar-tiny.jsonl",
        "speed.csv",
        "speed.md",
        "sps-tiny.jsonl",
        "tokenizer-tiny",
    ]
    assert rp.main([*args, "--format", "specbench", "--strict"]) == 2
    capsys.readouterr()
    assert rp.main([str(broken), "--format", "specbench", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: no readable summary.json")
    # a method run with no baseline among the inputs: answers and τ, no speedup, a note
    alone = tmp_path / "alone"
    assert rp.main([str(specbench_runs["sps"]), "--format", "specbench", "--out", str(alone)]) == 0
    assert "no speedup: sps-tiny: no `ar` run" in capsys.readouterr().err
    # the default format is still the leaderboard
    assert (
        rp.main(
            [
                str(specbench_runs["ar"]),
                str(specbench_runs["sps"]),
                "--no-plots",
                "--out",
                str(tmp_path / "lb"),
            ]
        )
        == 0
    )
    assert sorted(p.name for p in (tmp_path / "lb").iterdir()) == [
        "leaderboard.csv",
        "leaderboard.md",
        "leaderboard.tex",
    ]
