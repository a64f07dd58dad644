"""Fixtures of the tests of the eval harness and the report (``specdec.bench``, ``specdec.report``):

runs, records, data-parallel ranks, quality checks, sandbox, sweeps, cost model, Spec-Bench runs.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def no_models(monkeypatch):
    """Any instantiate (the pair, the logger) means the run went past the checks."""
    import specdec.bench.run.runner as ev

    monkeypatch.setattr(ev, "instantiate", lambda *a, **k: pytest.fail("a model was loaded"))


@pytest.fixture(scope="session")
def ar_sps_runs(tmp_path_factory):
    """``ar`` and ``sps`` on the tiny pair's tiny benchmark (temperature 0, two prompts each), run
    once for every module that reads them; tests edit copies, never these folders."""
    import specdec.bench.run.runner as ev
    from specdec.testing.eval_cfg import eval_cfg

    root = tmp_path_factory.mktemp("ar_sps_runs")
    for name in ("ar", "sps"):
        ev.run(eval_cfg(root / name, [f"method={name}", "warmup=0"]))
    return {name: root / name for name in ("ar", "sps")}


@pytest.fixture(scope="session")
def specbench_runs(tmp_path_factory):
    """``ar`` and ``sps`` on ``benchmark=tiny2`` at temperature 0 (four prompts each, six new
    tokens; the sps draft equals the target), run once for the Spec-Bench export modules; tests
    edit copies, never these folders."""
    import specdec.bench.run.runner as ev
    from specdec.testing.eval_cfg import eval_cfg

    root = tmp_path_factory.mktemp("sbruns")
    same = ["model.draft_seed=0", "model.draft_layers=2"]  # the tiny draft = the tiny target
    for method, extra in (("ar", []), ("sps", same)):
        ev.run(
            eval_cfg(
                root / method,
                [
                    f"method={method}",
                    "benchmark=tiny2",
                    "limit=4",
                    "max_new_tokens=6",
                    "warmup=0",
                    "progress=false",
                    *extra,
                ],
            )
        )
    return {m: root / m for m in ("ar", "sps")}


@pytest.fixture(scope="session")
def specbench_exported(specbench_runs, tmp_path_factory):
    """``(out, result)`` of the Spec-Bench export of ``specbench_runs``."""
    from specdec.bench.report import specbench as sb

    out = tmp_path_factory.mktemp("sbout")
    return out, sb.export([specbench_runs["ar"], specbench_runs["sps"]], out, warn=False)
