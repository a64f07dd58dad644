"""Checks the runner makes on the loaded pair before it generates.

``check_where_loaded``: the models are where the config asked (``device``, ``model.draft_device``;
a target placed by ``model.device_map`` must start on a device of ``device``'s type).
A loader that ignored ``device`` would otherwise run on the CPU while the records, the config hash
and the run folder say ``cuda``; the machine tag records the devices the models are actually on
(``ModelPair.devices()``).

``fit_context``: before each turn, prompt tokens + ``max_new_tokens`` must fit in the positions of
the target and of the draft (``max_position_embeddings``). Past them a RoPE model degrades without
a word and a learned-position model fails with an index error deep in a forward; the check fails
naming the prompt, the lengths and the remedies, or, with ``truncate_prompts=left``, keeps the
prompt's last tokens (the record counts the dropped ones in ``truncated_tokens``).
"""

from __future__ import annotations

import torch

from specdec.errors import BadInput
from specdec.models import ModelPair
from specdec.models.placement import matches


def check_where_loaded(pair: ModelPair, device: str) -> None:
    """Raise ``ValueError`` unless the target is on ``device`` and the draft on its device.

    Args:
        pair: the loaded pair.
        device: the eval's ``device``; the draft's is ``pair.placement.draft_device``
            (``model.draft_device`` when set, else the same).
    """
    wants = {"target": (pair.target, device), "draft": (pair.draft, pair.placement.draft_device)}
    for role, (model, want) in wants.items():
        if model is None:
            continue
        got = next(model.parameters()).device
        if not matches(got, torch.device(want)) and role == "target" and pair.placement.device_map:
            raise BadInput(
                f"model.device_map={pair.placement.device_map} put the target's first layers on "
                f"{got} but device={want}: set device={got.type} so the records and the machine "
                "tag say where it ran")
        if not matches(got, torch.device(want)):
            raise ValueError(
                f"device={want} was requested but the pair's loader put the {role} on {got}; "
                f"pair {pair.name!r} must honour `device` (see specdec/models/pair.py)")


def context_limits(pair: ModelPair) -> dict[str, int]:
    """Positions each model of the pair was built for (``max_position_embeddings`` or
    ``n_positions`` of its config), by role; a model whose config declares none is left out."""
    out = {}
    for role, model in (("target", pair.target), ("draft", pair.draft)):
        config = getattr(model, "config", None)
        limit = getattr(config, "max_position_embeddings", None) or getattr(
            config, "n_positions", None)
        if limit:
            out[role] = int(limit)
    return out


def fit_context(ids: list[int], *, max_new_tokens: int, limits: dict[str, int],
                truncate: str | None, where: str) -> tuple[list[int], int]:
    """The prompt ids to generate after, within every model's positions.

    Args:
        ids: the prompt's token ids (the conversation so far).
        max_new_tokens: tokens the turn may add.
        limits: positions per model role (``context_limits``).
        truncate: ``None`` (too long raises) or ``left`` (keep the last tokens that fit).
        where: names the prompt in the error.

    Returns:
        The ids (the last ones that fit when truncated) and how many were dropped.

    Raises:
        ValueError: naming the prompt, the lengths and the remedies when the prompt does not fit
            and ``truncate`` is not ``left``, or when ``max_new_tokens`` alone leaves no room.
    """
    if not limits:
        return ids, 0
    role, limit = min(limits.items(), key=lambda item: item[1])
    if len(ids) + max_new_tokens <= limit:
        return ids, 0
    keep = limit - max_new_tokens
    if keep < 1:
        raise BadInput(f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the "
                         f"{role} model's {limit} positions; lower max_new_tokens")
    if truncate != "left":
        raise BadInput(
            f"{where} has {len(ids)} tokens: with max_new_tokens={max_new_tokens} it needs "
            f"{len(ids) + max_new_tokens} positions, but the {role} model has "
            f"max_position_embeddings={limit}. Lower max_new_tokens, lower limit to stop before "
            f"this prompt, or set truncate_prompts=left to keep its last {keep} tokens")
    return ids[-keep:], len(ids) - keep
