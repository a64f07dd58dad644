"""The eval run's loggers (``specdec.bench.run.loggers``, the ``logger`` group) in-process on the
tiny pair: ``logger=csv`` writes per-dataset metrics, ``logger=wandb`` logs metrics, records and
tables offline.
"""

from __future__ import annotations

import json

import specdec.bench.run.runner as ev
from specdec.testing.eval_cfg import eval_cfg


def test_csv_logger_writes_per_dataset_metrics(tmp_path):
    ev.run(eval_cfg(tmp_path, ["method=ar", "logger=csv", "limit=1"]))
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert rows[0] == "dataset,metric,value"
    assert any(r.startswith("tiny,block_efficiency,1.0") for r in rows)
    assert any(r.startswith("overall,tokens_per_s,") for r in rows)


def test_wandb_logger_works_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wb" / "data"))  # staged artifacts
    monkeypatch.setenv("WANDB_SILENT", "true")
    ev.run(eval_cfg(tmp_path / "run", ["method=sps", "logger=wandb", "limit=1"]))
    runs = list((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    # the offline run log is protobuf (no Python reader in wandb>=0.31): keys are stored verbatim
    data = next(runs[0].glob("run-*.wandb")).read_bytes()
    for key in (
        b"eval/tiny/block_efficiency",
        b"eval/overall/tokens_per_s",
        b"records/tiny",
        b"method_name",
        b"table-file",
    ):
        assert key in data, key
    tables = list((runs[0] / "files" / "media" / "table" / "records").glob("tiny_*.table.json"))
    table = json.loads(tables[0].read_text())
    assert "prompt_id" in table["columns"] and table["data"][0][0] == "tiny-0"
