"""Checks the runner makes on the loaded pair before it generates.

``check_where_loaded``: the models are where the config asked (``device``,
``model.placement.draft_device``; a target placed by ``model.placement.device_map`` must start on
a device of ``device``'s type). It checks the loader, not the devices: whether this machine has
them was checked before loading (``placement.check_before_loading``), and where the method's nets
are is checked after building (``placement.check_built``, against what the pair recorded).
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
from omegaconf import DictConfig, OmegaConf

from specdec.core import Drafter
from specdec.errors import BadInput
from specdec.models import ModelPair
from specdec.models.devices import matches


def check_where_loaded(pair: ModelPair, device: str) -> None:
    """Raise ``ValueError`` unless the target is on ``device`` and the draft on its device.

    Args:
        pair: the loaded pair.
        device: the eval's ``device``; the draft's is ``pair.placement.draft_device``
            (``model.placement.draft_device`` when set, else the same).
    """
    wants = {"target": (pair.target, device), "draft": (pair.draft, pair.placement.draft_device)}
    for role, (model, want) in wants.items():
        if model is None:
            continue
        got = next(model.parameters()).device
        if not matches(got, torch.device(want)) and role == "target" and pair.placement.device_map:
            raise BadInput(
                f"model.placement.device_map={pair.placement.device_map} put the target's first "
                f"layers on {got} but device={want}: set device={got.type} so the records and "
                "the machine tag say where it ran"
            )
        if not matches(got, torch.device(want)):
            raise ValueError(
                f"device={want} was requested but the pair's loader put the {role} on {got}; "
                f"pair {pair.name!r} must honour `device` (see specdec/models/pair.py)"
            )


def context_limits(pair: ModelPair) -> dict[str, int]:
    """Positions each model of the pair was built for (``max_position_embeddings`` or
    ``n_positions`` of its config), by role; a model whose config declares none is left out."""
    out = {}
    for role, model in (("target", pair.target), ("draft", pair.draft)):
        config = getattr(model, "config", None)
        limit = getattr(config, "max_position_embeddings", None) or getattr(
            config, "n_positions", None
        )
        if limit:
            out[role] = int(limit)
    return out


def fit_context(
    ids: list[int], *, max_new_tokens: int, limits: dict[str, int], truncate: str | None, where: str
) -> tuple[list[int], int]:
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
        raise BadInput(
            f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the "
            f"{role} model's {limit} positions; lower max_new_tokens"
        )
    if truncate != "left":
        raise BadInput(
            f"{where} has {len(ids)} tokens: with max_new_tokens={max_new_tokens} it needs "
            f"{len(ids) + max_new_tokens} positions, but the {role} model has "
            f"max_position_embeddings={limit}. Lower max_new_tokens, lower limit to stop before "
            f"this prompt, or set truncate_prompts=left to keep its last {keep} tokens"
        )
    return ids[-keep:], len(ids) - keep


def _asset(cfg: DictConfig, node: str, key: str) -> str:
    """``<node>.<key>=<value>`` as the config gives it (``node.key`` alone when it is unset)."""
    value = OmegaConf.select(cfg, f"{node}.{key}", default=None, throw_on_resolution_failure=False)
    return f"{node}.{key}={value}" if value is not None else f"{node}.{key}"


def _command(cfg: DictConfig, node: str) -> str:
    """The training command for this pair's asset of ``node`` (its ``experiment`` key)."""
    name = OmegaConf.select(
        cfg, f"{node}.experiment", default=None, throw_on_resolution_failure=False
    )
    return f"`python -m specdec.train +experiment={name}`" if name else "its training experiment"


