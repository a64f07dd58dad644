"""Eval run checks that fail early and clearly: bad config values (named before models load)."""

from __future__ import annotations

import pytest
from test_eval_run import eval_cfg

import specdec.bench.runner as ev
from specdec.bench.schema import EvalKeys, validate


@pytest.fixture
def no_models(monkeypatch):
    """Any instantiate (the pair, the logger) means the run went past the checks."""
    monkeypatch.setattr(ev, "instantiate", lambda *a, **k: pytest.fail("a model was loaded"))


@pytest.mark.parametrize(("override", "message"), [
    ("limit=abc", "limit='abc' is not valid: expected an integer >= 1 or null"),
    ("sampling.temperature=hot", "sampling.temperature='hot' is not valid: expected a number >= 0"),
    ("max_new_tokens=-1", "max_new_tokens=-1 is not valid: expected an integer >= 1 or null"),
    ("warmup=-1", "warmup=-1 is not valid: expected an integer >= 0"),
    ("seed=x", "seed='x' is not valid: expected an integer"),
    ("seed=true", "seed=True is not valid: expected an integer"),
    ("sampling.top_p=0", "sampling.top_p=0 is not valid: expected a number > 0.0 and <= 1.0"),
    ("threads=0", "threads=0 is not valid"),
    ("quality=maybe", "quality='maybe' is not valid: expected true or false"),
    ("benchmark.datasets.tiny.limit=abc", "benchmark.datasets.tiny.limit='abc' is not valid"),
    ("device=gpu", "device='gpu' is not a torch device"),
])
def test_bad_values_name_the_key_before_any_model_loads(tmp_path, no_models, override, message):
    with pytest.raises(ValueError) as err:
        ev.run(eval_cfg(tmp_path, [override]))
    assert message in str(err.value)


def test_good_values_pass_typed(tmp_path):
    keys = validate(eval_cfg(tmp_path, ["sampling.temperature=1", "limit=3"]))
    assert isinstance(keys, EvalKeys) and keys.limit == 3 and keys.sampling.temperature == 1
