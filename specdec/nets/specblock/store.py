"""SpecBlock's shipped format: ``config.json`` + ``model.safetensors``.

``config.json`` is the decoder's Llama config plus ``specblock``: target layers, hidden size and
vocabulary, draft vocabulary, slots, rank width, and which weights the file stores as int8
(``int8``: per-row absmax scales in ``<name>.int8_scale`` beside them). The target's input
embedding is shared and never part of it. ``load_specblock`` checks the drafter against a target
(``check_target``) and its tokenizer hash, naming both sides and the command that retrains it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import LlamaConfig

from specdec.errors import BadInput
from specdec.models.shipped import WEIGHTS, write_asset
from specdec.nets.eagle3.feature_asset import load_weights, read_feature_drafter
from specdec.nets.specblock.net import SpecBlockNet

TRAIN_COMMAND = "python -m specdec.train +experiment=specblock_<model>"

INT8_SCALE = ".int8_scale"  # suffix of the per-row scale of a tensor stored as int8


def save_specblock(
    net: SpecBlockNet,
    folder: str | Path,
    *,
    dtype: torch.dtype = torch.float32,
    int8: Sequence[str] = (),
    max_shard_mib: float | None = None,
) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (the shared embedding is never part of it).

    ``int8`` names 2-D weights stored as int8 with a per-row absmax scale (``dtype``), e.g.
    ``["head.weight"]``: the reduced-vocabulary head is a third of the file; its rows keep their
    argmax order up to a rounding step of ``max|row| / 127``. ``load_specblock`` restores them.
    ``max_shard_mib``: shards of at most that size when larger (``models/shards.py``).
    The write is atomic: a failed or killed export leaves the folder as it was.
    """
    raw = net.state_dict()
    state = {
        k: (v.detach().to(dtype) if v.is_floating_point() else v.detach()).contiguous().cpu()
        for k, v in raw.items()
    }
    for name in int8:
        if name not in state or state[name].dim() != 2:
            raise BadInput(f"int8 storage takes 2-D weights of the network; {name!r} is not one")
        w = raw[name].detach().float().cpu()  # [rows, cols], before the cast to ``dtype``
        scale = w.abs().amax(1, keepdim=True).clamp(min=1e-12) / 127  # [rows, 1]
        state[name] = (w / scale).round().clamp(-127, 127).to(torch.int8).contiguous()
        state[name + INT8_SCALE] = scale.to(dtype).contiguous()
    cfg = net.config.to_dict()
    cfg["specblock"] = {**net.meta, "int8": list(int8)}
    return write_asset(folder, state, cfg, max_shard_mib=max_shard_mib)


def _dequantize(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Tensors stored as int8 (a ``<name>.int8_scale`` beside them) back to floats."""
    for key in [k for k in state if k.endswith(INT8_SCALE)]:
        scale = state.pop(key)
        name = key[: -len(INT8_SCALE)]
        if name in state:  # else ``load_weights`` names it missing
            state[name] = (state[name].float() * scale.float()).to(scale.dtype)
    return state


def load_specblock(
    folder: str | Path,
    target=None,
    *,
    tokenizer_hash: str | None = None,
    train_command: str = TRAIN_COMMAND,
) -> SpecBlockNet:
    """Load a shipped SpecBlock drafter; with ``target`` (an HF model), check it and cast to its
    dtype (``check_target`` does the check for a ``TargetView`` at decoding time).

    Raises:
        FileNotFoundError: a missing file (names it and ``train_command``).
        ValueError: a drafter made for another target or tokenizer, naming both sides.
    """
    folder = Path(folder)
    raw, meta, state = read_feature_drafter(
        folder, "specblock", "SpecBlock", target, tokenizer_hash, train_command
    )
    meta.pop("int8", None)  # how the file stores tensors, not what the network is
    net = SpecBlockNet(
        LlamaConfig.from_dict(raw), meta["target_layers"], meta["slots"], meta["rank_hidden"]
    )
    net.meta = meta
    load_weights(net, _dequantize(state), folder / WEIGHTS, "SpecBlock", train_command)
    if target is not None:
        net = net.to(dtype=target.dtype)
    return net.eval()
