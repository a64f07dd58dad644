"""``specdec.load`` on the tiny pair: the eval's composition, loop, coins and checks from Python."""

from __future__ import annotations

import pytest
import torch

import specdec
from specdec.errors import BadInput, MissingInput

PROMPT = "Name three colours."


@pytest.fixture(scope="module")
def sps():
    return specdec.load("tiny", method="sps")


@pytest.fixture(scope="module")
def ar():
    return specdec.load("tiny", method="ar")


def test_greedy_sps_equals_ar_with_stats(sps, ar):
    out, base = sps.generate(PROMPT, max_new_tokens=12), ar.generate(PROMPT, max_new_tokens=12)
    assert out.tokens == base.tokens and len(out.tokens) == 12
    assert out.text == sps.tokenizer.decode(out.tokens, skip_special_tokens=True)
    for key in (
        "tau",
        "accepted",
        "drafted",
        "tokens_per_s",
        "new_tokens",
        "target_forwards",
        "acceptance_rate",
        "prefill_s",
    ):
        assert key in out.stats, key
    assert out.stats["new_tokens"] == 12 and out.stats["drafted"] > 0
    assert out.stats["tau"] == out.stats["new_tokens"] / out.stats["target_forwards"]
    assert base.stats["drafted"] == 0 and base.stats["tau"] == 1.0


def test_load_composes_the_cli_config(sps):
    assert sps.cfg.method_name == "sps"
    assert sps.cfg.drafter._target_ == "specdec.drafters.ModelDrafter"
    assert sps.pair.name == "tiny" and sps.pair.draft is not None


def test_messages_string_and_ids_agree(sps):
    msgs = [{"role": "user", "content": PROMPT}]
    ids = sps.encode(msgs)
    assert sps.tokenizer.decode(ids).startswith("<|im_start|>user\n" + PROMPT)
    a = sps.generate(msgs, max_new_tokens=6)
    assert sps.generate(PROMPT, max_new_tokens=6).tokens == a.tokens
    assert sps.generate(ids, max_new_tokens=6).tokens == a.tokens
    assert sps.generate(torch.tensor([ids]), max_new_tokens=6).tokens == a.tokens  # [1, T]
    # a conversation with an earlier answer is another prompt
    longer = [*msgs, {"role": "assistant", "content": "Red."}, {"role": "user", "content": "More"}]
    assert len(sps.encode(longer)) > len(ids)


def test_stream_chunks_concatenate_to_the_output(sps):
    stream = sps.generate(PROMPT, max_new_tokens=10, stream=True)
    chunks = list(stream)
    whole = sps.generate(PROMPT, max_new_tokens=10)
    assert stream.result == whole or stream.result.tokens == whole.tokens
    assert sum((c.tokens for c in chunks), []) == whole.tokens
    assert "".join(c.text for c in chunks) == whole.text
    steps = [c for c in chunks if c.tokens]
    assert len(steps) == whole.stats["target_forwards"]  # one chunk per decoding step


def test_stream_of_a_method_with_a_background_worker():
    """PEARL drafts on a worker thread of its own; the stream's thread drives it unchanged."""
    pearl = specdec.load("tiny", method="pearl", sampling__temperature=0.8)
    stream = pearl.generate(PROMPT, max_new_tokens=10, seed=2, stream=True)
    chunks = list(stream)
    whole = pearl.generate(PROMPT, max_new_tokens=10, seed=2)
    assert sum((c.tokens for c in chunks), []) == stream.result.tokens == whole.tokens


def test_stream_stops_when_the_reader_leaves(sps):
    stream = sps.generate(PROMPT, max_new_tokens=40, stream=True)
    for _ in stream:
        break
    assert stream.result is None  # the loop ended at its next step; nothing half-returned


def test_sampled_answer_reproduces_the_eval_prompt(sps):
    """At T > 0 the API seeds turn 0 of prompt ``prompt_id`` as the eval does (run_prompt)."""
    from specdec.bench.run.method import run_prompt
    from specdec.data.prompts import Prompt

    hot = specdec.load("tiny", method="sps", sampling__temperature=0.9)
    prompt = Prompt(id="tiny-0", dataset="tiny", category="x", turns=(PROMPT,))
    want = run_prompt(prompt, hot.pair, hot.method, seed=5, max_new_tokens=10, chat_template=True)
    got = hot.generate(PROMPT, max_new_tokens=10, seed=5, prompt_id="tiny-0")
    assert got.tokens == want.output_ids[0]
    # the same temperature asked per call builds the same method on the greedy decoder
    assert (
        sps.generate(PROMPT, max_new_tokens=10, seed=5, prompt_id="tiny-0", temperature=0.9).tokens
        == got.tokens
    )
    assert (
        sps.generate(PROMPT, max_new_tokens=10, seed=6, prompt_id="tiny-0", temperature=0.9).tokens
        != got.tokens
    )  # P(equal) ~ 259^-10 per token


