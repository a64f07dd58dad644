"""Eagle3Drafter: a feature drafter growing a dynamic token tree (EAGLE-3 net, EAGLE-2 tree).

EAGLE-3 (Li et al. 2025) drafts from the target's own hidden states: a draft position reads the
fused features of the target's ``target_layers`` at a verified position (or, below it, the draft's
own output at the parent node) and the embedding of the next token (``learners.eagle3.net``).
The tree is EAGLE-2's (Li et al. 2024, "EAGLE-2: Faster Inference of Language Models with
Dynamic Draft Trees"): every candidate carries its cumulative draft log-probability ``c``; per
depth the ``topk`` best candidates of that depth are expanded (one draft forward of those nodes),
each adding its ``topk`` best tokens as candidates; finally the ``total_tokens`` best candidates
over all depths are kept. A child's ``c`` never exceeds its parent's, so ranking by ``(−c,
depth)`` keeps every kept node's ancestors. The tree is a deterministic function of the context,
so ``q = None`` and verification uses the point-mass tree rules (``rrs`` or ``hsd``).

The net is ours (``learners.eagle3.net.Eagle3Net``) or a released head's published architecture
(``learners.eagle3.published.PublishedEagle3Net``), driven through the same interface:
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

from specdec.core import LM, Context, Draft, TargetView, Verdict
from specdec.drafters.features import FeatureDrafter
from specdec.drafters.limits import check_nodes, check_width
from specdec.drafters.policies import Policy
from specdec.errors import BadInput
from specdec.learners.eagle3.net import Eagle3Net, check_target, load_eagle3
from specdec.learners.eagle3.published import PublishedEagle3Net
from specdec.lm import CachedLM
from specdec.placement import Placement
from specdec.sampling import Sampling

TRAIN_COMMAND = "python -m specdec.train +experiment=eagle3_<model>"


class Eagle3Drafter(FeatureDrafter):
    """Dynamic-tree drafting with a trained EAGLE-3 network.

    Args:
        lm: unused (the drafter brings its own network); accepted like every drafter's.
        policy: ``policy.limit()`` caps the tree depth.
        sampling: unused (the tree ranks raw draft log-probabilities; ``q = None``).
        path: folder of the shipped drafter (``learners.eagle3.net.save_eagle3``), or of a head
            in a published layout, or a hub id cached offline (``learners.eagle3.interop``).
        topk: children per expanded node and nodes expanded per depth.
        total_tokens: drafted nodes kept (the target verifies ``total_tokens + 1``).
        experiment: the training experiment named in errors (``eagle3_<model>``).
        target_layers: the target layers of a published head that pins none (else unused).
        placement: the pair's (``specdec.placement``): the net goes to the target's device and
            dtype with the pair's CPU kernels (None: the CPU, the asset's dtype).
    """

    makes_trees = True

    def __init__(self, lm: LM | None, policy: Policy, sampling: Sampling, path: str,
                 topk: int = 2, total_tokens: int = 4, experiment: str = "eagle3_<model>",
                 target_layers: list[int] | None = None,
                 placement: Placement | None = None) -> None:
        if topk < 1 or total_tokens < 1:
            raise BadInput(f"drafter.topk and drafter.total_tokens must be >= 1, got {topk}, "
                             f"{total_tokens}")
        self.command = f"python -m specdec.train +experiment={experiment}"
        self.net: Eagle3Net | PublishedEagle3Net = self.place(load_eagle3(
            path, train_command=self.command, target_layers=target_layers), placement)
        check_width("drafter.topk", int(topk), int(self.net.decoder.token_map.numel()))
        depth = policy.longest()  # topk expanded nodes per depth; topk² candidates each
        check_nodes(max(1 + int(topk) * depth, int(topk) ** 2, 1 + int(total_tokens)),
                    what=f"drafter.topk={topk} (depth {depth}), drafter.total_tokens="
                    f"{total_tokens}", fix="drafter.topk or drafter.total_tokens")
        self.policy, self.topk, self.total = policy, int(topk), int(total_tokens)
        self.target_layers = tuple(self.net.target_layers)
        self.lm = CachedLM(self.net.decoder, role="draft", vocab_size=self.net.meta["target_vocab"])
        self.vocab = self.net.decoder.token_map  # [V_d]
        self.models = [self.lm]
        self.view: TargetView | None = None
        self.reset()

    def reset(self) -> None:
        self.lm.reset()
        self.policy.reset()
        self.real, self.root_out = 0, None  # verified positions cached; (logits [V], hidden [H])

    def attach(self, target: TargetView) -> None:
        if self.view is None:
            check_target(self.net.meta, hidden=target.hidden_size, vocab=target.vocab_size,
                         layers=target.num_layers, where="(drafter.path)",
                         train_command=self.command)
            self.check_view(target)
        self.view = target

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

    # --- the tree -----------------------------------------------------------------------------
    def propose(self, ctx: Context) -> Draft:
        ids = self.catch_up(ctx)
        depth_limit = min(self.policy.limit(), ctx.budget - 1)
        if self.root_out is None or depth_limit < 1:
            return Draft.empty(ctx.root)  # a one-token prompt: nothing verified to draft from
        assert self.real == len(ids) - 1, (self.real, len(ids))
        # candidates: token, parent candidate (-1 = root), cumulative log-prob, depth
        tok, par, score, depth = [], [], [], []
        hidden: dict[int, torch.Tensor] = {-1: self.root_out[1]}
        slot: dict[int, int] = {}  # expanded candidate -> pending index in the draft cache
        vocab = self.vocab  # [V_d] the draft's target token ids (its logits' finite columns)

        def add_children(nodes: list[int], logits: torch.Tensor, d: int) -> None:
            # each node's topk children by cumulative log-prob: one topk and one logsumexp over
            # the level's rows (log_softmax is x - logsumexp(x), monotone in x), read on the
            # draft vocabulary's columns only (the rest are -inf: never candidates, no mass)
            small = logits.index_select(-1, vocab).float()  # [M, V_d]
            best = torch.topk(small, min(self.topk, small.shape[-1]), dim=-1)  # [M, k]
            lp = best.values - torch.logsumexp(small, -1, keepdim=True)  # [M, k]
            ids = vocab[best.indices]  # [M, k] target token ids
            for node, values, indices in zip(nodes, lp.tolist(), ids.tolist()):
                base = 0.0 if node < 0 else score[node]
                for value, index in zip(values, indices):
                    if value == -math.inf:
                        break  # sorted: the rest are -inf too
                    tok.append(index), par.append(node), score.append(base + value)
                    depth.append(d)

        add_children([-1], self.root_out[0][None], 1)
        for d in range(1, depth_limit):
            # 1. Expand the topk best candidates of depth d (stop ids get no children).
            level = [i for i in range(len(tok)) if depth[i] == d and tok[i] not in ctx.stop_ids]
            level = sorted(level, key=lambda i: -score[i])[: self.topk]
            if not level:
                break
            # 2. One draft forward of those nodes: parent output as condition, own token.
            toks = torch.tensor([tok[i] for i in level])  # [M]
            cond = torch.stack([hidden[par[i]] for i in level])  # [M, H]
            parents = torch.tensor([slot.get(par[i], -1) for i in level])  # [M]
            grow = self.lm.forward if not slot else self.lm.extend
            out = grow(toks, parents, hidden_layers=(-1,),
                       inputs_embeds=lambda t=toks, c=cond: self.net.inputs(self.view.embed(t), c))
            for j, i in enumerate(level):
                slot[i] = len(slot)
                hidden[i] = out.hidden[j, 0]
            add_children(level, out.logits, d + 1)
        if slot:
            self.lm.keep([])
        # 3. Keep the total_tokens best candidates (ancestors rank first), in depth order.
        kept = sorted(range(len(tok)), key=lambda i: (-score[i], depth[i]))[: self.total]
        kept.sort(key=lambda i: (depth[i], i))
        node = {c: n + 1 for n, c in enumerate(kept)}  # candidate -> draft node (root = 0)
        tokens = torch.tensor([ctx.root] + [tok[c] for c in kept])  # [N]
        parent = torch.tensor([-1] + [node.get(par[c], 0) for c in kept])  # [N]
        return Draft(tokens, parent, None)

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        self.policy.observe(draft.num_drafted, verdict.num_accepted)
