"""The learners' optimiser: AdamW with linear warm-up then cosine decay to 10 % of the rate."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


def adamw_warmup_cosine(
    params: Iterable[torch.nn.Parameter],
    *,
    lr: float,
    weight_decay: float,
    warmup_steps: int,
    total_steps: int,
) -> dict:
    """A Lightning ``configure_optimizers`` result stepping the schedule every optimiser step.

    The factor is ``(step + 1) / warmup`` during warm-up, then ``0.1 + 0.9 · ½(1 + cos(π f))``
    with ``f`` the fraction of the remaining ``total_steps - warmup_steps`` done (1 after it).
    """
    opt = torch.optim.AdamW(list(params), lr=lr, weight_decay=weight_decay)
    warm, total = int(warmup_steps), int(total_steps)

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        frac = min(1.0, (step - warm) / max(1, total - warm))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
