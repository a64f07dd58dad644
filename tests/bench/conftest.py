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
