"""Two ``CachedLM`` views of one model driven by the same calls: the dynamic cache and another
(the static cache, or the static cache replayed through the graph runner), compared call by call.
"""

from __future__ import annotations

from specdec.lm import CachedLM

TOL = 1e-12  # float64: the same arithmetic up to rounding


class Twin:
    """``dyn`` (the dynamic cache) and ``other`` (``CachedLM(model, **kwargs)``) on one model;
    each call runs on both and asserts the same committed ids, logits and hidden states."""

    def __init__(self, model, **kwargs) -> None:
        self.dyn = CachedLM(model)
        self.other = CachedLM(model, **kwargs)

    def __call__(self, call: str, *args, **kwargs) -> None:
        a = getattr(self.dyn, call)(*args, **kwargs)
        b = getattr(self.other, call)(*args, **kwargs)
        assert self.dyn.ids == self.other.ids
        if a is None:
            return
        assert a.logits.shape == b.logits.shape
        assert (a.logits - b.logits).abs().max().item() <= TOL, call
        if a.hidden is not None:
            assert a.hidden.shape == b.hidden.shape
            assert (a.hidden - b.hidden).abs().max().item() <= TOL, call


def generate_on(cfg, pair, spec, prompt: list[int], max_new_tokens: int):
    """Build ``cfg``'s method on ``pair`` with cache kind ``spec`` (``None``: dynamic; a
    ``StaticSpec``) and decode ``prompt`` with fixed coins: ``(method, generation)``, so tests can
    compare the same decoding over the dynamic and the static cache."""
    from dataclasses import replace

    from specdec.bench.run.runner import build_method
    from specdec.engine import generate
    from specdec.sampling import TorchCoins

    m = build_method(cfg, replace(pair, static_cache=spec))
    gen = generate(
        prompt,
        m.target,
        m.drafter,
        m.verifier,
        sampling=m.sampling,
        coins=TorchCoins(1),
        max_new_tokens=max_new_tokens,
    )
    return m, gen
