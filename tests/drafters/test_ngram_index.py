"""The prompt-lookup matcher (``specdec.drafters.ngram_index``): the same picks as a brute-force
search over every earlier position, and memory linear in the context (measured with
``tracemalloc``), whatever ``max_n``."""

from __future__ import annotations

import random
import tracemalloc

from specdec.drafters.ngram_index import MAX_NGRAM, NgramIndex


def brute_force(ids: list[int], suffix: list[int], lo: int, hi: int) -> list[int]:
    """Every position ``s`` with ``ids[s-n:s] == suffix[-n:]``, longest n first, most recent
    first, keeping the first position of each next token (what the drafter picks from)."""
    out, seen = [], set()
    for n in range(min(hi, len(suffix)), lo - 1, -1):
        for s in range(len(ids) - 1, n - 1, -1):
            if ids[s - n : s] == suffix[-n:] and ids[s] not in seen:
                seen.add(ids[s])
                out.append(s)
    return out


def picks(index: NgramIndex, suffix: list[int]) -> list[int]:
    out, seen = [], set()
    for s in index.candidates(suffix):
        if index.ids[s] not in seen:
            seen.add(index.ids[s])
            out.append(s)
    return out


def text_like(length: int, seed: int) -> list[int]:
    """Fresh tokens with copies of earlier spans, as a summary copies its article."""
    rng, out = random.Random(seed), []
    while len(out) < length:
        if out and rng.random() < 0.3:
            start = rng.randrange(len(out))
            out += out[start : start + rng.randint(3, 30)]
        else:
            out += [rng.randrange(8000) for _ in range(rng.randint(5, 40))]
    return out[:length]


def test_picks_agree_with_a_brute_force_search_for_long_ngrams_and_repeats():
    """Small vocabularies and repeated halves make long repeats: leaves move down many levels."""
    rng = random.Random(3)
    for case in range(150):
        lo = rng.randint(1, 3)
        hi, vocab = rng.randint(lo, 12), rng.randint(2, 5)
        seq = [rng.randrange(vocab) for _ in range(rng.randint(1, 60))]
        if case % 3 == 0:
            seq += seq[: rng.randint(1, len(seq))]
        index, done = NgramIndex(lo, hi), 0
        while done < len(seq):  # grown a few tokens at a time, as in decoding
            step = rng.randint(1, 4)
            index.extend(seq[done : done + step])
            done = min(len(seq), done + step)
            have = seq[:done]
            for suffix in (
                have[-hi:],
                have[-rng.randint(1, hi) :],
                [rng.randrange(vocab) for _ in range(hi)],
            ):
                assert picks(index, suffix) == brute_force(have, suffix, lo, hi), (case, done)


def test_ngrams_across_the_history_separator_never_match():
    index = NgramIndex(1, 3)
    index.extend([1, 2, 3, -1, 1, 2, 4])
    assert list(index.candidates([3, 1])) == [5]  # "3 1" is not there; "1" is, before 2
    assert list(index.candidates([1, 2])) == [6, 2, 6, 2]  # n = 2, then n = 1


def peak_bytes(length: int, max_n: int) -> int:
    ids = text_like(length, seed=0)
    tracemalloc.start()
    try:
        NgramIndex(1, max_n).extend(ids)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_is_linear_in_the_context_at_the_longest_ngram():
    """2k tokens at max_n = 64 took 51 MiB when every n-gram was kept as a tuple (cubic when
    max_n grows with the context); the trie takes ~1 MiB and doubles with the context."""
    small, large = peak_bytes(1024, MAX_NGRAM), peak_bytes(2048, MAX_NGRAM)
    assert large < 4 << 20, large  # under 2 KiB a token
    assert large < 2.6 * small, (small, large)
    assert peak_bytes(2048, 3) < 2 << 20
