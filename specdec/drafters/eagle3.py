"""Eagle3Drafter: a feature drafter growing a dynamic token tree (EAGLE-3 net, EAGLE-2 tree).

EAGLE-3 (Li et al. 2025) drafts from the target's own hidden states: a draft position reads the
fused features of the target's ``target_layers`` at a verified position (or, below it, the draft's
own output at the parent node) and the embedding of the next token (``nets.eagle3.net``).
The tree is EAGLE-2's (Li et al. 2024, "EAGLE-2: Faster Inference of Language Models with
Dynamic Draft Trees"): every candidate carries its cumulative draft log-probability ``c``; per
depth the ``topk`` best candidates of that depth are expanded (one draft forward of those nodes),
each adding its ``topk`` best tokens as candidates; finally the ``total_tokens`` best candidates
over all depths are kept. A child's ``c`` never exceeds its parent's, so ranking by ``(−c,
depth)`` keeps every kept node's ancestors. The tree is a deterministic function of the context,
so ``q = None`` and verification uses the point-mass tree rules (``rrs`` or ``hsd``). This module
holds only the expansion rule (``_grow``); the candidates, keeping the best and the ``Draft`` are
``drafters.candidates``', loading, placement, target checks and the step ``drafters.features``'.

The net is ours (``nets.eagle3.net.Eagle3Net``) or a released head's published architecture
(``nets.eagle3.published.PublishedEagle3Net``), driven through the same interface:
``condition(features)``, ``inputs(embeds, cond)``, ``.decoder``, whose last hidden state is the
condition of a node's children.

Cache: the decoder's ``CachedLM`` holds one position per verified token (``real`` of them, each
computed from real target features); each step first drops the previous tree and the positions of
the previous draft (``crop(real)``), then forwards the newly verified positions with
``Context.target_features`` (at least the old root), whose last output scores the root.
"""

from __future__ import annotations

import math

import torch

from specdec.core import Context
from specdec.drafters.candidates import Candidates
from specdec.drafters.features import FeatureDrafter
from specdec.drafters.limits import check_nodes, check_width
from specdec.drafters.policies import Policy
from specdec.errors import BadInput
from specdec.lm import CachedLM
from specdec.models.placement import Placement
from specdec.nets.eagle3.net import Eagle3Net, load_eagle3
from specdec.nets.eagle3.published import PublishedEagle3Net


