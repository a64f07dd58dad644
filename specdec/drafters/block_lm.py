"""BlockLM: SpecBlock's draft-side cache of verified positions, and its forward log.

The SpecBlock network (``nets.specblock.net``) is not an HF decoder, so ``CachedLM`` cannot own
its cache. This class holds, per layer, the keys/values of **all K slots of every verified
position** (``[1, h_kv, positions·K, d]``), computed with the target's real features. It is
append-only: a position enters once its features are known and never changes, because a block-1
slot sees only earlier positions and its own position's lower slots (``AppendKeys``).

* ``append(cond, embeds)``: block 1 at ``n`` new positions (joins the cache);
* ``chain(cond, embeds, ...)``: a later block at ``M`` leaves below position ``p`` (reads the cache,
  adds nothing): block 1's keys at positions ``< p`` and, at ``p``, its slots below each leaf's cut.

Every forward is logged as a ``ForwardRecord`` whose ``new_tokens`` counts *positions* (``n`` or
``M``; each is ``K`` slot rows) and whose ``context`` is the cached positions. ``forward``,
``keep``, ``crop`` and ``reset`` give the ``core.LM`` subset the cost calibration uses
(``bench.calibration``): ``forward`` appends positions with zero target features.
"""

from __future__ import annotations

import time

import torch

from specdec.core import LMOut
from specdec.forwards import ForwardRecord, current_lane, nonfinite_error
from specdec.nets.specblock.net import BlockOut, SpecBlockNet
from specdec.nets.specblock.slots import AppendKeys, ChainKeys
from specdec.threads import forward_budget


class BlockLM:
    """The SpecBlock network with its append-only cache of verified positions.

    Args:
        net: the drafter network (on the target's device and dtype).
        vocab_size: the target's vocabulary (the drafts' token ids live there).
    """

    role = "draft"
    takes_ids = False  # the calibration feeds ``inputs_embeds``

    def __init__(self, net: SpecBlockNet, vocab_size: int) -> None:
        self.net = net
        self.vocab_size = int(vocab_size)
        self.num_layers = len(net.layers)
        self.hidden_size = int(net.config.hidden_size)
        self.forward_log: list[ForwardRecord] = []
        self.reset()

    @property
    def dtype(self) -> torch.dtype:
        return self.net.head.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.net.head.weight.device

    @property
    def ids(self) -> list[int]:
        return []  # positions, not token ids, are cached

    def reset(self) -> None:
        self.cache: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self.positions = 0

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions."""
        assert 0 <= length <= self.positions, (length, self.positions)
        if self.cache is not None:
            n = length * self.net.slots
            self.cache = [(k[:, :, :n], v[:, :, :n]) for k, v in self.cache]
        self.positions = length

    def keep(self, nodes: list[int]) -> None:
        """Nothing to resolve: appended positions are committed at once."""

    @torch.inference_mode()
    def append(self, cond: torch.Tensor, embeds: torch.Tensor) -> BlockOut:
        """Block 1 at ``n`` new positions: ``cond [n, H]`` (``net.condition(f)``), ``embeds
        [n, H]`` (the tokens they read). Returns the block with a batch axis of 1."""
        n = int(cond.shape[0])
        first = torch.arange(self.positions + 1, self.positions + 1 + n, device=cond.device)
        keys = AppendKeys(self.cache, n, self.net.slots, first=self.positions)
        out = self._timed(n, lambda: self.net.block(cond[None], embeds[None], first[None], keys))
        new = [(k.flatten(2, 3), v.flatten(2, 3)) for k, v in out.kv]  # [1, h_kv, n*K, d]
        self.cache = new if self.cache is None else [
            (torch.cat([ck, k], 2), torch.cat([cv, v], 2))
            for (ck, cv), (k, v) in zip(self.cache, new)]
        self.positions += n
        return out

    @torch.inference_mode()
    def chain(self, cond: torch.Tensor, embeds: torch.Tensor, position: int,
              cut: torch.Tensor) -> BlockOut:
        """A later block at ``M`` leaves of cached position ``position``.

        Args:
            cond: ``[M, H]`` the parent block's hidden at each leaf's source slot ``s``.
            embeds: ``[M, H]`` embeddings of the leaf tokens.
            position: the cached position whose block 1 the leaves continue.
            cut: ``[M]`` ``s + 1`` per leaf: visible block-1 slots at ``position``, and the offset.
        """
        m, k = int(cond.shape[0]), self.net.slots
        assert self.cache is not None and position < self.positions
        cross = [(ck[:, :, : position * k], cv[:, :, : position * k]) for ck, cv in self.cache]
        at = slice(position * k, (position + 1) * k)
        prefix = [(ck[:, :, at][:, :, None].expand(-1, -1, m, -1, -1),
                   cv[:, :, at][:, :, None].expand(-1, -1, m, -1, -1))
                  for ck, cv in self.cache]  # [1, h_kv, M, K, d]
        seen = torch.ones(1, position * k, dtype=torch.bool)
        keys = ChainKeys(cross, seen, prefix, cut.cpu()[:, None], k)
        first = (position + 1 + cut).to(cond.device)  # [M]
        return self._timed(m, lambda: self.net.block(cond[None], embeds[None], first[None], keys))

    def forward(self, tokens: torch.Tensor, parent: torch.Tensor | None = None, *,
                hidden_layers=(), inputs_embeds: torch.Tensor | None = None) -> LMOut:
        """``core.LM`` shape for the cost calibration: append ``len(tokens)`` positions reading
        ``inputs_embeds [n, H]`` with zero target features (same cost as real ones)."""
        n = int(tokens.numel())
        embeds = inputs_embeds if inputs_embeds is not None else torch.zeros(
            n, self.hidden_size, dtype=self.dtype)
        embeds = embeds.to(device=self.device, dtype=self.dtype)
        out = self.append(torch.zeros_like(embeds), embeds)
        return LMOut(logits=out.logits[0, :, 0])

    def _timed(self, n: int, run) -> BlockOut:
        start = time.perf_counter()
        with forward_budget(None):  # the loop itself runs on one thread (threads.py)
            out = run()  # the first read of the fresh logits is part of the forward (CachedLM)
            bad = nonfinite_error(out.logits.flatten(0, 2), role=self.role, context=self.positions)
        end = time.perf_counter()
        where, step = current_lane()
        self.forward_log.append(ForwardRecord(self.role, n, self.positions, end - start, start,
                                              end, where, step))
        if bad is not None:
            raise bad
        return out
