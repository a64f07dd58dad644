"""One call at a time on a ``Decoder`` (``specdec.turns``): threads sharing a decoder get the
tokens of sequential calls, and a stream closed early or left open leaves the decoder answering as
a fresh one (greedy, tiny pair)."""

from __future__ import annotations

import threading

import pytest
import torch

import specdec
from specdec.api import StreamCancelled

PROMPTS = [f"Prompt number {i}: name {i + 2} colours." for i in range(10)]
NEW = 8


@pytest.fixture(scope="module")
def dec():
    return specdec.load("tiny", method="sps")


@pytest.fixture(scope="module")
def fresh():
    """A second decoder on which every call runs alone: the reference answers."""
    return specdec.load("tiny", method="sps")


def test_a_stream_left_open_is_cancelled_by_its_threads_next_call(dec, fresh):
    """Before: the open stream's loop ran on beside the next call, which crashed
    (``size of tensor a ... must match``) or returned wrong tokens."""
    it = iter(dec.generate(PROMPTS[0], max_new_tokens=2000, stream=True))
    next(it)
    out = dec.generate(PROMPTS[1], max_new_tokens=NEW)
    assert out.tokens == fresh.generate(PROMPTS[1], max_new_tokens=NEW).tokens
    with pytest.raises(StreamCancelled, match="read or close a stream"):
        next(it)
    assert (
        dec.generate(PROMPTS[2], max_new_tokens=NEW).tokens
        == fresh.generate(PROMPTS[2], max_new_tokens=NEW).tokens
    )


class Leave(Exception):
    """The reader's own error."""


@pytest.mark.parametrize("how", ["close", "with", "exception", "keyboard_interrupt"])
def test_a_stream_closed_early_leaves_the_decoder_as_fresh(dec, fresh, how):
    stream = dec.generate(PROMPTS[3], max_new_tokens=2000, stream=True)
    if how == "close":
        next(iter(stream))
        stream.close()
    elif how == "with":
        with stream:
            next(iter(stream))
    else:
        error = Leave if how == "exception" else KeyboardInterrupt
        with pytest.raises(error):
            for _ in stream:
                raise error
    assert stream.result is None  # stopped at its next step: nothing half-returned
    for prompt in PROMPTS[4:6]:
        assert (
            dec.generate(prompt, max_new_tokens=NEW).tokens
            == fresh.generate(prompt, max_new_tokens=NEW).tokens
        )


def test_two_threads_on_one_decoder_get_the_tokens_of_sequential_calls(dec, fresh):
    """Five prompts per thread, one thread streaming, started together. Before: 10 of 10 wrong
    (size mismatches or other tokens)."""
    want = [fresh.generate(p, max_new_tokens=NEW).tokens for p in PROMPTS]
    got: dict[int, list[int]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def work(first: int, stream: bool) -> None:
        torch.set_num_threads(1)  # each thread's budget, as the suite's main thread has
        try:
            start.wait()
            for i in range(first, len(PROMPTS), 2):
                out = dec.generate(PROMPTS[i], max_new_tokens=NEW, stream=stream)
                if stream:
                    chunks = list(out)
                    assert sum((c.tokens for c in chunks), []) == out.result.tokens
                    out = out.result
                got[i] = out.tokens
        except BaseException as err:  # reported in the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k, k == 1)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert [got.get(i) for i in range(len(PROMPTS))] == want


def test_a_call_waits_for_another_threads_stream(dec, fresh):
    """The stream holds the decoder from its first chunk to the end of its loop; the other
    thread's call runs after it, and both answers are a fresh decoder's."""
    opened, results = threading.Event(), {}

    def reader() -> None:
        torch.set_num_threads(1)
        stream = dec.generate(PROMPTS[7], max_new_tokens=24, stream=True)
        chunks = iter(stream)
        first = next(chunks)
        opened.set()
        results["stream"] = first.tokens + sum((c.tokens for c in chunks), [])

    thread = threading.Thread(target=reader)
    thread.start()
    assert opened.wait(60)
    results["call"] = dec.generate(PROMPTS[8], max_new_tokens=NEW).tokens
    thread.join(60)
    assert results["stream"] == fresh.generate(PROMPTS[7], max_new_tokens=24).tokens
    assert results["call"] == fresh.generate(PROMPTS[8], max_new_tokens=NEW).tokens
