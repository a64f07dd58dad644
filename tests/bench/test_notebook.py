"""``notebooks/analysis.ipynb`` runs on a tiny run folder and builds the leaderboard and plots.

The code cells are executed in order in one namespace (nbclient is not a dependency), with the
parameter cell's ``RUN_DIR`` replaced by a folder of tiny ``ar`` and ``sps`` runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import specdec.bench.run.runner as ev
from specdec.bench.report.frames import newest_runs
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO

NOTEBOOK = REPO / "notebooks" / "analysis.ipynb"


@pytest.fixture(scope="module")
def run_root(tmp_path_factory) -> Path:
    """``<root>/eval/tiny/tiny/{ar,sps}`` as conf/eval.yaml lays runs out; the sps draft is a copy
    of the target, so every draft token is accepted (τ > 1, acceptance 1)."""
    root = tmp_path_factory.mktemp("outputs")
    for method, extra in (("ar", []), ("sps", ["model.draft_seed=0", "model.draft_layers=2"])):
        ev.run(eval_cfg(root / "eval" / "tiny" / "tiny" / method, [f"method={method}", *extra]))
    return root


def _cells() -> list[dict]:
    return json.loads(NOTEBOOK.read_text())["cells"]


def test_notebook_is_nbformat4_with_outputs_cleared_and_a_parameter_cell_first():
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4 and nb["metadata"]["kernelspec"]["language"] == "python"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert "parameters" in code[0]["metadata"]["tags"]
    assert "RUN_DIR = None" in "".join(code[0]["source"])
    assert all(isinstance(c["source"], list) and c["id"] for c in nb["cells"])


def test_notebook_builds_the_leaderboard_records_and_plots_of_a_run_folder(run_root):
    import matplotlib

    matplotlib.use("Agg")
    run_dir = run_root / "eval" / "tiny" / "tiny"
    ns: dict = {}
    for i, cell in enumerate(c for c in _cells() if c["cell_type"] == "code"):
        exec(compile("".join(cell["source"]), f"analysis.ipynb cell {i}", "exec"), ns)
        if i == 0:
            ns["RUN_DIR"] = str(run_dir)
    summaries = {m: json.loads((run_dir / m / "summary.json").read_text()) for m in ("ar", "sps")}
    walls = {m: s["datasets"]["tiny"]["wall_s"] for m, s in summaries.items()}
    # 1. the leaderboard: one row per method and dataset, speedup = ar wall / method wall
    board = ns["board"].set_index(["method", "dataset"])
    assert sorted(board.index) == [("ar", "tiny"), ("sps", "tiny")]
    assert board.loc[("sps", "tiny"), "speedup"] == pytest.approx(walls["ar"] / walls["sps"])
    assert board.loc[("ar", "tiny"), "speedup"] == 1.0
    assert board.loc[("sps", "tiny"), "tau"] > 1.0 == board.loc[("ar", "tiny"), "tau"]
    assert board.loc[("sps", "tiny"), "acceptance"] == 1.0
    # 2. the records: one row per recorded prompt of each run
    records = ns["records"]
    assert sorted(records.groupby("method").size().items()) == [("ar", 2), ("sps", 2)]
    assert (records["tau"] == records["new_tokens"] / records["target_forwards"]).all()
    # 3. the plots: a speedup bar per method, sps's per-position acceptance curve
    bars = ns["speedup_fig"].axes[0].patches
    assert sorted(b.get_height() for b in bars) == pytest.approx(
        sorted([1.0, walls["ar"] / walls["sps"]])
    )
    (line,) = ns["acceptance_fig"].axes[0].lines  # ar drafts nothing: no curve
    assert list(line.get_ydata()) == summaries["sps"]["datasets"]["tiny"]["per_position_acceptance"]
    assert len(ns["tau_fig"].axes[0].patches) == 2


def test_default_folder_is_the_newest_runs_model_and_benchmark(run_root, tmp_path):
    evals = run_root / "eval" / "tiny" / "tiny"
    assert newest_runs(run_root) == evals
    elsewhere = tmp_path / "mine"  # a run with hydra.run.dir of its own is analysed alone
    elsewhere.mkdir()
    (elsewhere / "summary.json").write_text((evals / "ar" / "summary.json").read_text())
    older = (evals / "sps" / "summary.json").stat().st_mtime - 60
    os.utime(elsewhere / "summary.json", (older, older))
    for m in ("ar", "sps"):
        (tmp_path / "eval" / "tiny" / "tiny" / m).mkdir(parents=True)
        (tmp_path / "eval" / "tiny" / "tiny" / m / "summary.json").write_text("{}")
        os.utime(tmp_path / "eval" / "tiny" / "tiny" / m / "summary.json", (older - 60,) * 2)
    assert newest_runs(tmp_path) == elsewhere
    with pytest.raises(FileNotFoundError, match="no summary.json under"):
        newest_runs(tmp_path / "eval" / "nothing-here")
