"""The sibling walk: verify a token tree by running a chain rule on one root-to-leaf chain at once.

Recursive rejection over siblings (SpecInfer, Miao et al. 2024; Yang et al. 2024 multi-candidate
speculative sampling; the EAGLE point-mass rule), generalised from "one token" to "one chain": at
the current node ``n`` with target distribution ``d_n`` (``p[n]`` at first), take the first untried
child ``c`` and its *leftmost chain* ``c, first child of c, ...`` down to a leaf, and run a chain
rule (tokenwise, blockwise, HSD) on it with ``d_n`` in place of ``p[n]``. The rule accepts a prefix
of ``τ`` chain nodes and returns the distribution ``r`` the next token would be drawn from (a
residual, or ``p[leaf]`` after full acceptance). Instead of drawing that token, the walk moves to
the last accepted node ``m`` and tries ``m``'s next untried child against ``r``; when ``m`` has no
untried child the recovered (or bonus) token is drawn from ``r``.

Why it is lossless: a lossless chain rule returns ``(accepted prefix, r)`` such that "draw y ~ r,
then continue with the target" reproduces the target. The untried children of ``m`` are, given
everything the rule looked at, still draws from ``q[m]`` (i.i.d. siblings, independent of the chain
just tried) or deterministic (``q = None``), so verifying them losslessly against ``r`` is a valid
way to draw ``y ~ r`` and continue. The exact enumeration tests check this for every chain rule.

Duplicate siblings (i.i.d. draws that repeat a token) stay separate nodes: they carry the sampling
multiplicity that the with-replacement residual update needs (see ``drafters.multi``).
"""

from __future__ import annotations

from typing import Protocol

import torch

from specdec.coins import Coins
from specdec.core import Draft, Verdict
from specdec.trees import children


class ChainRule(Protocol):
    """Verify one chain: ``rule(tokens, p_rows, q_rows, coins) -> (tau, r)``.

    Args:
        tokens: the L drafted tokens of the chain.
        p_rows: ``[L+1, V]`` target distributions; row ``t`` is over the token after ``t`` chain
            tokens (row 0 may be a residual handed down by the walk).
        q_rows: ``[L, V]`` draft distributions the tokens were drawn from, or ``None`` (point
            masses on the tokens).
        coins: randomness.

    Returns:
        ``tau``: number of accepted chain tokens; ``r [V]``: the distribution of the next token
        (``p_rows[L]`` when ``tau == L``).
    """

    def __call__(
        self, tokens: list[int], p_rows: torch.Tensor, q_rows: torch.Tensor | None, coins: Coins
    ) -> tuple[int, torch.Tensor]: ...


def leftmost_chain(child: int, kids: list[list[int]]) -> list[int]:
    """Node indices from ``child`` down to a leaf, always taking the first child."""
    chain = [child]
    while kids[chain[-1]]:
        chain.append(kids[chain[-1]][0])
    return chain


def walk(draft: Draft, p: torch.Tensor, coins: Coins, rule: ChainRule) -> Verdict:
    """Verify a tree (or chain) draft with ``rule`` applied chain by chain.

    Args:
        draft: a tree; ``draft.q [N, V]`` (i.i.d. siblings) or ``None`` (point masses).
        p: ``[N, V]`` target distributions over the children of each node.
        coins: randomness.
        rule: the chain rule.

    Returns:
        The accepted root-to-node path and the recovered or bonus token.
    """
    kids = children(draft.parent)
    q = None if draft.q is None else draft.q.to(p)  # [N, V]
    tokens = draft.tokens.tolist()
    node, dist, next_child, path = 0, p[0], 0, []
    while next_child < len(kids[node]):
        # 1. The leftmost chain below the next untried child of the current node.
        chain = leftmost_chain(kids[node][next_child], kids)
        p_rows = torch.cat([dist[None], p[chain]])  # [L+1, V]
        q_rows = None if q is None else q[[node, *chain[:-1]]]  # [L, V]
        # 2. The chain rule accepts tau chain nodes and hands back the next distribution.
        tau, dist = rule([tokens[i] for i in chain], p_rows, q_rows, coins)
        path += chain[:tau]
        # 3. Move to the last accepted node; its first child (on the chain) has been tried.
        if tau == 0:
            next_child += 1
        else:
            node, next_child = chain[tau - 1], 1
    # 4. No untried child left: draw the recovered (or bonus) token.
    return Verdict(path, coins.categorical(dist))
