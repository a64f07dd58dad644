"""One composition of a method on a pair (``specdec.compose``) for the harness and the learners.

The H-RAD and SpecDec++ data generators used to build their target and draft caches, drafter and
verifier by hand; they now go through ``compose_method`` like ``bench.method.build_method``. A spy
records each call and stops the run right after it (the generators' outputs are covered by
``test_hrad_data.py`` and ``test_acceptance.py``, unchanged).
"""

from __future__ import annotations

import pytest

import specdec.bench.run.method
import specdec.compose
from specdec.bench.run.method import build_method
from specdec.data.hrad import generate_hrad_data
from specdec.data.specdecpp import generate_acceptance_data
from specdec.drafters import EmptyDrafter, ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.lm import CachedLM
from specdec.verifiers import Tokenwise


class _Composed(Exception):
    """Raised by the spy once the method is built: nothing needs to decode."""


@pytest.fixture
def composed(monkeypatch):
    """Every method ``compose_method`` builds, in order; the call then raises ``_Composed``."""
    methods, real = [], specdec.compose.compose_method

    def spy(*args, **kwargs):
        methods.append(real(*args, **kwargs))
        raise _Composed

    monkeypatch.setattr(specdec.compose, "compose_method", spy)
    monkeypatch.setattr(specdec.bench.run.method, "compose_method", spy)  # imported by name there
    return methods


def test_hrad_data_decodes_with_a_composed_chain_method(tiny64, tmp_path, composed):
    with pytest.raises(_Composed):
        generate_hrad_data(
            tiny64,
            str(tmp_path),
            synthetic={"count": 2, "seed": 0},
            gamma_max=5,
            layers=2,
            max_new_tokens=4,
        )
    (method,) = composed
    assert isinstance(method.drafter, ModelDrafter) and isinstance(method.drafter.policy, Fixed)
    assert method.drafter.policy.gamma == 5 and isinstance(method.verifier, Tokenwise)
    assert isinstance(method.target, CachedLM) and method.target.model is tiny64.target
    assert method.drafter.lm.vocab_size == method.target.vocab_size  # the draft fitted to it
    assert method.sampling.temperature == 0.0


def test_acceptance_data_answers_with_the_composed_ar_method(tiny64, tmp_path, composed):
    with pytest.raises(_Composed):
        generate_acceptance_data(
            tiny64,
            str(tmp_path),
            [{"name": "synthetic", "limit": 2}],
            sampling={"temperature": 1.0},
            max_new_tokens=4,
        )
    (method,) = composed
    assert isinstance(method.drafter, EmptyDrafter) and isinstance(method.verifier, Tokenwise)
    assert method.target.model is tiny64.target and method.sampling.temperature == 1.0


def test_the_harness_builds_through_the_same_composition(tiny64, compose, composed):
    cfg = compose("eval", ["model=tiny", "method=sps", "drafter.policy.gamma=3"])
    with pytest.raises(_Composed):
        build_method(cfg, tiny64)
    (method,) = composed
    assert isinstance(method.drafter, ModelDrafter) and method.drafter.policy.gamma == 3
    assert method.target.synchronize is bool(cfg.cost_model)
