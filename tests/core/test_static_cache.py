"""The static KV cache path (``model.static_cache``) gives the dynamic path's logits and tokens.

The CPU part of the CUDA-graph groundwork: a preallocated cache and bucketed, fixed-shape forwards
(``specdec.static_cache``) behind ``CachedLM``, greedy-identical to ``DynamicCache`` for every
method preset, and equal logits (1e-12 in float64) over forward / extend / keep / crop /
reconcile with tree masks. Deterministic (fixed weights, greedy): no false failures.
"""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate

from specdec.bench.run.runner import build_method
from specdec.errors import BadInput
from specdec.lm import CachedLM
from specdec.paths import CONF_DIR
from specdec.static_cache import BUCKET_CAP, GROWS, START_LEN, StaticSpec, bucket
from specdec.testing.twin_lm import Twin, generate_on

METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
GREEDY = ["sampling.temperature=0", "model.placement.dtype=float64"]


def test_buckets_are_powers_of_two_up_to_the_cap():
    assert [bucket(n) for n in (1, 2, 3, 5, 8, 9, 33, BUCKET_CAP)] == [1, 2, 4, 8, 8, 16, 64, 64]
    assert bucket(BUCKET_CAP + 1) == BUCKET_CAP + 1  # above the cap: unpadded (eager fallback)


