"""The leaderboard trusts the records over ``summary.json`` (``specdec.bench.report.audit``):
counts, completeness and the greedy check come from the records, a summary that disagrees is
named (stderr and Markdown; ``--strict`` exits 2), among copies of a run the complete one with the
most prompts is kept, and ``--out`` naming a file is one error line.

Runs: the tiny pair on its tiny benchmark, ``ar`` and ``sps`` at temperature 0, two prompts each;
each test edits a copy of a run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specdec.bench.report import board as rp


@pytest.fixture
def runs(ar_sps_runs) -> dict[str, Path]:
    return ar_sps_runs  # shared by the modules that read them (tests/bench/conftest.py)


def _copy(src: Path, dst: Path, edit=None, keep_records: int | None = None) -> Path:
    """A copy of the run ``src``: its summary through ``edit``, its tiny records cut to the
    first ``keep_records`` lines."""
    shutil.copytree(src, dst)
    summary = json.loads((dst / "summary.json").read_text())
    if edit is not None:
        edit(summary)
    (dst / "summary.json").write_text(json.dumps(summary))
    if keep_records is not None:
        file = dst / "records" / "tiny.jsonl"
        file.write_text("".join(f"{x}\n" for x in file.read_text().splitlines()[:keep_records]))
    return dst


def _line(text: str, label: str) -> list[str]:
    row = next(x for x in text.splitlines() if x.startswith(f"| {label} | tiny |"))
    return [c.strip() for c in row.strip("|").split("|")]


def _header(text: str) -> list[str]:
    row = next(x for x in text.splitlines() if x.startswith("| method |"))
    return [c.strip() for c in row.strip("|").split("|")]


def _strict(args: list[str], capsys) -> tuple[int, int, str]:
    """The exit status without and with ``--strict``, and the first call's stderr."""
    plain = rp.main(args)
    err = capsys.readouterr().err
    return plain, rp.main([*args, "--strict"]), err


def test_an_edited_prompt_count_shows_the_records_and_fails_strict(runs, tmp_path, capsys):
    def edit(s):
        s["datasets"]["tiny"]["prompts"] = 99

    edited = _copy(runs["sps"], tmp_path / "sps", edit)
    board = rp.board([runs["ar"], edited], tmp_path / "out", plots=False, warn=False)
    cells = dict(zip(_header(board.text), _line(board.text, "sps")))
    assert cells["prompts"] == "2" and cells["complete"] == "yes"  # two records, both expected
    assert board.doubts == [f"{edited / 'summary.json'}: tiny: prompts 99, but 2 records"]
    assert "## ✗ Summaries against their records" in board.text
    assert f"- {board.doubts[0]}" in board.text
    args = [str(runs["ar"]), str(edited), "--no-plots", "--out", str(tmp_path / "cli")]
    plain, strict, err = _strict(args, capsys)
    assert (plain, strict) == (0, 2)
    assert f"summary vs records: {board.doubts[0]}" in err


def test_a_false_complete_shows_no_and_fails_strict(runs, tmp_path, capsys):
    cut = _copy(runs["sps"], tmp_path / "sps", keep_records=1)  # the summary still says complete
    board = rp.board([runs["ar"], cut], tmp_path / "out", plots=False, warn=False)
    cells = dict(zip(_header(board.text), _line(board.text, "sps")))
    assert cells["complete"] == "no" and cells["prompts"] == "1"
    assert "## Incomplete runs" in board.text
    assert f"{cut}: stopped before finishing tiny (1 of 2 prompts recorded)" in board.text
    assert (
        f"{cut / 'summary.json'}: complete: true, but the records leave tiny (1 of 2 "
        "prompts recorded)" in board.doubts
    )
    args = [str(runs["ar"]), str(cut), "--no-plots", "--out", str(tmp_path / "cli")]
    plain, strict, err = _strict(args, capsys)
    assert (plain, strict) == (0, 2) and f"incomplete: {cut}" in err


def test_a_changed_config_hash_keeps_the_greedy_check_and_is_named(runs, tmp_path, capsys):
    def edit(s):
        s["config_hash"] = "0123456789ab"

    edited = _copy(runs["sps"], tmp_path / "sps", edit)
    board = rp.board([runs["ar"], edited], tmp_path / "out", plots=False, warn=False)
    cells = dict(zip(_header(board.text), _line(board.text, "sps")))
    assert cells["greedy = ar"] == "1.000" and cells["prompts"] == "2"  # the records, found
    real = json.loads((runs["sps"] / "summary.json").read_text())["config_hash"]
    (doubt,) = board.doubts
    assert doubt.startswith(
        f"{edited / 'summary.json'}: config_hash '0123456789ab' matches no "
        f"record; its config hashes to '{real}'"
    )
    args = [str(runs["ar"]), str(edited), "--no-plots", "--out", str(tmp_path / "cli")]
    assert _strict(args, capsys)[:2] == (0, 2)


def test_a_run_killed_mid_dataset_is_incomplete_and_not_in_doubt(runs, tmp_path):
    def started(s):  # the summary written when the run started: nothing summarised yet
        s.update(
            complete=False,
            datasets_done=[],
            datasets={},
            overall={},
            progress={"tiny": {"recorded": 0, "expected": 2}},
        )

    killed = _copy(runs["sps"], tmp_path / "sps", started, keep_records=1)
    board = rp.board([runs["ar"], killed], tmp_path / "out", plots=False, warn=False)
    assert board.doubts == []  # progress is a snapshot until the dataset is summarised
    assert not [r for r in board.rows if r.run.path == killed]  # no dataset summarised


def test_records_deleted_show_no_prompts_and_an_incomplete_run(runs, tmp_path, capsys):
    gone = _copy(runs["sps"], tmp_path / "sps")
    shutil.rmtree(gone / "records")
    board = rp.board([runs["ar"], gone], tmp_path / "out", plots=False, warn=False)
    cells = dict(zip(_header(board.text), _line(board.text, "sps")))
    assert cells["prompts"] == "0" and cells["complete"] == "no"
    assert f"{gone / 'summary.json'}: tiny: prompts 2, but 0 records" in board.doubts
    args = [str(runs["ar"]), str(gone), "--no-plots", "--out", str(tmp_path / "cli")]
    assert _strict(args, capsys)[:2] == (0, 2)


def test_of_copies_the_complete_one_with_the_most_prompts_is_kept(runs, tmp_path, capsys):
    half = _copy(runs["sps"], tmp_path / "a_half", keep_records=1)  # first by path order
    whole = _copy(runs["sps"], tmp_path / "b_whole")
    board = rp.board([runs["ar"], half, whole], tmp_path / "out", plots=False, warn=False)
    (sps,) = [r for r in board.rows if r.run.method == "sps"]
    assert sps.run.path == whole and sps.run.incomplete is None
    assert board.copies == [
        f"{half}: same configuration and seed as {whole} (a copy of one measurement, not a "
        f"repeat: repeats differ in their seed); counted once: kept {whole} (complete, 2 "
        "prompts) over this copy (incomplete, 1 prompts)"
    ]
    rp.main([str(runs["ar"]), str(half), str(whole), "--no-plots", "--out", str(tmp_path / "c")])
    assert f"counted once: {board.copies[0]}" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["leaderboard", "specbench"])
def test_out_naming_a_file_is_one_error_line(runs, tmp_path, capsys, fmt):
    file = tmp_path / "report.md"
    file.write_text("not a folder\n")
    for out in (file, file / "below"):
        assert rp.main([str(runs["ar"]), "--format", fmt, "--out", str(out)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: --out {out}") and "folder" in err[0]
    assert file.read_text() == "not a folder\n"
