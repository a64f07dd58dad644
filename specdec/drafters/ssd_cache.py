"""SSD's speculation cache: next-step drafts for anticipated verification outcomes, and JIT chains.

Kumar et al. 2025, "Speculative Speculative Decoding" (ICLR 2026): while the target verifies the
draft ``[r, s_1..s_K]``, the draft model guesses the verdict. An outcome is ``(k, y)``: ``k``
tokens accepted and ``y`` the recovered (``k < K``) or bonus (``k = K``) token. For each ``k`` it
takes ``F_k`` candidate tokens ``c`` (the top-``F_k`` of the draft's logits at that slot,
without ``s_{k+1}``: a rejected token is never the recovered one, its residual mass is 0) and
drafts a chain after ``prefix + s_1..s_k + c``. The cache maps ``(k, c)`` to that chain.

``speculate`` builds the whole speculation as one draft-model tree, frontier by frontier
(``drafters.tree.TreeGrower``): one "glue" forward scores ``s_1..s_K`` (rows ``q_1..q_K``; ``q_0``
comes from reconciling the root), then one forward per chain depth scores every chain's newest
node at once -- the paper's batched tree decode, so the background lane costs ``1 + γ`` forwards
of ``Σ F_k``-ish new tokens, not ``Σ F_k·γ`` one-token forwards. The tree mask gives each node the
logits a serial chain forward after the same prefix would give.

Each chain token is drawn from the SAGUARO-reshaped ``q'`` (``drafters.saguaro``) of its own node
with the chain's own coins, ``coins.fork((k, c))``: independent of the verifier's draws and of the
other chains, which is what makes a cache hit exact (``drafters.ssd``). ``jit_chain`` drafts one
chain serially on the caller's coins (the lossless miss path).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specdec.coins import Coins
from specdec.core import LM, Draft
from specdec.drafters.saguaro import reshape
from specdec.drafters.tree import TreeGrower
from specdec.sampling import Sampling, warp

Key = tuple[int, int]  # (accepted count k, recovered-or-bonus token)


@dataclass(frozen=True)
class Plan:
    """What one speculation job drafts.

    Attributes:
        ids: every committed token; the last is the root ``r`` of the draft being verified.
        draft: ``[s_1..s_K]``, the drafted tokens being verified.
        fanout: ``F_k`` for ``k = 0..K`` (candidates per outcome).
        lengths: ``L_k`` for ``k = 0..K``: the chain length the next step drafts after outcome
            ``k`` (0: no chain, e.g. the generation ends there).
        coins: the job's stream (forked per step); chain ``(k, c)`` draws from ``fork((k, c))``.
        stop_ids: a chain ends after a stop id; a candidate that is a stop id gets no chain.
    """

    ids: list[int]
    draft: list[int]
    fanout: list[int]
    lengths: list[int]
    coins: Coins
    stop_ids: frozenset[int] = frozenset()


@dataclass
class _Chain:
    key: Key
    node: int  # its newest node in the speculation tree
    length: int
    coins: Coins
    tokens: list[int] = field(default_factory=list)
    q: list[torch.Tensor] = field(default_factory=list)  # [V] rows each


def candidates(scores: torch.Tensor, count: int, exclude: int | None) -> list[int]:
    """The ``count`` best tokens by ``scores [V]`` (ties: lower id), without ``exclude``."""
    order = torch.argsort(-scores, stable=True).tolist()
    return [t for t in order if t != exclude][:count]


def speculate(lm: LM, plan: Plan, sampling: Sampling, top: int, c: float) -> dict[Key, Draft]:
    """Draft the chains of ``plan`` in one speculation tree; ``{(k, c): Draft rooted at c}``."""
    K = len(plan.draft)
    need = [k for k in range(K + 1) if plan.fanout[k] > 0 and plan.lengths[k] > 0]
    if not need:
        return {}
    grower = TreeGrower(lm, plan.ids)
    tokens, parent = [plan.ids[-1], *plan.draft], list(range(-1, K))
    # 1. Glue: score s_1..s_k for the deepest outcome needed (row k is the slot's q_k).
    if max(need) > 0:
        grower.score(list(range(1, max(need) + 1)), tokens, parent)
    # 2. Candidates per outcome, each the first node of its chain.
    chains: list[_Chain] = []
    for k in need:
        # ranked by the raw draft logits: the warped q's order on its support, and at T = 0 (a
        # one-hot q) the draft's runners-up rather than arbitrary zero-probability tokens
        exclude = plan.draft[k] if k < K else None
        for tok in candidates(grower.logits[k], plan.fanout[k], exclude):
            if tok in plan.stop_ids:
                continue  # that outcome ends the generation
            tokens.append(tok)
            parent.append(k)
            chains.append(
                _Chain((k, tok), len(tokens) - 1, plan.lengths[k], plan.coins.fork((k, tok)))
            )
    # 3. Depth by depth: score every chain's newest node in one forward, then draw its child.
    frontier = chains
    while frontier:
        grower.score([ch.node for ch in frontier], tokens, parent)
        grown = []
        for ch in frontier:
            q = reshape(warp(grower.logits[ch.node][None], sampling), top, c)[0]  # [V]
            tok = ch.coins.categorical(q)
            ch.tokens.append(tok)
            ch.q.append(q)
            if len(ch.tokens) < ch.length and tok not in plan.stop_ids:
                tokens.append(tok)
                parent.append(ch.node)
                ch.node = len(tokens) - 1
                grown.append(ch)
        frontier = grown
    grower.close()
    return {ch.key: _as_draft(ch.key[1], ch.tokens, ch.q) for ch in chains}


def jit_chain(
    lm: LM,
    ids: list[int],
    length: int,
    sampling: Sampling,
    top: int,
    c: float,
    coins: Coins,
    stop_ids: frozenset[int] = frozenset(),
) -> Draft:
    """A chain of up to ``length`` tokens after ``ids`` (root last), drawn serially from ``q'``."""
    out = lm.reconcile(ids)
    tokens: list[int] = []
    rows: list[torch.Tensor] = []
    while True:
        q = reshape(warp(out.logits[-1:], sampling), top, c)[0]  # [V]
        tokens.append(coins.categorical(q))
        rows.append(q)
        if len(tokens) >= length or tokens[-1] in stop_ids:
            break
        out = lm.forward(torch.tensor(tokens[-1:]))
    return _as_draft(ids[-1], tokens, rows)


def _as_draft(root: int, tokens: list[int], rows: list[torch.Tensor]) -> Draft:
    leaf = torch.zeros_like(rows[-1])  # the last node's row is unused
    return Draft.chain(root, torch.tensor(tokens, dtype=torch.long), torch.stack([*rows, leaf]))
