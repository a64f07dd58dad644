"""Checks the runner makes on the loaded pair before generating anything.

``check_placement``: the models are where the config asked (``device``, ``model.draft_device``).
A loader that ignored ``device`` would otherwise run on the CPU while the records, the config hash
and the run folder say ``cuda``; the machine tag records the devices the models are actually on
(``ModelPair.devices()``).
"""

from __future__ import annotations

import torch

from specdec.models import ModelPair


def _matches(got: torch.device, want: torch.device) -> bool:
    return got.type == want.type and (want.index is None or got.index == want.index)


def check_placement(pair: ModelPair, device: str) -> None:
    """Raise ``ValueError`` unless the target is on ``device`` and the draft on its device.

    Args:
        pair: the loaded pair.
        device: the eval's ``device``; the draft's is ``model.draft_device`` when set (recorded
            in ``pair.info``), else the same.
    """
    wants = {"target": (pair.target, device),
             "draft": (pair.draft, pair.info.get("draft_device", device))}
    for role, (model, want) in wants.items():
        if model is None:
            continue
        got = next(model.parameters()).device
        if not _matches(got, torch.device(want)):
            raise ValueError(
                f"device={want} was requested but the pair's loader put the {role} on {got}; "
                f"pair {pair.name!r} must honour `device` (see specdec/models/pair.py)")