def check_drafter_fits(cfg: DictConfig, pair: ModelPair, drafter: Drafter) -> None:
    """The drafter's trained net, draft models and policy head fit this target and draft (run
    as soon as the drafter is built, before the engine's own vocabulary check)."""
    from specdec.nets.eagle3.feature_asset import check_target

    config = getattr(pair.target, "config", None)
    vocab = int(pair.target.get_output_embeddings().weight.shape[0])  # CachedLM's vocab_size
    meta = getattr(getattr(drafter, "net", None), "meta", None)
    if isinstance(meta, dict) and config is not None and "target_hidden" in meta:
        check_target(
            meta,
            hidden=int(config.hidden_size),
            vocab=int(vocab),
            layers=int(config.num_hidden_layers),
            where=_asset(cfg, "drafter", "path"),
            train_command=str(
                getattr(drafter, "command", "") or _command(cfg, "drafter").strip("`")
            ),
            name=getattr(drafter, "name", type(drafter).__name__),
        )
    for lm in drafter.models:
        if lm.vocab_size != vocab:
            owner = (
                _asset(cfg, "drafter", "path")
                if "path" in cfg.drafter
                else _asset(cfg, "model", "draft")
            )
            raise BadInput(
                f"{owner}: the draft model has a vocabulary of {lm.vocab_size} tokens "
                f"but the target {pair.name} has {vocab}: it was "
                f"made for another target; give one sharing the target's tokenizer, "
                f"or train one for this pair with {_command(cfg, 'drafter')}"
            )
    meta = getattr(getattr(drafter, "head", None), "meta", None)  # an H-RAD head
    if isinstance(meta, dict) and config is not None and "target_hidden_size" in meta:
        wrong = [
            f"{key} {meta[f'target_{key}']} (this target: {mine})"
            for key, mine in (
                ("hidden_size", config.hidden_size),
                ("num_layers", config.num_hidden_layers),
                ("vocab_size", vocab),
            )
            if int(meta[f"target_{key}"]) != int(mine)
        ]
        if wrong:
            from specdec.config import experiment_for

            try:
                name = experiment_for("hrad", _root_=cfg)
            except Exception:  # composed without Hydra's choices
                name = f"hrad_{pair.name}"
            raise BadInput(
                f"{_asset(cfg, 'drafter', 'hrad')}: the H-RAD head was trained for a "
                f"target with {', '.join(wrong)}; train one for this pair with "
                f"`python -m specdec.train +experiment={name} stage=data` then without "
                "stage=data, or set drafter.hrad=null"
            )
    head = getattr(getattr(drafter, "policy", None), "head", None)
    want, draft_config = getattr(head, "hidden_size", None), getattr(pair.draft, "config", None)
    if want is not None and draft_config is not None and want != draft_config.hidden_size:
        raise BadInput(
            f"{_asset(cfg, 'drafter.policy', 'head')}: the head reads hidden states "
            f"of size {want}, but this pair's draft has hidden size "
            f"{draft_config.hidden_size}: it was trained for another draft; train one "
            f"for this pair with {_command(cfg, 'drafter.policy')}"
        )


class NonFiniteTarget(BadInput, FloatingPointError):
    """The target's output is NaN or infinite before any decoding: an input error (its weights or
    its dtype), and a ``FloatingPointError`` as the engine's own check raises mid-decoding."""


@torch.inference_mode()
def check_target_output(pair: ModelPair) -> None:
    """The target's logits on one token are finite (NaN weights, or a dtype that overflows)."""
    if not isinstance(pair.target, torch.nn.Module) or not hasattr(pair.target, "config"):
        return
    token = pair.tokenizer.bos_token_id or pair.tokenizer.eos_token_id or 0
    device = next(pair.target.parameters()).device
    logits = pair.target(input_ids=torch.tensor([[int(token)]], device=device)).logits  # [1,1,V]
    if not bool(torch.isfinite(logits).all()):
        source = pair.info.get("target", pair.name) if isinstance(pair.info, dict) else pair.name
        raise NonFiniteTarget(
            f"the target model produced NaN or +inf logits on a one-token prompt, before any "
            f"decoding: the target {source} (dtype {next(pair.target.parameters()).dtype}) holds "
            "NaN/inf weights (a corrupt or diverged checkpoint: load another copy) or its dtype "
            "overflows (model.placement.dtype=float16: use bfloat16 or float32)"
        )
