"""The graph runner (``model.cuda_graphs``, ``specdec.graphs``) gives the dynamic path's results.

On CPU the runner's fixed-address path (static input buffers, copy-in, the forward on them,
copy-out of static outputs) is what a captured CUDA graph replays; these tests pin that it is
greedy-identical to the dynamic cache for every method preset, logits-equal (1e-12) in float64
over forward / extend / keep / crop / reconcile with tree masks, hidden states and embeddings,
and that its buffers keep their addresses. The capture itself runs only under ``-m gpu``.
Deterministic (fixed weights, greedy): no false failures.
"""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate

from specdec.bench.records import config_hash
from specdec.bench.run.runner import build_method
from specdec.errors import BadInput
from specdec.graphs import CAPTURES, FALLBACKS, REPLAYS, GraphRunner
from specdec.lm import CachedLM
from specdec.paths import CONF_DIR
from specdec.static_cache import StaticSpec
from specdec.testing.twin_lm import Twin, generate_on

METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
GREEDY = ["sampling.temperature=0", "model.placement.dtype=float64"]


def ids(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


def test_logits_equal_the_dynamic_path_over_a_session(tiny64):
    lm = Twin(tiny64.target, static=True, graphs=True, max_cache_len=160)
    assert isinstance(lm.other.graphs, GraphRunner) and not lm.other.graphs.capture  # CPU path
    prompt = torch.randint(3, 250, (70,), generator=torch.Generator().manual_seed(0)).tolist()
    lm("reconcile", prompt[:20])  # bucket 32
    lm("forward", ids(3, 4, 5))  # bucket 4
    lm("forward", ids(7, 8, 9, 10, 11), ids(-1, 0, 0, 1, 2), hidden_layers=(0, -1))  # a tree
    lm("extend", ids(12, 13, 14), ids(3, 4, -1))
    lm("keep", [0, 1, 3, 5])
    for token in (1, 2, 3):  # bucket 1 replayed step after step
        lm("forward", ids(token))
        lm("keep", [0])
    lm("forward", ids(20, 21), ids(-1, -1))
    lm("keep", [1])
    embeds = tiny64.target.get_input_embeddings()(ids(30, 31))  # [2, H]
    lm("forward", ids(30, 31), inputs_embeds=lambda: embeds)
    lm("crop", 10)
    lm("reconcile", prompt[:10] + [40, 41, 42])
    lm("reset")
    lm("reconcile", prompt)  # a prefill above the cap: the eager fallback
    lm("forward", ids(5, 6, 7, 8, 9, 10), ids(-1, 0, 1, 0, 3, -1))
    lm("keep", [0, 3, 4])
    counts = lm.other.graphs.counts
    assert counts[FALLBACKS] == 1 and counts[REPLAYS] == 11 and counts[CAPTURES] == 0


def test_static_buffers_keep_their_addresses_across_steps(tiny64):
    lm = CachedLM(tiny64.target, static=True, max_cache_len=96, graphs=True)
    lm.reconcile(list(range(5, 15)))  # bucket 16 (10 nodes)
    lm.forward(ids(1))
    lm.keep([0])
    first = lm.graphs.addresses()
    assert set(first) == {(16, "input_ids", False), (1, "input_ids", False)}
    cache = [layer.keys.data_ptr() for layer in lm._cache.layers]
    for step in range(4):  # same buckets again, with other inputs, across a reset too
        lm.forward(ids(2 + step))
        lm.keep([0])
        if step == 1:
            lm.reset()
            lm.reconcile(list(range(20, 30)))
    assert lm.graphs.addresses() == first
    assert [layer.keys.data_ptr() for layer in lm._cache.layers] == cache


@pytest.mark.parametrize("method", METHODS)
def test_every_preset_is_greedy_identical_to_the_dynamic_path(compose, tiny64, method):
    cfg = compose("eval", [f"method={method}", *GREEDY])
    prompt = tiny64.tokenizer.encode("The quick brown fox")
    out, counters = {}, {}
    for spec in (None, StaticSpec(max_cache_len=96, cuda_graphs=True)):
        m, gen = generate_on(cfg, tiny64, spec, prompt, 20)
        assert (m.target.graphs is not None) == (spec is not None)
        # every cache the method holds is of the pair's kind: a drafter's own (EAGLE-3's) too
        owned = [lm for lm in m.drafter.models if isinstance(lm, CachedLM)]
        assert all((lm.graphs is not None) == (spec is not None) for lm in owned)
        out[spec], counters[spec] = gen.tokens, gen.stats.counters
    assert out[None] == out[StaticSpec(max_cache_len=96, cuda_graphs=True)]
    graphs = counters[StaticSpec(max_cache_len=96, cuda_graphs=True)]
    assert graphs[REPLAYS] > 0  # the decode steps replayed (a short prompt: no fallback)
    assert REPLAYS not in counters[None]


def test_the_config_key_reaches_both_models(compose):
    cfg = compose("eval", ["method=sps", "model.static_cache=true", "model.cuda_graphs=true"])
    pair = instantiate(cfg.model)
    assert pair.static_cache.cuda_graphs is True and pair.describe()["cuda_graphs"] == "on"
    m = build_method(cfg, pair)
    assert m.target.graphs is not None and m.drafter.lm.graphs is not None
    auto = instantiate(compose("eval", ["method=sps", "model.static_cache=true"]).model)
    assert auto.static_cache.cuda_graphs is None  # null: on for cuda only; this is the CPU
    assert build_method(cfg, auto).target.graphs is None and "cuda_graphs" not in auto.describe()


def test_the_null_default_is_left_out_of_the_config_hash():
    """Records written before the key existed keep resuming; a set value is part of the hash."""
    old = {"model": {"dtype": "float32"}, "method_name": "ar"}
    assert config_hash({**old, "model": {"dtype": "float32", "cuda_graphs": None}}) == config_hash(
        old
    )
    for value in (True, False):
        assert config_hash(
            {**old, "model": {"dtype": "float32", "cuda_graphs": value}}
        ) != config_hash(old)


@pytest.mark.parametrize(
    "bad", [["model.cuda_graphs=true"], ["model.static_cache=true", "model.cuda_graphs=3"]]
)
def test_bad_cuda_graphs_keys_are_refused(compose, bad):
    cfg = compose("eval", ["method=ar", *bad])
    with pytest.raises(Exception) as err:
        instantiate(cfg.model)
    cause = err.value if isinstance(err.value, BadInput) else err.value.__cause__
    assert isinstance(cause, BadInput) and "model.cuda_graphs" in str(cause)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_captured_graphs_replay_the_eager_forwards_on_cuda(tiny64):
    """The real capture: a CUDA-graph replay equals the dynamic path, per bucket, in float64."""
    model = tiny64.target.to("cuda")
    try:
        lm = Twin(model, static=True, graphs=True, max_cache_len=160)
        assert lm.other.graphs.capture
        lm("reconcile", list(range(5, 30)))
        for step in range(6):
            lm("forward", ids(40 + step, 41 + step), ids(-1, 0))
            lm("keep", [0, 1])
            lm("forward", ids(7, 8, 9), ids(-1, 0, 0), hidden_layers=(0, -1))
            lm("keep", [0, 2])
        counts = lm.other.graphs.counts
        assert counts[CAPTURES] == 3 and counts[REPLAYS] == 13  # buckets 32, 2, 4 (+ hidden)
    finally:
        tiny64.target.to("cpu")
