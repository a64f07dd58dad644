"""Composing a method on a pair: the target's cache, the draft's, a drafter, a verifier, sampling.

One composition serves every caller that decodes: the eval harness (``specdec.bench.run.method``
builds the parts a method preset's config names) and the learners' data generation (H-RAD labels,
SpecDec++ acceptance data), so labels come from the same decoding set-up as the eval's records.
It wraps the target and the draft in ``CachedLM`` (the draft fitted to the target's vocabulary
rows, ``specdec.vocab``, and run on the pair's draft threads), builds the drafter on the draft
(``make_drafter``; ``None`` when the pair has no draft) and then the verifier, checks that the
verifier takes the drafter's drafts (``engine.check_compatible``), switches flash-attention
models to ``sdpa`` when the drafter makes trees (``models.gpu.fit_attention``, recorded in the
pair's ``Placement``), and checks that every tensor the method holds sits where the placement
says (``specdec.models.placement.check_built``), before any decoding. The caches are static
(preallocated, bucketed forwards: ``specdec.static_cache``) when the pair was loaded with
``static_cache``: the target's, the draft's and those of the models a drafter builds itself (the
EAGLE-3 decoder's ``CachedLM``), so their forwards are replayed too (``model.cuda_graphs``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from specdec.core import Drafter, Verifier
from specdec.engine import check_compatible
from specdec.lm import CachedLM
from specdec.models import ModelPair
from specdec.models.gpu import TREE_FALLBACK, fit_attention
from specdec.models.placement import Held, check_built
from specdec.sampling import Sampling


@dataclass(frozen=True)
class Method:
    """What a method preset builds: the target with its cache, a drafter, a verifier, and the
    sampling a generation uses unless given another (the parts hold none: ``Context.sampling``)."""

    target: CachedLM
    drafter: Drafter
    verifier: Verifier
    sampling: Sampling

    def modules(self) -> dict[str, Held]:
        """Every module the method holds, by name, with its placement role."""
        return {"target": Held("target", self.target.model), **self.drafter.modules()}


def compose_method(
    pair: ModelPair,
    sampling: Sampling,
    make_drafter: Callable[[CachedLM | None], Drafter],
    make_verifier: Callable[[], Verifier],
    *,
    synchronize: bool = False,
) -> Method:
    """Build a method on ``pair`` (see module).

    Args:
        sampling: the method's default sampling (``Method.sampling``); the drafter gets none: the
            engine hands each step's sampling to it in ``Context.sampling``.
        make_drafter: ``draft LM or None -> Drafter``, called once.
        make_verifier: called once, after the drafter.
        synchronize: a CUDA sync after every forward (needed to time forwards one by one).
    """
    # model.static_cache: preallocated caches, bucketed forwards (specdec.static_cache)
    spec = pair.static_cache
    static = {
        "static": spec is not None,
        "max_cache_len": spec.max_cache_len if spec else None,
        "graphs": spec.cuda_graphs if spec else None,
    }  # model.cuda_graphs (specdec.graphs)
    target = CachedLM(pair.target, role="target", synchronize=synchronize, **static)
    draft = None
    if pair.draft is not None:
        # the target's rows: a draft with other (padding) rows is fitted to them (specdec.vocab)
        draft = CachedLM(
            pair.draft,
            role="draft",
            threads=pair.draft_threads,
            synchronize=synchronize,
            vocab_size=target.vocab_size,
            **static,
        )
    drafter = make_drafter(draft)
    if spec is not None:  # a drafter's own models (EAGLE-3's decoder) get the pair's cache kind
        for lm in drafter.models:
            if isinstance(lm, CachedLM) and not lm.static:
                lm.use_static(spec.max_cache_len, spec.cuda_graphs)
    verifier = make_verifier()
    check_compatible(target, drafter, verifier)
    # flash-attention cannot take tree masks: such models run sdpa, recorded in the fingerprint
    switched = fit_attention(
        [("target", pair.target), ("draft", pair.draft)], makes_trees=drafter.makes_trees
    )
    if "target" in switched:
        pair.placement = replace(pair.placement, attention=TREE_FALLBACK)
        pair.info.update(attention_requested=switched["target"])
    if "draft" in switched:
        pair.info.update(draft_attention=TREE_FALLBACK)
    method = Method(target, drafter, verifier, sampling)
    check_built(method.modules(), pair.placement)
    return method
