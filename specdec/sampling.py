"""Turning logits into the distributions that speculative decoding verifies, and production coins.

``warp`` applies temperature, top-k and top-p (nucleus; ``Sampling``, declared in
``specdec.sampling_params``) exactly as a sampler would, so that the
target distribution ``p`` the verifiers reproduce is the *warped* one; drafters warp their own
logits with the same settings. Temperature 0 returns one-hot argmax rows, so greedy decoding is
tokenwise verification against a one-hot ``p`` and needs no separate code path.

``TorchCoins`` draws every random number from one explicit ``torch.Generator`` (no global RNG).
``TorchCoins.fork(key)`` gives a child stream for background and ahead-of-time drafting (PEARL,
SpecBranch, SSD): its seed is ``fork_seed(parent_seed, key)``, a SHA-256 of the parent's seed and a
canonical, type-tagged encoding of the key, so a child's draws depend on neither thread timing nor
how far the parent has drawn, and are the same in every process (Python's ``hash()`` is salted).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable

import torch

from specdec.coins import Coins
from specdec.rowops import argmax_rows
from specdec.sampling_params import Sampling


def warp(logits: torch.Tensor, sampling: Sampling, top: torch.Tensor | None = None) -> torch.Tensor:
    """Warp logits into probabilities.

    Args:
        logits: ``[N, V]`` raw logits (any float dtype; the output keeps it).
        sampling: temperature / top-k / top-p.
        top: ``[N]`` the rows' argmax when the caller already found it; used at temperature 0.

    Returns:
        ``[N, V]`` rows that sum to 1; one-hot argmax rows when ``temperature == 0``.
    """
    if sampling.temperature == 0:
        index = argmax_rows(logits) if top is None else top  # [N]
        out = torch.zeros_like(logits)  # [N, V]
        return out.scatter_(-1, index.to(logits.device)[:, None], 1.0)
    scores = logits if sampling.temperature == 1 else logits / sampling.temperature  # [N, V]
    if sampling.top_k > 0 and sampling.top_k < scores.shape[-1]:
        kth = torch.topk(scores, sampling.top_k, dim=-1).values[..., -1:]  # [N, 1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if sampling.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=True)  # [N, V]
        cum = sorted_scores.softmax(-1).cumsum(-1)
        # drop a token when the mass before it already reaches top_p (the top token always stays)
        drop_sorted = (cum - sorted_scores.softmax(-1)) >= sampling.top_p
        drop = torch.zeros_like(drop_sorted).scatter_(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores.softmax(-1)


class TorchCoins:
    """Coins backed by one explicit ``torch.Generator`` (CPU generator; results are device-free).

    Args:
        seed: seeds a fresh CPU generator (per prompt: see ``prompt_seed``); kept as ``seed``.
    """

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self.generator = torch.Generator(device="cpu").manual_seed(self.seed)
        self._forked: set[str] = set()  # canonical keys already forked from this stream

    def bernoulli(self, prob: float) -> bool:
        u = torch.rand((), generator=self.generator, dtype=torch.float64)
        return bool(u < float(prob))

    def categorical(self, probs: torch.Tensor) -> int:
        """Draw an index with probability ``probs[i] / probs.sum()`` (inverse CDF, float64).

        A point mass draws no random number (greedy decoding consumes no coins). Otherwise one
        uniform ``u`` in ``[0, total)`` picks the first index whose cumulative mass exceeds it, so a
        zero-probability index is never drawn. (``torch.multinomial`` on a 49k vocabulary costs
        ~0.8 ms per draw on CPU; this costs about a tenth.) "Point mass" is read before any CDF is
        built: the largest probability equals the float64 sum, i.e. the other indices together
        hold less than float64 resolves beside it; the draw is then its index (two vectorised
        passes, ``amax`` and a float64 ``sum``: the CDF's sequential float64 ``cumsum`` over 49k
        entries, ~40 us, is paid only by a real draw).
        """
        assert probs.dim() == 1, f"categorical takes a 1-D distribution, got {tuple(probs.shape)}"
        probs = probs.detach()
        total = float(probs.sum(dtype=torch.float64))
        if not total > 0:  # also catches NaN
            raise ValueError("categorical: the distribution has no positive probability")
        if float(probs.amax()) == total:  # a point mass: no coin
            return int(argmax_rows(probs))
        cdf = probs.to("cpu", torch.float64).cumsum(0)  # [V]
        u = torch.rand((), generator=self.generator, dtype=torch.float64) * float(cdf[-1])
        return min(int(torch.searchsorted(cdf, u, right=True)), probs.numel() - 1)

    def fork(self, key: Hashable) -> TorchCoins:
        """A child with its own generator seeded by ``fork_seed(self.seed, key)``.

        The child ignores this stream's position, and drawing from it never moves this stream.
        Forking one key twice would give the same stream twice (two uses drawing the same
        numbers, so their joint law is no longer the product the verifiers assume): it raises.

        Raises:
            ValueError: ``key`` was already forked from this stream.
        """
        canon = canonical_key(key)
        if canon in self._forked:
            raise ValueError(
                f"Coins.fork({key!r}) called twice on one stream: both children would draw the "
                f"same numbers. Make the key unique per use (e.g. add the step, or fork each turn "
                f"of a conversation from its own stream with turn_coins)"
            )
        self._forked.add(canon)
        return TorchCoins(_seed_of(self.seed, canon))


def turn_coins(coins: Coins, turn: int) -> Coins:
    """The stream of turn ``turn`` (0-based) of a conversation answered with one prompt's coins.

    Drafters key their forks by the decoding step and context length (``("pearl", step, len)``),
    which recur when two turns have the same length (``truncate_prompts=left`` cuts every long
    turn to one length); each turn drawing from its own child stream keeps every key unique over
    the whole conversation.
    """
    return coins.fork(("turn", int(turn)))


def canonical_key(key: Hashable) -> str:
    """An injective, process-independent text encoding of a fork key.

    Keys are ``int``, ``str``, ``bool``, ``None`` and (nested) tuples of those; each value is
    tagged with its type and strings are length-prefixed, so ``1``, ``"1"``, ``True`` and ``(1,)``
    differ. Floats are refused on purpose: a key names one use of randomness, and float
    equality (``0.1 + 0.2``, ``-0.0``, ``nan``) makes that ambiguous; use an int counter.

    Raises:
        TypeError: for any other type (tensors, floats, lists, numpy scalars, ...).
    """
    if key is None:
        return "N"
    if isinstance(key, bool):
        return "T" if key else "F"
    if isinstance(key, int):
        return f"i{int(key)};"
    if isinstance(key, str):
        return f"s{len(key)}:{key}"
    if isinstance(key, tuple):
        return f"t{len(key)}(" + "".join(canonical_key(k) for k in key) + ")"
    raise TypeError(
        f"Coins.fork keys must be int, str, bool, None or tuples of those (they must encode the "
        f"same way in every process); got a {type(key).__module__}.{type(key).__qualname__}. "
        f"Convert tensors and numpy scalars with int(...), and use an int counter, not a float"
    )


def fork_seed(seed: int, key: Hashable) -> int:
    """The seed of the child stream ``key`` of the stream seeded ``seed`` (63-bit, stable)."""
    return _seed_of(seed, canonical_key(key))


def _seed_of(seed: int, canon: str) -> int:
    """``fork_seed`` of a key already encoded by ``canonical_key``."""
    text = f"specdec.fork:{int(seed)}:{canon}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def prompt_seed(seed: int, prompt_id: str | int) -> int:
    """A per-prompt seed derived from the run seed and the prompt id (stable across runs)."""
    digest = hashlib.sha256(f"{seed}:{prompt_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
