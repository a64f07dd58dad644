"""Fixtures of the tests of the eval harness and the report (``specdec.bench``, ``specdec.report``):

runs, records, data-parallel ranks, quality checks, sandbox, sweeps, cost model.
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