class Eagle3Drafter(FeatureDrafter):
    """Dynamic-tree drafting with a trained EAGLE-3 network.

    Args:
        policy: ``policy.limit()`` caps the tree depth.
        path: folder of the shipped drafter (``nets.eagle3.net.save_eagle3``), or of a head
            in a published layout, or a hub id cached offline (``nets.eagle3.interop``).
        topk: children per expanded node and nodes expanded per depth.
        total_tokens: drafted nodes kept (the target verifies ``total_tokens + 1``).
        experiment: the training experiment named in errors (``eagle3_<model>``).
        target_layers: the target layers of a published head that pins none (else unused).
        placement: the pair's (``specdec.models.placement``): the net goes to the target's
            device and dtype with the pair's CPU kernels (None: the CPU, the asset's dtype).

    No draft LM and no sampling: the net is its own draft, and the tree ranks raw draft
    log-probabilities (``q = None``).
    """

    name = "EAGLE-3"

    def __init__(
        self,
        policy: Policy,
        path: str,
        topk: int = 2,
        total_tokens: int = 4,
        experiment: str = "eagle3_<model>",
        target_layers: list[int] | None = None,
        placement: Placement | None = None,
    ) -> None:
        if topk < 1 or total_tokens < 1:
            raise BadInput(
                f"drafter.topk and drafter.total_tokens must be >= 1, got {topk}, {total_tokens}"
            )
        self.topk, self.total = int(topk), int(total_tokens)
        super().__init__(
            policy,
            lambda command: load_eagle3(path, train_command=command, target_layers=target_layers),
            cache=lambda net: CachedLM(
                net.decoder, role="draft", vocab_size=net.meta["target_vocab"]
            ),
            experiment=experiment,
            placement=placement,
            asset=path,
        )
        self.net: Eagle3Net | PublishedEagle3Net
        self.vocab = self.net.decoder.token_map  # [V_d]
        check_width("drafter.topk", self.topk, int(self.vocab.numel()))
        depth = policy.longest()  # topk expanded nodes per depth; topk² candidates each
        check_nodes(
            max(1 + self.topk * depth, self.topk**2, 1 + self.total),
            what=f"drafter.topk={topk} (depth {depth}), drafter.total_tokens={total_tokens}",
            fix="drafter.topk or drafter.total_tokens",
        )

    def reset(self) -> None:
        super().reset()
        self.real, self.root_out = 0, None  # verified positions cached; (logits [V], hidden [H])

    # --- verified positions -------------------------------------------------------------------
    def _advance(self, tokens: list[int], features: torch.Tensor) -> None:
        """Forward verified positions ``real..real+n-1`` (features ``[n, k, H]``; position ``t``
        reads ``x_{t+1}`` = ``tokens[t + 1]``) and keep the last one's output for the root."""
        n = int(features.shape[0])
        nxt = torch.tensor(tokens[self.real + 1 : self.real + 1 + n])  # [n]
        assert nxt.numel() == n, "features must cover the positions up to the root"
        self.lm.crop(self.real)

        def fused() -> torch.Tensor:  # runs inside the logged draft forward (its cost)
            return self.net.inputs(self.view.embed(nxt), self.net.condition(features))  # [n, H]

        out = self.lm.forward(nxt, inputs_embeds=fused, hidden_layers=(-1,))
        self.real += n
        self.root_out = (out.logits[-1], out.hidden[-1, 0])

    def _verified(self) -> int:
        return self.real

    # --- the tree: EAGLE-2's expansion rule ---------------------------------------------------
    def _grow(self, tree: Candidates, ctx: Context, depth_limit: int) -> None:
        """Per depth, expand the ``topk`` best candidates of that depth by their ``topk`` best
        tokens each (one draft forward of those nodes); the root's children come first."""
        hidden: dict[int, torch.Tensor] = {-1: self.root_out[1]}
        slot: dict[int, int] = {}  # expanded candidate -> pending index in the draft cache
        self._children(tree, [-1], self.root_out[0][None])
        for d in range(1, depth_limit):
            # 1. Expand the topk best candidates of depth d (stop ids get no children).
            level = tree.frontier(d, self.topk, ctx.stop_ids)
            if not level:
                break
            # 2. One draft forward of those nodes: parent output as condition, own token.
            toks = torch.tensor([tree.token[i] for i in level])  # [M]
            cond = torch.stack([hidden[tree.parent[i]] for i in level])  # [M, H]
            parents = torch.tensor([slot.get(tree.parent[i], -1) for i in level])  # [M]
            grow = self.lm.forward if not slot else self.lm.extend
            out = grow(
                toks,
                parents,
                hidden_layers=(-1,),
                inputs_embeds=lambda t=toks, c=cond: self.net.inputs(self.view.embed(t), c),
            )
            for j, i in enumerate(level):
                slot[i] = len(slot)
                hidden[i] = out.hidden[j, 0]
            self._children(tree, level, out.logits)
        if slot:
            self.lm.keep([])

    def _children(self, tree: Candidates, nodes: list[int], logits: torch.Tensor) -> None:
        """Each node's ``topk`` children by cumulative log-prob (``logits``: ``[M, V]``).

        One topk and one logsumexp over the level's rows (log_softmax is x - logsumexp(x),
        monotone in x), read on the draft vocabulary's columns only (the rest are -inf: never
        candidates, no mass)."""
        small = logits.index_select(-1, self.vocab).float()  # [M, V_d]
        best = torch.topk(small, min(self.topk, small.shape[-1]), dim=-1)  # [M, k]
        lp = best.values - torch.logsumexp(small, -1, keepdim=True)  # [M, k]
        ids = self.vocab[best.indices]  # [M, k] target token ids
        # one device-to-host copy (one sync on a GPU) for both: ids < 2^24 are exact in float32
        both = torch.stack([lp, ids.to(lp.dtype)]).tolist()  # [2][M][k]
        for node, values, indices in zip(nodes, both[0], both[1]):
            finite = [v for v in values if v != -math.inf]  # sorted: the rest are -inf too
            tree.add_children(node, finite, [int(i) for i in indices[: len(finite)]])