@pytest.mark.parametrize("method", ["sps", "specbranch"])
def test_temperature_per_call_reuses_the_method(method, monkeypatch):
    """A per-call temperature reaches the drafter through the step's context: no method is
    rebuilt (the same drafter object answers), and the tokens equal those of a decoder loaded at
    that temperature, same seed. (specbranch forks top-k at T = 0 and samples at T > 0.)"""
    import specdec.bench.run.method as method_module

    greedy = specdec.load("tiny", method=method)
    hot = specdec.load("tiny", method=method, sampling__temperature=0.9)
    drafter = greedy.method.drafter

    def no_rebuild(*args, **kwargs):
        raise AssertionError("generate(temperature=...) rebuilt the method")

    monkeypatch.setattr(method_module, "build_method", no_rebuild)
    want = hot.generate(PROMPT, max_new_tokens=12, seed=3).tokens
    got = greedy.generate(PROMPT, max_new_tokens=12, seed=3, temperature=0.9).tokens
    assert greedy.method.drafter is drafter and got == want
    # back at the config's temperature on the same drafter: the greedy answer, as built
    assert (
        greedy.generate(PROMPT, max_new_tokens=12, seed=3).tokens
        == hot.generate(PROMPT, max_new_tokens=12, seed=3, temperature=0.0).tokens
    )


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"method": "spss"}, "method=spss"),
        ({"no_such_key": 1}, "no_such_key"),
        ({"limit": "abc"}, "limit"),
        ({"sampling__temperature": -1}, "temperature"),
        # the schema, before loading
        ({"model__placement__dtype": "int8"}, "model.placement.dtype='int8' is not known"),
        ({"model__dtype": "bfloat16"}, "model.dtype is now model.placement.dtype"),  # the old key
    ],
)
def test_bad_override_is_bad_input(kwargs, words):
    with pytest.raises(BadInput, match=words):
        specdec.load("tiny", **{"method": "sps", **kwargs})


def test_bad_generate_arguments(sps):
    with pytest.raises(BadInput, match="empty prompt"):
        sps.generate([], max_new_tokens=4)
    with pytest.raises(BadInput, match="outside the vocabulary"):
        sps.generate([1, 10**6], max_new_tokens=4)
    with pytest.raises(BadInput, match="chat message"):
        sps.generate([{"role": "user"}], max_new_tokens=4)
    with pytest.raises(BadInput, match="max_new_tokens"):
        sps.generate(PROMPT, max_new_tokens=0)
    with pytest.raises(BadInput, match="temperature"):
        sps.generate(PROMPT, max_new_tokens=4, temperature=-0.5)
    with pytest.raises(BadInput, match="temperature"):
        sps.generate(PROMPT, max_new_tokens=4, temperature="hot")


@pytest.mark.parametrize(
    "prompt, words",
    [
        (torch.tensor([[1, 2, 3], [4, 5, 6]]), r"batch of shape \[2, 3\].*once per row"),
        ([[1, 2], [3, 4]], "batch of 2 prompt"),
        (["Hi", "Bye"], "batch of 2 prompt"),
        (b"Hello", r"bytes: decode it to a string first"),
        (bytearray(b"Hi"), "bytes"),
        (5, r"one int \(5\): give token ids as a list"),
        (None, "prompt is None"),
        ("", "empty prompt"),
        (torch.tensor([], dtype=torch.long), "empty prompt"),
        (torch.tensor([1.0, 2.0]), "dtype torch.float32"),
        (torch.tensor(3), "0-d tensor"),
        (torch.ones(1, 1, 3, dtype=torch.long), r"shape \[1, 1, 3\]"),
        ({"role": "user", "content": "Hi"}, "one chat message"),
        (3.5, "prompt is a float"),
        ([1, "a"], "not a mix"),
    ],
)
def test_a_prompt_that_is_not_one_is_refused(sps, prompt, words):
    """Before: a [2, T] batch was flattened into one prompt, bytes were read as ids, an int or
    None raised TypeError."""
    with pytest.raises(BadInput, match=words):
        sps.generate(prompt, max_new_tokens=2)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"seed": -1}, "seed must be an integer >= 0"),
        ({"seed": 1.5}, "seed"),
        ({"seed": True}, "seed"),
        ({"seed": "1"}, "seed"),
        ({"prompt_id": None}, "prompt_id must be a non-empty string"),
        ({"prompt_id": ""}, "prompt_id"),
        ({"prompt_id": 3}, "prompt_id"),
        ({"stream": "yes"}, "stream must be True or False"),
    ],
)
def test_bad_seed_prompt_id_and_stream_are_refused(sps, kwargs, words):
    with pytest.raises(BadInput, match=words):
        sps.generate(PROMPT, max_new_tokens=2, **kwargs)


def test_one_row_of_ids_in_any_container_is_one_prompt(sps):
    import numpy as np

    ids = sps.encode(PROMPT)
    want = sps.generate(ids, max_new_tokens=4).tokens
    for same in ([ids], tuple(ids), np.array([ids]), torch.tensor(ids, dtype=torch.int32)):
        assert sps.generate(same, max_new_tokens=4).tokens == want


def test_missing_asset_fails_before_loading(monkeypatch, tmp_path):
    import specdec.models.tiny as tiny

    monkeypatch.setattr(tiny, "tiny_pair", _no_loading)
    with pytest.raises(MissingInput, match=r"drafter\.path=.*eagle3_tiny"):
        specdec.load("tiny", method="eagle3", drafter__path=str(tmp_path / "nowhere"))


def _no_loading(*args, **kwargs):
    raise AssertionError("the pair loaded before the config's checks")


def test_a_typo_in_the_method_suggests_the_nearest_preset():
    """``load(method="spss")`` names ``sps`` (the command line's own check), before any model."""
    import specdec
    from specdec.errors import BadInput

    with pytest.raises(BadInput, match=r"method=spss .*did you mean 'sps'"):
        specdec.load(method="spss")
