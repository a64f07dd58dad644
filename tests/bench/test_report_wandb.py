"""W&B plumbing of eval runs and reports: run names, groups and job types from method, pair and
benchmark; the summary and the leaderboard folder as artifacts; the leaderboard as a W&B Table
and its plots as images (W&B offline, files in tmp dirs; a fake ``wandb`` where only the calls
matter, ``specdec.testing.fake_wandb``). The trained weights an eval run reads as its input
artifacts: ``test_wandb_lineage.py``."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import specdec.bench.run.runner as ev
from specdec.bench.report.board import report
from specdec.bench.run.leaderboard import PrintLeaderboard
from specdec.bench.wandb_artifacts import (
    RunTag,
    WandbReport,
    artifact_name,
    common_group,
    log_board,
    log_files,
)
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.fake_wandb import FakeRun, FakeWandb


@pytest.fixture
def offline(tmp_path, monkeypatch) -> Path:
    """W&B offline with its run files, staged artifacts and cache under ``tmp_path/wb``."""
    root = tmp_path / "wb"
    for key, value in {
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": root,
        "WANDB_DATA_DIR": root / "data",
        "WANDB_CACHE_DIR": root / "cache",
    }.items():
        monkeypatch.setenv(key, str(value))
    return root


def _run_files(root: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted((root / "wandb").glob("offline-run-*/run-*.wandb"))]


def _staged(root: Path) -> list[bytes]:
    return [p.read_bytes() for p in (root / "data" / "artifacts" / "staging").iterdir()]


def test_run_tag_names_group_and_job_type():
    summary = {
        "method": "sps",
        "model": {"name": "smollm2"},
        "seed": 3,
        "prompt_files": {"gsm8k": "x", "alpaca": "y"},
        "datasets": {},
    }
    tag = RunTag.from_summary(summary)
    assert (tag.name, tag.group, tag.job_type) == (
        "sps-smollm2-alpaca+gsm8k-s3",
        "smollm2/alpaca+gsm8k",
        "sps",
    )
    assert common_group([summary, {**summary, "method": "ar"}]) == "smollm2/alpaca+gsm8k"
    assert common_group([summary, {**summary, "model": {"name": "tiny"}}]) is None
    assert artifact_name("summary-sps/tiny:x y") == "summary-sps-tiny-x-y"


def test_log_files_adds_every_file_under_its_name_and_refuses_none(tmp_path):
    a, b = tmp_path / "summary.json", tmp_path / "tiny.json"
    a.write_text("{}")
    b.write_text("[1]")
    run = FakeRun()
    log_files(
        run, FakeWandb, name="summary-sps", kind="summary", files=[a, b], metadata={"group": "g"}
    )
    (art,) = run.logged
    assert (art.name, art.type, art.metadata) == ("summary-sps", "summary", {"group": "g"})
    assert art.files == [("{}", "summary.json"), ("[1]", "tiny.json")]
    with pytest.raises(ValueError, match="no files for W&B artifact 'x'"):
        log_files(run, FakeWandb, name="x", kind="summary", files=[])


def test_eval_run_is_named_from_the_run_and_logs_its_summary_artifact(tmp_path, offline):
    summary = ev.run(eval_cfg(tmp_path / "run", ["method=sps", "logger=wandb", "limit=1"]))
    (data,) = _run_files(offline)
    tag = RunTag.from_summary(summary)
    assert tag.name == "sps-tiny-tiny-s0" and tag.group == "tiny/tiny"
    for key in (
        tag.name.encode(),
        b"tiny/tiny",
        b"summary-" + tag.name.encode(),
        b"summary.json",
        b"eval/overall/self_modeled_speedup",
        b"eval/overall/sweep_objective",
    ):
        assert key in data, key
    on_disk = (tmp_path / "run" / "summary.json").read_bytes()
    assert on_disk in _staged(offline)  # the artifact holds the final summary.json
    assert (
        json.loads(on_disk)["overall"]["sweep_objective"]
        == summary["overall"]["self_modeled_speedup"]
    )  # outside Hydra no ar run is known: the run's own estimate


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> tuple[Path, Path]:
    """An sps run and its report folder (markdown, csv, plots)."""
    root = tmp_path_factory.mktemp("board")
    ev.run(eval_cfg(root / "sps", ["method=sps", "limit=1"]))
    report([root / "sps"], root / "out")
    return root / "sps", root / "out"


def test_report_folder_becomes_a_leaderboard_artifact(board, offline):
    _, out = board
    name = WandbReport(project="specdec", mode="offline").log(out, group="tiny/tiny")
    assert name == "leaderboard-out"
    (data,) = _run_files(offline)
    for key in (
        b"leaderboard-out",
        b"tiny/tiny",
        b"report-out",
        b"leaderboard.csv",
        b"speedup.png",
    ):
        assert key in data, key
    staged = _staged(offline)
    for file in (
        "leaderboard.md",
        "leaderboard.csv",
        "leaderboard.tex",
        "speedup.png",
        "acceptance.png",
        "speedup.pdf",
        "acceptance.pdf",
    ):
        assert (out / file).read_bytes() in staged, file
    # the leaderboard as a W&B Table and each plot as an image, browsable in the run
    (files,) = (offline / "wandb").glob("offline-run-*/files")
    (table,) = (files / "media" / "table").glob("leaderboard_*.table.json")
    logged = json.loads(table.read_text())
    with (out / "leaderboard.csv").open() as f:
        board = list(csv.DictReader(f))
    assert logged["columns"] == list(board[0])
    assert [r[:3] for r in logged["data"]] == [
        [b["method"], b["method_name"], b["dataset"]] for b in board
    ]
    images = sorted(p.name.split("_")[0] for p in (files / "media" / "images" / "plots").iterdir())
    assert images == ["acceptance", "block", "speedup"]


def test_log_board_logs_the_csv_as_a_table_and_each_png_as_an_image(tmp_path):
    (tmp_path / "leaderboard.csv").write_text("method,speedup,refused\nar,1.0,\nsps,,why\n")
    for stem in ("speedup", "acceptance"):
        (tmp_path / f"{stem}.png").write_bytes(b"png")
    (tmp_path / "speedup.pdf").write_bytes(b"pdf")  # the PDF is in the artifact, not an image
    run = FakeRun()
    assert log_board(run, FakeWandb, tmp_path) == [
        "leaderboard",
        "plots/acceptance",
        "plots/speedup",
    ]
    ((values),) = run.history  # one step
    table = values["leaderboard"]
    assert table.columns == ["method", "speedup", "refused"]
    assert table.data == [["ar", 1.0, None], ["sps", None, "why"]]  # empty cells: None
    assert values["plots/speedup"] == ("image", "speedup.png", "speedup")
    assert log_board(run, FakeWandb, tmp_path / "nothing") == [] and len(run.history) == 1


def test_the_report_run_never_takes_a_sweep_trials_run_id(board, offline, monkeypatch):
    """Under ``wandb agent`` the trial's id is in the environment; the leaderboard callback's
    report run in that process is another run: its own id, and the trial's id left in place."""
    _, out = board
    monkeypatch.setenv("WANDB_RUN_ID", "trial0000042")
    WandbReport(project="specdec", mode="offline").log(out, group="tiny/tiny")
    (folder,) = (offline / "wandb").glob("offline-run-*")
    assert not folder.name.endswith("trial0000042"), folder.name
    assert os.environ["WANDB_RUN_ID"] == "trial0000042"  # the eval run's, untouched


class RecordingReport:
    """Stands in for ``WandbReport`` in a sweep config: records what it was asked to log."""

    calls: list[tuple[Path, str | None]] = []

    def __init__(self, **settings):
        self.settings = settings

    def log(self, out_dir, *, group=None):
        RecordingReport.calls.append((Path(out_dir), group))
        return "leaderboard-x"


def test_sweep_callback_logs_the_board_through_the_loggers_report_node(board, capsys):
    run_dir, _ = board
    callback = PrintLeaderboard(plots=False)
    callback.dirs.append(run_dir)
    callback.methods.append("sps")
    RecordingReport.calls.clear()
    node = {"_target_": f"{__name__}.RecordingReport", "project": "p"}
    callback.on_multirun_end(OmegaConf.create({"logger": {"report": node}}))
    ((out, group),) = RecordingReport.calls
    assert (out / "leaderboard.csv").exists() and group == "tiny/tiny"
    assert "as artifact leaderboard-x" in capsys.readouterr().out
    callback.on_multirun_end(OmegaConf.create({"logger": {"report": None}}))
    assert len(RecordingReport.calls) == 1  # logger=none/csv: nothing logged
