"""Every method preset composes, builds on the tiny pair, and is greedy-equivalent to AR.

Greedy equivalence is the fp64 CPU check (Spec-Bench's equal.py, transformers'
assisted == greedy): at temperature 0 a lossless method must emit exactly AR's tokens.
"""

from __future__ import annotations

import pytest

from specdec.bench.run.runner import build_method
from specdec.engine import generate
from specdec.models.tiny import tiny_pair
from specdec.paths import CONF_DIR
from specdec.sampling import TorchCoins

METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
GREEDY = ["sampling.temperature=0", "model.placement.dtype=float64"]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair(placement={"dtype": "float64"})


def greedy_tokens(compose, pair, method: str, prompt: list[int]) -> list[int]:
    cfg = compose("eval", [f"method={method}", *GREEDY])
    m = build_method(cfg, pair)
    target, drafter, verifier, sampling = m.target, m.drafter, m.verifier, m.sampling
    return generate(
        prompt, target, drafter, verifier, sampling=sampling, coins=TorchCoins(1), max_new_tokens=20
    ).tokens


def test_the_core_presets_exist():
    assert {"ar", "sps"} <= set(METHODS)


@pytest.mark.parametrize("method", METHODS)
def test_method_is_greedy_equivalent_to_ar(compose, pair, method):
    cfg = compose("eval", [f"method={method}", *GREEDY])
    assert cfg.method_name == method
    prompt = pair.tokenizer.encode("The quick brown fox")
    want = greedy_tokens(compose, pair, "ar", prompt)
    got = greedy_tokens(compose, pair, method, prompt)
    assert got == want


def test_unknown_config_key_is_refused(compose):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="no_such_key"):
        compose("eval", ["no_such_key=1"])
