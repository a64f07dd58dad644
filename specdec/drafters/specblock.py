"""SpecBlockDrafter: block drafting from target features, shaped by the rank head into a tree.

SpecBlock ("Block-Iterative Speculative Decoding with Dynamic Tree Drafting"; public code
github.com/shiweijiezero/SpecBlock). Each step:

1. the newly verified positions (the last step's root and accepted nodes, with
   ``Context.target_features``) are appended, all ``K`` slots each, to the drafter's own cache
   (``BlockLM``; append-only: only verified positions enter it). The last one is the position
   before the root, whose block (block 1) drafts: slot ``k`` proposes the token ``k + 1`` after
   the root;
2. the rank-guided tree (``rank_tree``): greedy chain, per slot ``widths[rank class] - 1`` sibling
   alternatives, a give-up class (width 0) truncating the later slots; slot 0 takes
   ``root_width`` (the code's beam width) when set;
3. with ``max_blocks: 2``, the ``beam`` best pending leaves (alternatives and the chain end that
   can still grow) are extended by block 2 in one batched forward: condition = block 1's hidden at
   the leaf's slot ``s``, input = the leaf token, keys = the cache before the position plus
   block 1's slots ``<= s`` at it (valid prefix); each leaf grows a chain with the same rule;
4. the ``total_tokens`` nodes with the best cumulative draft log-probability are kept (ancestor
   closure holds since a child never scores above its parent; ``drafters.candidates``).

This module holds only the expansion rule (steps 2-3, ``_grow``); loading, placement, the target
checks, catching up and the step are ``drafters.features``'.

The tree is a deterministic function of the context, so ``q = None`` and verification uses the
point-mass tree rules (``rrs`` or ``hsd``). Depth is capped by ``policy.limit()`` and the token
budget; stop tokens get no children. ``shape`` (a ``TreeShape``) holds the tree settings; the
serving-time bandit (``drafters.specblock_bandit``, the project's design: the public code has
none) picks one per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from specdec.core import Context
from specdec.drafters.block_lm import BlockLM
from specdec.drafters.candidates import Candidates
from specdec.drafters.features import FeatureDrafter
from specdec.drafters.limits import check_nodes, check_width
from specdec.drafters.policies import Policy
from specdec.drafters.rank_tree import Leaf, grow_block
from specdec.errors import BadInput
from specdec.models.placement import Placement
from specdec.nets.specblock.slots import RANK_CLASSES
from specdec.nets.specblock.store import load_specblock


@dataclass(frozen=True)
class TreeShape:
    """How one step's tree is shaped (the drafter's arguments of the same names, checked)."""

    widths: tuple[int, ...] = (1, 2, 3, 0)
    root_width: int | None = 3
    total_tokens: int = 8
    max_blocks: int = 1
    beam: int = 2

    def __post_init__(self) -> None:
        if len(self.widths) != RANK_CLASSES or min(self.widths) < 0:
            raise BadInput(
                f"drafter.widths needs {RANK_CLASSES} widths >= 0 (one per rank "
                f"class), got {list(self.widths)}"
            )
        if self.root_width is not None and self.root_width < 1:
            raise BadInput(f"drafter.root_width must be >= 1 or null, got {self.root_width}")
        if self.total_tokens < 1 or self.beam < 1:
            raise BadInput(
                f"drafter.total_tokens and drafter.beam must be >= 1, got "
                f"{self.total_tokens}, {self.beam}"
            )
        if self.max_blocks not in (1, 2):
            raise BadInput(
                f"drafter.max_blocks must be 1 or 2 (a third block would need block "
                f"2's keys in the valid prefix), got {self.max_blocks}"
            )
        check_nodes(
            1 + self.total_tokens,
            what=f"drafter.total_tokens={self.total_tokens}",
            fix="drafter.total_tokens",
        )

    def check_vocab(self, vocab: int) -> None:
        """Refuse a slot width above the draft vocabulary (``drafters.limits``)."""
        for width in (*self.widths, self.root_width or 0):
            check_width(
                "drafter.widths" if width in self.widths else "drafter.root_width", width, vocab
            )


class SpecBlockDrafter(FeatureDrafter):
    """Rank-guided block drafting with a trained SpecBlock network.

    Args:
        policy: ``policy.limit()`` caps the tree depth.
        path: folder of the shipped drafter (``nets.specblock.net.save_specblock``).
        widths: tokens per slot (greedy included) for rank classes 0..3; 0 = give up.
        root_width: width of block 1's slot 0 whatever its class (``None``: the table).
        total_tokens: drafted nodes kept (the target verifies ``total_tokens + 1``).
        max_blocks: 1 (block 1 only) or 2 (extend pending leaves once).
        beam: pending leaves block 2 extends at most.
        experiment: the training experiment named in errors (``specblock_<model>``).
        placement: the pair's (``specdec.models.placement``): the net goes to the target's
            device and dtype with the pair's CPU kernels (None: the CPU, the asset's dtype).

    No draft LM and no sampling: the net is its own draft, and the tree ranks raw draft
    log-probabilities (``q = None``).
    """

    name = "SpecBlock"

    def __init__(
        self,
        policy: Policy,
        path: str,
        widths: Sequence[int] = (1, 2, 3, 0),
        root_width: int | None = 3,
        total_tokens: int = 8,
        max_blocks: int = 1,
        beam: int = 2,
        experiment: str = "specblock_<model>",
        placement: Placement | None = None,
    ) -> None:
        self.shape = TreeShape(
            tuple(int(w) for w in widths), root_width, int(total_tokens), int(max_blocks), int(beam)
        )
        super().__init__(
            policy,
            lambda command: load_specblock(path, train_command=command),
            cache=lambda net: BlockLM(net, net.meta["target_vocab"]),
            experiment=experiment,
            placement=placement,
            asset=path,
        )
        self.shape.check_vocab(int(self.net.token_map.numel()))

    @property
    def total(self) -> int:
        """Candidates kept this step: the shape's (the bandit's arm may change the shape)."""
        return self.shape.total_tokens

    def reset(self) -> None:
        super().reset()
        self.block1 = None  # (logits [K, V_d], rank logits [K, 4], hidden [K, H]) before the root
        self.counts = {"block2_forwards": 0, "give_ups": 0}

    def _advance(self, tokens: list[int], features: torch.Tensor) -> None:
        """Append verified positions ``P..P+n-1`` (features ``[n, k, H]``; position ``t`` reads
        ``tokens[t + 1]``) and keep the last one's block."""
        first, n = self.lm.positions, int(features.shape[0])
        nxt = torch.tensor(tokens[first + 1 : first + 1 + n])  # [n]
        assert nxt.numel() == n, "features must cover the positions up to the root"
        with torch.inference_mode():
            out = self.lm.append(self.net.condition(features), self.view.embed(nxt))
        self.block1 = (out.logits[0, -1], out.rank_logits[0, -1], out.hidden[0, -1])

    def _verified(self) -> int:
        return self.lm.positions

    def _grow(self, tree: Candidates, ctx: Context, depth_limit: int) -> None:
        """SpecBlock's expansion rule: block 1's rank-guided tree, then (``max_blocks: 2``)
        block 2 below the best pending leaves."""
        logits, ranks, hidden, shape = *self.block1, self.shape
        leaves, gave_up = grow_block(
            tree,
            logits.float().log_softmax(-1),
            ranks.argmax(-1).tolist(),
            self.net.token_map,
            widths=shape.widths,
            root_width=shape.root_width,
            depth_limit=depth_limit,
            stop_ids=ctx.stop_ids,
        )
        self.counts["give_ups"] += int(gave_up)
        if shape.max_blocks > 1:
            self._block2(tree, leaves, hidden, depth_limit, ctx.stop_ids)

    def _block2(
        self,
        tree: Candidates,
        leaves: list[Leaf],
        hidden: torch.Tensor,
        depth_limit: int,
        stop_ids: frozenset[int],
    ) -> None:
        """Extend the best pending leaves by one batched block (valid prefix ``s + 1``)."""
        room = max(0, self.shape.total_tokens - len(tree.token)) // self.net.slots
        grow = [leaf for leaf in leaves if tree.depth[leaf.node] < depth_limit]
        grow = sorted(grow, key=lambda leaf: -tree.score[leaf.node])[: min(self.shape.beam, room)]
        if not grow:
            return
        slot = torch.tensor([leaf.slot for leaf in grow])  # [M]
        tokens = torch.tensor([tree.token[leaf.node] for leaf in grow])  # [M]
        with torch.inference_mode():
            out = self.lm.chain(
                hidden[slot], self.view.embed(tokens), self.lm.positions - 1, slot + 1
            )
        self.counts["block2_forwards"] += 1
        for j, leaf in enumerate(grow):
            _, gave_up = grow_block(
                tree,
                out.logits[0, j].float().log_softmax(-1),
                out.rank_logits[0, j].argmax(-1).tolist(),
                self.net.token_map,
                widths=self.shape.widths,
                parent=leaf.node,
                depth_limit=depth_limit,
                stop_ids=stop_ids,
            )
            self.counts["give_ups"] += int(gave_up)

    def counters(self) -> dict[str, int]:
        return dict(self.counts)