def ids(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


def test_logits_equal_the_dynamic_path_over_a_session(tiny64):
    lm = Twin(tiny64.target, static=True, max_cache_len=160)
    prompt = torch.randint(3, 250, (70,), generator=torch.Generator().manual_seed(0)).tolist()
    lm("reconcile", prompt[:20])  # a padded chain (20 -> bucket 32)
    lm("forward", ids(3, 4, 5))  # a pending chain committed by the next forward
    lm("forward", ids(7, 8, 9, 10, 11), ids(-1, 0, 0, 1, 2), hidden_layers=(0, -1))  # a tree
    lm("extend", ids(12, 13, 14), ids(3, 4, -1))  # a frontier under pending nodes
    lm("keep", [0, 1, 3, 5])  # gathered into place
    lm("forward", ids(1))
    lm("keep", [0])
    lm("forward", ids(20, 21), ids(-1, -1))  # siblings
    lm("keep", [1])
    embeds = tiny64.target.get_input_embeddings()(ids(30, 31))  # [2, H]
    lm("forward", ids(30, 31), inputs_embeds=lambda: embeds)
    lm("crop", 10)
    lm("reconcile", prompt[:10] + [40, 41, 42])
    lm("reset")
    lm("reconcile", prompt)  # a prefill above the cap: unpadded, still into the static cache
    lm("forward", ids(5, 6, 7, 8, 9, 10), ids(-1, 0, 1, 0, 3, -1))
    lm("keep", [0, 3, 4])


def test_the_model_sees_bucket_shapes_and_the_cache_keeps_its_tensors(tiny64):
    """What a CUDA-graph capture needs: fixed shapes per bucket, cache tensors at fixed places."""
    lm = CachedLM(tiny64.target, static=True, max_cache_len=96)
    seen: list[tuple] = []

    def record(module, args, kwargs):
        seen.append(
            (
                tuple(kwargs["input_ids"].shape),
                tuple(kwargs["attention_mask"].shape),
                tuple(kwargs["position_ids"].shape),
            )
        )

    hook = tiny64.target.register_forward_pre_hook(record, with_kwargs=True)
    try:
        lm.reconcile(list(range(5, 10)))
        before = [layer.keys.data_ptr() for layer in lm._cache.layers]
        lm.forward(ids(1, 2, 3), ids(-1, 0, 0))
        lm.keep([0, 2])
        lm.reset()
        lm.reconcile(list(range(5, 95)))  # up to 96 slots: the prefill of 90 runs unpadded
        lm.forward(ids(1, 2, 3, 4, 5, 6, 7))  # 90 + 7 > 96 slots
    except BadInput as err:
        assert "model.max_cache_len" in str(err)
    else:
        raise AssertionError("a forward past max_cache_len must raise BadInput")
    finally:
        hook.remove()
    assert seen == [
        ((1, 8), (1, 1, 8, 96), (1, 8)),
        ((1, 4), (1, 1, 4, 96), (1, 4)),
        ((1, 90), (1, 1, 90, 96), (1, 90)),
    ]
    assert [layer.keys.data_ptr() for layer in lm._cache.layers] == before
    assert lm.ids == list(range(5, 95))  # the refused forward changed nothing
    assert lm._static.max_len == 96 and not lm._static.counts  # an integer length never grows


def test_padding_that_does_not_fit_runs_unpadded(tiny64):
    lm = Twin(tiny64.target, static=True, max_cache_len=23)
    lm("reconcile", list(range(5, 25)))  # 20 tokens (bucket 32 > 23 slots: unpadded)
    lm("forward", ids(1, 2, 3))  # 20 + 3 = 23: bucket 4 would not fit, 3 does


@pytest.mark.parametrize("graphs", [False, True])
def test_a_growing_cache_gives_the_dynamic_paths_logits(tiny64, graphs):
    """``max_cache_len: null``: 256 slots, doubled mid-session (pending tree nodes included) up to
    the positions + 64; the runner's fixed-address path drops its entries and makes them again."""
    lm = Twin(tiny64.target, static=True, graphs=graphs)
    static, runner = lm.other._static, lm.other.graphs
    prompt = torch.randint(3, 250, (245,), generator=torch.Generator().manual_seed(0)).tolist()
    lm("reconcile", prompt)  # unpadded prefill into the first 256 slots
    lm("forward", ids(7, 8, 9, 10, 11), ids(-1, 0, 0, 1, 2), hidden_layers=(0, -1))  # 245 + 8
    lm("keep", [0, 1, 3])  # 248 cached
    lm("forward", ids(1))
    lm("keep", [0])
    assert static.max_len == START_LEN and not static.counts
    first = runner.addresses() if graphs else {}
    lm("forward", ids(5, 6, 7, 8), ids(-1, 0, 1, 0))  # 249 + 4: still fits
    lm("extend", ids(12, 13, 14, 15, 16), ids(1, 2, 3, 4, -1))  # 253 + 8 > 256: grows, 4 pending
    assert static.max_len == 2 * START_LEN and static.counts[GROWS] == 1
    assert lm.other._cache is static.cache and all(
        layer.keys.shape[2] == 2 * START_LEN for layer in static.cache.layers
    )
    lm("keep", [0, 1, 4, 7])  # gathered in the grown cache
    for token in (1, 2, 3):  # bucket 1 again, over the new cache
        lm("forward", ids(token))
        lm("keep", [0])
    lm("crop", 100)
    lm("reset")  # the grown cache is kept
    lm("reconcile", prompt[:40])
    assert static.max_len == 2 * START_LEN and static.counts[GROWS] == 1
    if graphs:  # the old entries were dropped; bucket 1 made again, with the wider mask
        mask = runner.entries[(1, "input_ids", False)].inputs["attention_mask"]
        assert mask.shape[-1] == 2 * START_LEN and runner.cache is static.cache
        assert runner.addresses()[(1, "input_ids", False)] != first[(1, "input_ids", False)]


def test_a_growing_cache_stops_at_the_positions_and_is_counted(tiny64, compose, monkeypatch):
    monkeypatch.setattr(tiny64.target.config, "max_position_embeddings", 200)
    lm = Twin(tiny64.target, static=True)
    lm("reconcile", list(range(5, 245)))  # 240 tokens
    lm("forward", torch.arange(17) + 3)  # bucket 32 passes 264: 240 + 17 unpadded, grown to 264
    assert lm.other._static.max_len == 200 + BUCKET_CAP
    with pytest.raises(BadInput, match="model.max_cache_len"):
        lm.other.forward(torch.arange(8) + 3)  # 257 + 8 > 264
    assert lm.other.ids == lm.dyn.ids  # nothing changed
    monkeypatch.undo()
    cfg = compose("eval", ["method=sps", *GREEDY])
    prompt = torch.randint(3, 250, (250,), generator=torch.Generator().manual_seed(1)).tolist()
    out, counters = {}, {}
    for spec in (None, StaticSpec(max_cache_len=None, cuda_graphs=True)):
        _, gen = generate_on(cfg, tiny64, spec, prompt, 16)
        out[spec], counters[spec] = gen.tokens, gen.stats.counters
    assert out[None] == out[StaticSpec(cuda_graphs=True)]
    assert counters[StaticSpec(cuda_graphs=True)][GROWS] == 2  # target and draft, once each
    assert GROWS not in counters[None]


@pytest.mark.parametrize("method", METHODS)
def test_every_preset_is_greedy_identical_to_the_dynamic_path(compose, tiny64, method):
    cfg = compose("eval", [f"method={method}", *GREEDY])
    prompt = tiny64.tokenizer.encode("The quick brown fox")
    out = {}
    for spec in (None, StaticSpec(max_cache_len=96)):
        m, gen = generate_on(cfg, tiny64, spec, prompt, 20)
        assert (m.target._static is not None) == (spec is not None)
        out[spec] = gen.tokens
    assert out[None] == out[StaticSpec(max_cache_len=96)]


def test_the_config_keys_reach_both_caches(compose):
    cfg = compose("eval", ["method=sps", "model.static_cache=true", "model.max_cache_len=64"])
    pair = instantiate(cfg.model)
    assert pair.static_cache == StaticSpec(max_cache_len=64)
    assert pair.describe()["static_cache"] == "64"  # timings differ: part of the fingerprint
    m = build_method(cfg, pair)
    assert m.target._static.max_len == m.drafter.lm._static.max_len == 64
    positions = pair.target.config.max_position_embeddings
    grown = CachedLM(pair.target, static=True)._static  # null: starts small, grows to the limit
    assert (grown.max_len, grown.limit) == (START_LEN, positions + BUCKET_CAP)
    default = compose("eval", ["method=ar"])
    assert default.model.static_cache is False  # off by default (CPU)
    dynamic = instantiate(default.model)
    assert dynamic.static_cache is None and "static_cache" not in dynamic.describe()


@pytest.mark.parametrize("bad", ["model.max_cache_len=0", "model.static_cache=3"])
def test_bad_static_cache_keys_are_refused(compose, bad):
    cfg = compose("eval", ["method=ar", "model.static_cache=true", bad])
    with pytest.raises(Exception) as err:
        instantiate(cfg.model)
    cause = err.value if isinstance(err.value, BadInput) else err.value.__cause__
    assert isinstance(cause, BadInput) and bad.split("=")[0] in str(cause)


class _Layer:
    """A static layer as transformers 5.17 writes it: a device-side length, no ``crop``."""

    is_initialized = True

    def __init__(self, length: int) -> None:
        with torch.inference_mode():  # first written by a forward under inference_mode
            self.cumulative_length = torch.tensor(length)


@pytest.mark.parametrize("crop", [False, True])
def test_drop_last_moves_inference_lengths_back_outside_inference_mode(crop):
    """The crop between generations runs outside ``inference_mode`` on lengths a forward wrote
    inside it; with and without the layer's own ``crop`` (5.24 / 5.17)."""
    from types import SimpleNamespace

    from specdec.static_cache import drop_last

    layers = [_Layer(9), _Layer(9)]
    if crop:
        for layer in layers:
            layer.crop = lambda k, layer=layer: layer.cumulative_length.sub_(-k)
    cache = SimpleNamespace(layers=layers)
    cache.crop = lambda k: [layer.crop(k) for layer in layers]
    assert not torch.is_inference_mode_enabled()
    drop_last(cache, 3)
    drop_last(cache, 0)
    assert [int(layer.cumulative_length) for layer in layers] == [6, 6]
    with pytest.raises(BadInput, match="static_cache=false"):
        drop_last(SimpleNamespace(layers=[object()]), 1)
