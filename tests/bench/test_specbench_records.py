"""The Spec-Bench export trusts the records (``python -m specdec.report --format specbench``): a
run its records do not complete (stopped early, records deleted) is left out and named instead of
exported as "0 questions, nan", a record file ending in a cut-off line is named, ``--strict``
exits 2 on both, and a prompt id that spells an integer is written as Spec-Bench's integer
``question_id``.

Runs: the tiny pair on its tiny benchmark, ``ar`` and ``sps`` at temperature 0, two prompts each;
each test edits a copy of a run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specdec.bench.report import board as rp
from specdec.bench.report import specbench as sb
from specdec.testing.run_files import read_jsonl


@pytest.fixture
def runs(ar_sps_runs) -> dict[str, Path]:
    return ar_sps_runs  # shared by the modules that read them (tests/bench/conftest.py)


def _copy(src: Path, dst: Path, keep_records: int | None = None) -> Path:
    """A copy of the run ``src`` with its tiny records cut to the first ``keep_records`` lines
    (its summary unchanged)."""
    shutil.copytree(src, dst)
    if keep_records is not None:
        file = dst / "records" / "tiny.jsonl"
        file.write_text("".join(f"{x}\n" for x in file.read_text().splitlines()[:keep_records]))
    return dst


@pytest.mark.parametrize("case", ["half", "gone"])
def test_incomplete_and_recordless_runs_are_left_out_named_and_fail_strict(
    runs, tmp_path, capsys, case
):
    broken = _copy(runs["sps"], tmp_path / case, keep_records=1)
    if case == "gone":
        shutil.rmtree(broken / "records")
    why = {"half": "1 of 2 prompts recorded)", "gone": "no records under config hash"}[case]
    out = tmp_path / "sb"
    args = [str(runs["ar"]), str(broken), "--format", "specbench", "--out", str(out)]
    assert rp.main(args) == 0
    err = capsys.readouterr().err
    assert f"left out (not complete): {broken}: stopped before finishing tiny ({why}" in err
    assert sorted(p.name for p in out.glob("*.jsonl")) == ["ar-tiny.jsonl"]  # no empty file
    text = (out / "speed.md").read_text()
    assert "| sps-tiny" not in text and "nan" not in text and "| ar-tiny | overall |" in text
    assert f"- ✗ left out (not complete): {broken}: " in text
    assert rp.main([*args, "--strict"]) == 2
    capsys.readouterr()
    assert rp.main([str(broken), "--format", "specbench", "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: no complete run among the inputs")


def test_a_cut_off_last_record_is_named_and_fails_strict(runs, tmp_path, capsys):
    cut = _copy(runs["sps"], tmp_path / "cut")
    file = cut / "records" / "tiny.jsonl"
    data = file.read_bytes()
    file.write_bytes(data[: len(data) - len(data.splitlines()[-1]) // 2 - 1])  # half a line
    done = sb.export([runs["ar"], cut], tmp_path / "sb", warn=False)
    (line,) = [d for d in done.doubts if d.startswith(str(file))]
    assert "last line is cut off" in line and "not counted" in line
    assert [x.split(":")[0] for x in done.left_out] == [str(cut)]
    assert f"- ✗ summary vs records: {line}" in done.text
    args = [str(runs["ar"]), str(cut), "--format", "specbench", "--out", str(tmp_path / "c")]
    assert rp.main(args) == 0 and f"summary vs records: {line}" in capsys.readouterr().err
    assert rp.main([*args, "--strict"]) == 2


def test_a_prompt_id_that_spells_an_integer_is_an_integer_question_id(runs, tmp_path):
    numbered = _copy(runs["ar"], tmp_path / "ar")
    file = numbered / "records" / "tiny.jsonl"
    recs = read_jsonl(file)
    for i, rec in enumerate(recs):  # Spec-Bench's question file numbers its questions
        rec["prompt_id"] = str(81 + i)
    recs[-1]["prompt_id"] = "q-7"  # another dataset's id stays a string
    file.write_text("".join(json.dumps(r) + "\n" for r in recs))
    done = sb.export([numbered], tmp_path / "sb", warn=False)
    rows = read_jsonl(done.files[0])
    assert [r["question_id"] for r in rows] == [*range(81, 81 + len(recs) - 1), "q-7"]
    assert isinstance(rows[0]["question_id"], int)
