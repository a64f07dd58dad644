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
