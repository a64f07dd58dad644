"""SpecBlock's training losses (as its public code, github.com/shiweijiezero/SpecBlock; the learner
is ``module.py``).

Losses, per block and slot ``k``:

* draft: cross-entropy to the target's distribution over its stored top-k restricted to the draft
  vocabulary and renormalised (the code's softmax over the draft vocabulary, seen through the
  top-k), averaged over the **chain mask** (slot ``k`` counts only where the draft argmax equals
  the target argmax at slots ``0..k-1`` of that block, and the target argmax is in the draft
  vocabulary), weighted ``slot_weight^k``;
* rank (from ``rank_start_step``; before it one block only, as the code): soft ordinal targets
  ``s_c ∝ 1/(1 + |c-t| + max(t-c, 0))²``, times the distance weight ``1 + |t-ĉ| + max(t-ĉ, 0)``
  (``ĉ`` = predicted class) and the class-frequency weight ``min(1, rank_budget / count_c)``
  (counts per block and slot in the batch), under the code's *rank chain* mask (slot ``k`` counts
  where the rank predictions at slots ``< k`` were all correct); normalised by the summed weights.

Per-slot unlock warm-up (the code's ``--unlock-warmup-steps U``, off by default there and here):
slot ``k``'s draft loss is scaled by ``α_k = min(1, step / (U (k+1)))``, so later slots join
gradually (with a warm start, ``warm.py``, they would otherwise pull the shared layers off slot
0's trained solution).
"""

from __future__ import annotations

import torch

from specdec.nets.specblock.slots import RANK_CLASSES


def slot_labels(
    lab_ids: torch.Tensor, lab_logp: torch.Tensor, t2d: torch.Tensor, offset: int, slots: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Targets of a block at ``offset``: ``top [B, S, K, k]`` (draft-vocabulary ids, ``-1`` =
    none), ``p [B, S, K, k]`` (renormalised over the mapped ids), ``has [B, S, K]`` (a label
    exists and the target argmax is in the draft vocabulary)."""
    t = lab_ids.shape[1]
    s = t - 1
    idx = (
        torch.arange(s, device=lab_ids.device)[:, None]
        + offset
        + 2
        + torch.arange(slots, device=lab_ids.device)
    )  # [S, K]: x_{i+o+k+2}
    inside = idx < t
    ids = lab_ids[:, idx.clamp(max=t - 1)]  # [B, S, K, k]
    ids = torch.where(inside[None, :, :, None], ids, -1)
    top = torch.where(ids >= 0, t2d[ids.clamp(min=0)], -1)  # [B, S, K, k]
    p = lab_logp[:, idx.clamp(max=t - 1)].exp() * (top >= 0)
    p = p / p.sum(-1, keepdim=True).clamp(min=1e-12)
    return top, p, top[..., 0] >= 0


def unlock(step: int, unlock_steps: int, slots: int) -> torch.Tensor:
    """``[K]`` per-slot loss scale ``α_k = min(1, step / (U (k+1)))`` (ones when ``U = 0``)."""
    if unlock_steps <= 0:
        return torch.ones(slots)
    return (step / (unlock_steps * torch.arange(1, slots + 1))).clamp(max=1.0)


def prefix_correct(correct: torch.Tensor) -> torch.Tensor:
    """``[..., K]`` bool: every slot ``< k`` is correct (slot 0: always)."""
    ones = torch.ones_like(correct[..., :1])
    return torch.cat([ones, correct[..., :-1].long().cumprod(-1).bool()], -1)


def rank_loss(
    rank_logits: torch.Tensor, classes: torch.Tensor, mask: torch.Tensor, budget: float
) -> torch.Tensor:
    """Ordinal-smoothed, distance- and frequency-weighted rank CE, summed over slots (module doc).

    Args:
        rank_logits: ``[B, S, K, C]``; classes: ``[B, S, K]`` true classes; mask: ``[B, S, K]``.
        budget: the class-frequency budget per slot (weight ``min(1, budget / count_c)``).
    """
    c = torch.arange(RANK_CLASSES, device=classes.device)
    t = classes[..., None]  # [B, S, K, 1]
    soft = 1.0 / (1 + (c - t).abs() + (t - c).clamp(min=0)).float() ** 2  # [B, S, K, C]
    soft = soft / soft.sum(-1, keepdim=True)
    ce = -(soft * rank_logits.float().log_softmax(-1)).sum(-1)  # [B, S, K]
    pred = rank_logits.argmax(-1)
    dist = 1 + (classes - pred).abs() + (classes - pred).clamp(min=0)  # [B, S, K]
    onehot = torch.nn.functional.one_hot(classes, RANK_CLASSES) * mask[..., None]  # [B,S,K,C]
    counts = onehot.sum((0, 1))  # [K, C]
    freq = (budget / counts.clamp(min=1).float()).clamp(max=1.0)  # [K, C]
    w = dist.float() * freq[torch.arange(classes.shape[-1]), classes] * mask  # [B, S, K]
    per_slot = (w * ce).sum((0, 1)) / w.sum((0, 1)).clamp(min=1e-12)  # [K]
    return per_slot.sum()
