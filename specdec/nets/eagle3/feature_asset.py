"""A shipped feature drafter read and checked against its target: EAGLE-3's format, which
SpecBlock's follows (``nets.specblock.store``).

``read_feature_drafter`` reads ``config.json`` (its ``eagle3`` / ``specblock`` block: target layers,
hidden size, vocabulary) and the weights, checking the block against the target
(``check_target``) and the tokenizer hash; ``load_weights`` loads the state, naming both key lists
on a mismatch. Every error names the command that retrains the drafter.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from specdec.errors import BadInput, MissingInput
from specdec.models.shipped import (
    CONFIG,
    WEIGHTS,
    has_weights,
    load_state,
    read_config,
    read_tensors,
)

META_KEYS = ("target_layers", "target_hidden", "target_vocab")  # what ``check_target`` reads


def check_target(
    meta: dict,
    *,
    hidden: int,
    vocab: int,
    layers: int,
    where: str,
    train_command: str,
    name: str = "EAGLE-3",
) -> None:
    """Raise ``ValueError`` naming both sides when a feature drafter's target shapes differ
    (``meta``: the ``eagle3`` / ``specblock`` block of its ``config.json``; ``name`` in errors)."""
    mine = {"hidden size": meta["target_hidden"], "vocabulary": meta["target_vocab"]}
    theirs = {"hidden size": hidden, "vocabulary": vocab}
    for key in mine:
        if mine[key] != theirs[key]:
            raise BadInput(
                f"{name} drafter {where} was trained for a target with {key} "
                f"{mine[key]}, but this target has {theirs[key]}; retrain it with "
                f"`{train_command}`"
            )
    bad = [i for i in meta["target_layers"] if not -layers - 1 <= i <= layers]
    if bad:
        raise BadInput(
            f"{name} drafter {where} reads target layers {bad}, but this target "
            f"has {layers} layers; retrain it with `{train_command}`"
        )


def read_feature_drafter(
    folder: Path, key: str, name: str, target, tokenizer_hash: str | None, train_command: str
) -> tuple[dict, dict, dict[str, torch.Tensor]]:
    """A shipped feature drafter's ``(config, meta, state)``: both files must exist (else the
    error names ``train_command``), ``meta`` = the config's ``key`` block, checked against
    ``target`` (``check_target``) and ``tokenizer_hash`` when given; ``name`` labels errors.
    A corrupt file or NaN/inf weight raises ``BadInput`` naming it (``shipped``)."""
    for file in (CONFIG, WEIGHTS):
        if not (folder / file).exists() and not (file == WEIGHTS and has_weights(folder)):
            raise MissingInput(
                f"{name} file {folder / file} is missing; create it with "
                f"`{train_command}` (it exports to {folder})"
            )
    fix = f"`{train_command}` (it exports to {folder})"
    raw = read_config(folder, f"{name} drafter", fix, keys=(key,))
    meta = raw.pop(key)
    lacking = [k for k in META_KEYS if k not in meta] if isinstance(meta, dict) else META_KEYS
    if lacking:
        raise BadInput(
            f"{name} drafter config {folder / CONFIG}: its {key!r} block lacks "
            f"{list(lacking)}; re-create it with {fix}"
        )
    if target is not None:
        tcfg = target.config
        check_target(
            meta,
            hidden=tcfg.hidden_size,
            vocab=tcfg.vocab_size,
            layers=tcfg.num_hidden_layers,
            where=f"in {folder}",
            train_command=train_command,
            name=name,
        )
    saved_hash = raw.get("tokenizer_sha256", "")
    if tokenizer_hash and saved_hash and saved_hash != tokenizer_hash:
        raise BadInput(
            f"{name} drafter in {folder} was trained with another tokenizer; "
            f"retrain it with `{train_command}`"
        )
    return raw, meta, read_tensors(folder / WEIGHTS, f"{name} drafter", fix)


def load_weights(
    net: nn.Module, state: dict[str, torch.Tensor], path: Path, name: str, train_command: str
) -> None:
    """``net.load_state_dict(state)``, failing with both key lists (or the shape mismatch) and
    ``train_command`` when they differ."""
    load_state(net, state, path, name, f"`{train_command}` (it exports to {path.parent})")
