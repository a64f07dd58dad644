"""The typed run summary (``specdec.bench.run_summary.RunSummary``) keeps ``summary.json`` as is.

``tests/fixtures/summary_934fe81/`` holds an ``ar`` and an ``sps`` run of the tiny pair written by
the code at commit 934fe81, before the summary was typed (``python -m specdec.eval -m
method=ar,sps model=tiny benchmark=tiny limit=2``: summaries, records, and the sweep's
``leaderboard.md`` / ``leaderboard.csv``). Reading those summaries and writing them back gives the
same bytes, and the report of those runs is the one that sweep wrote.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest

from specdec.bench.report.board import board
from specdec.bench.report.runs import read_run
from specdec.bench.run.summary import write_summaries
from specdec.bench.run_summary import LATE, ORDER, RunSummary
from specdec.bench.rundir import dumps
from specdec.bench.timing import TimingCheck
from specdec.testing.paths import FIXTURES

OLD = FIXTURES / "summary_934fe81"
FILES = [
    OLD / "ar" / "summary.json",
    OLD / "sps" / "summary.json",
    OLD / "sps" / "summary" / "tiny.json",
]


@pytest.mark.parametrize("file", FILES, ids=lambda p: str(p.relative_to(OLD)))
def test_a_summary_written_before_the_type_reads_and_writes_back_byte_for_byte(file):
    text = file.read_text(encoding="utf-8")
    summary = RunSummary.from_json(json.loads(text))
    assert summary.extra == {}  # every key of the old file is a field
    assert dumps(summary.to_json(), indent=2) == text
    assert list(summary.to_json()) == list(json.loads(text))  # key order included


def test_the_old_summaries_read_as_typed_runs():
    sps = read_run(OLD / "sps" / "summary.json")
    assert isinstance(sps.summary, RunSummary)
    assert (sps.method, sps.summary.complete, sps.incomplete) == ("sps", True, None)
    assert sps.summary.datasets_done == ["tiny"] and sps.summary.cost_model is True
    assert sps.summary.sweep_objective_source.startswith("modeled_speedup_vs_ar")
    assert sps.summary.overall["sweep_objective"] == sps.summary.overall["modeled_speedup_vs_ar"]
    assert len(sps.records("tiny")) == sps.summary.datasets["tiny"]["prompts"] == 2


def test_the_report_of_the_old_runs_is_the_one_their_sweep_wrote(tmp_path):
    for method in ("ar", "sps"):  # the sweep's layout: the CSV names runs relative to its folder
        shutil.copytree(OLD / method, tmp_path / method)
    out = tmp_path / "leaderboard" / "ar+sps-5501e517"
    written = board([tmp_path / "ar", tmp_path / "sps"], out, plots=False, warn=False)
    assert written.text == (OLD / "leaderboard.md").read_text()
    assert (out / "leaderboard.md").read_text() == (OLD / "leaderboard.md").read_text()
    assert (out / "leaderboard.csv").read_text() == (OLD / "leaderboard.csv").read_text()


def _full() -> RunSummary:
    return RunSummary(
        method="sps",
        datasets={"tiny": {"prompts": 2, "wall_s": 1.5}},
        lossless=True,
        model={"name": "tiny"},
        learned_weights={},
        prompt_files={"tiny": "ab"},
        sampling={"temperature": 0.0},
        seed=0,
        machine={"cpu": "x"},
        software={"torch": "2"},
        provenance={"git_commit": "c"},
        config_hash="0123",
        complete=True,
        datasets_done=["tiny"],
        progress={"tiny": {"recorded": 2, "expected": 2}},
        cost_model=True,
        cost_table={"times": {}},
        overall={"prompts": 2, "wall_s": 1.5},
        config={"seed": 0},
        world_size=2,
        calibration={"times": {}},
        cost_fit={"fitted": 1},
        cost_tables={"tiny": {"times": {}}},
        cost_fits={"tiny": {"fitted": 1}},
        cost_table_monotone=True,
        sweep_objective_source="self_modeled_speedup (why)",
        timing=TimingCheck(table=["tiny: why"], load=[["start", 0.5, 0.4, 0.3]], cores=2),
    )


def test_round_trip_keeps_every_field_and_the_file_order():
    summary = _full()
    data = summary.to_json()
    assert list(data) == [*ORDER, *LATE]
    assert RunSummary.from_json(json.loads(dumps(data))) == summary


def test_late_keys_are_written_only_once_set_and_unknown_keys_are_kept():
    summary = RunSummary("ar", {}, cost_table=None)
    data = summary.to_json()
    assert list(data) == list(ORDER) and data["cost_table"] is None  # null, not left out
    failed = {**data, "complete": False, "error": "job failed: boom"}
    back = RunSummary.from_json(failed)
    assert back.extra == {"error": "job failed: boom"} and back.to_json() == failed


def test_the_renamed_estimate_reads_under_its_new_name_without_touching_the_input():
    data = {
        "method": "sps",
        "datasets": {"tiny": {"modeled_speedup": 1.5}},
        "overall": {"modeled_speedup": 1.25},
    }
    summary = RunSummary.from_json(data)
    assert summary.datasets["tiny"] == {"self_modeled_speedup": 1.5}
    assert summary.overall == {"self_modeled_speedup": 1.25}
    assert data["datasets"]["tiny"] == {"modeled_speedup": 1.5}


def test_write_summaries_writes_the_typed_summary_and_each_dataset_alone(tmp_path):
    summary = _full()
    summary.datasets["tiny"]["acceptance_rate"] = math.nan  # strict JSON: null
    summary.complete, summary.world_size = False, None
    (tmp_path / "summary").mkdir()  # the runner makes it before the first write
    write_summaries(tmp_path, summary, {"tiny": {"recorded": 2, "expected": 2}}, "tiny")
    whole = json.loads((tmp_path / "summary.json").read_text())
    assert whole == json.loads(dumps(summary.to_json())) and whole["complete"] is True
    assert whole["datasets"]["tiny"]["acceptance_rate"] is None and "world_size" not in whole
    one = json.loads((tmp_path / "summary" / "tiny.json").read_text())
    assert list(one) == list(whole) and one["datasets_done"] == ["tiny"]
