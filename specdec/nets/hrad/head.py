"""The H-RAD classifier (SpecBranch's hybrid rollback-aware draft structure) and its save/load.

SpecBranch (Shen et al., ICLR 2026, §"H-RAD"): a small MLP reads ``z_t`` (``features.py``)
and returns ``s_t = argmax softmax(MLP(z_t)) ∈ {0, 1, 2}``: class 0 "all-reject" (0 draft tokens
accepted; draft one token), class 1 "uncertain" (1..γ_max−1 accepted; fall back to the draft's
confidence), class 2 "all-accept" (γ_max accepted; draft the full γ_max = 7). The public code's
MLP is ``in → 256 → 64 → 3`` with ReLU and dropout 0.2; so is this one (``hidden`` sets the
widths). Project addition: the input is standardised per feature with the training split's mean
and standard deviation (buffers saved with the weights), because the raw residual-stream layers
and the final-normed one differ in scale by orders of magnitude.

Export format (read without Lightning): ``model.safetensors`` + ``config.json`` (``kind``,
``in_features``, ``hidden``, ``dropout`` and the target it reads: ``target_hidden_size``,
``target_num_layers``, ``target_vocab_size``, ``layers`` K, ``gamma_max``, plus free-form metadata
such as the experiment and the labels' sampling). ``load_hrad`` checks the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from specdec.errors import BadInput, MissingInput
from specdec.models.shipped import (
    CONFIG,
    WEIGHTS,
    load_state,
    read_config,
    read_tensors,
    write_asset,
)

HEAD_KIND = "hrad_head"
CLASSES = ("all_reject", "uncertain", "all_accept")


def train_command(experiment: str) -> str:
    return (
        f"`python -m specdec.train +experiment={experiment} stage=data` then "
        f"`python -m specdec.train +experiment={experiment}`"
    )


class HradHead(nn.Module):
    """Standardise, then ``Linear → ReLU → Dropout`` per hidden width, then ``Linear → 3``.

    Args:
        in_features: D = (K + 1)·H, the width of ``hrad_features``.
        hidden: widths of the hidden layers (the public code: 256, 64).
        dropout: dropout after each hidden layer (training only).
    """

    def __init__(
        self, in_features: int, hidden: Sequence[int] = (256, 64), dropout: float = 0.2
    ) -> None:
        super().__init__()
        if in_features < 1 or any(int(w) < 1 for w in hidden) or not 0 <= dropout < 1:
            raise ValueError(
                f"need in_features >= 1, hidden widths >= 1 and 0 <= dropout < 1, "
                f"got {in_features}, {list(hidden)}, {dropout}"
            )
        self.in_features, self.hidden, self.dropout = (
            int(in_features),
            [int(w) for w in hidden],
            float(dropout),
        )
        self.meta: dict = {}  # the export's config.json (``load_hrad``)
        self.register_buffer("mean", torch.zeros(in_features))  # [D]
        self.register_buffer("std", torch.ones(in_features))  # [D]
        layers: list[nn.Module] = []
        width = self.in_features
        for w in self.hidden:
            layers += [nn.Linear(width, w), nn.ReLU(), nn.Dropout(self.dropout)]
            width = w
        layers.append(nn.Linear(width, len(CLASSES)))
        self.mlp = nn.Sequential(*layers)

    def set_standardisation(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Input statistics ``mean, std [D]`` (of the training split); std is floored at 1e-6."""
        self.mean.copy_(mean.float())
        self.std.copy_(std.float().clamp_min(1e-6))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """``features [..., D]`` → ``logits [..., 3]``."""
        if features.shape[-1] != self.in_features:
            raise ValueError(
                f"H-RAD features have width {features.shape[-1]} but this head reads "
                f"{self.in_features} = (K + 1) * H (K={self.meta.get('layers', '?')} target layers "
                f"+ the embedding, H={self.meta.get('target_hidden_size', '?')}); build them with "
                "nets.hrad.features.hrad_features on the target the head was trained for"
            )
        x = (features.to(self.mean.dtype) - self.mean) / self.std  # [..., D]
        return self.mlp(x)

    @torch.no_grad()
    def predict(self, features: torch.Tensor) -> torch.Tensor:
        """``features [..., D]`` (from ``hrad_features``) → class probabilities ``[..., 3]``
        (0 all-reject, 1 uncertain, 2 all-accept), in eval mode (no dropout)."""
        was_training = self.training
        self.eval()
        try:
            return self.forward(features.to(self.mean.device)).softmax(-1)
        finally:
            self.train(was_training)

    def config(self) -> dict:
        return {
            "kind": HEAD_KIND,
            "in_features": self.in_features,
            "hidden": self.hidden,
            "dropout": self.dropout,
            "classes": list(CLASSES),
        }


def save_hrad(head: HradHead, path: str | Path, **meta: object) -> Path:
    """Write ``path/model.safetensors`` + ``path/config.json`` (``meta`` merged in) atomically:
    a failed or killed export leaves the folder as it was (``shipped.replace_folder``)."""
    state = {k: v.detach().cpu().contiguous().clone() for k, v in head.state_dict().items()}
    return write_asset(path, state, {**meta, **head.config()})


def check_target(cfg: dict, target: object, *, where: str, experiment: str) -> None:
    """Raise ``BadInput`` when ``target`` (anything with ``hidden_size``, ``num_layers``,
    ``vocab_size``, e.g. a ``TargetView``) is not the target the head at ``where`` was made for."""
    lacking = [
        f"target_{key}"
        for key in ("hidden_size", "num_layers", "vocab_size")
        if f"target_{key}" not in cfg
    ]
    if lacking:
        raise BadInput(
            f"the H-RAD head at {where} does not name the target it was trained on "
            f"(its config.json lacks {lacking}); re-create it with "
            f"{train_command(experiment)}"
        )
    wrong = [
        f"{key} {getattr(target, key)} (the head's target has {cfg[f'target_{key}']})"
        for key in ("hidden_size", "num_layers", "vocab_size")
        if int(getattr(target, key)) != int(cfg[f"target_{key}"])
    ]
    if wrong:
        raise BadInput(
            f"the H-RAD head at {where} was trained on another target: this target "
            f"has {', '.join(wrong)}; train one for it with "
            f"{train_command(experiment)} or point to its head"
        )


def load_hrad(
    path: str | Path, *, target: object | None = None, experiment: str = "hrad_<model>"
) -> HradHead:
    """Load a head written by ``save_hrad`` (no Lightning import), in eval mode.

    Args:
        path: the export folder (``specdec/assets/hrad/<model>/``).
        target: when given, its ``hidden_size``, ``num_layers`` and ``vocab_size`` must match the
            head's (``check_target``).
        experiment: named in the errors, with the commands that train the head.

    Raises:
        FileNotFoundError: no head at ``path``; names the commands that train one.
        ValueError: (``BadInput``) the folder holds something else, a corrupt file or a NaN/inf
            weight (naming the file and the commands), or the head is for another target.
    """
    path = Path(path)
    fix = train_command(experiment)
    if not (path / CONFIG).exists() or not (path / WEIGHTS).exists():
        raise MissingInput(
            f"no H-RAD head at {path} (expected config.json + "
            f"model.safetensors); train and export it with {fix}"
        )
    cfg = read_config(path, "H-RAD head", fix, keys=("kind",))
    if cfg["kind"] != HEAD_KIND:
        raise BadInput(
            f"{path} holds a {cfg['kind']!r}, not an {HEAD_KIND}; point to an H-RAD "
            f"head folder or re-create it with {fix}"
        )
    if target is not None:
        check_target(cfg, target, where=str(path), experiment=cfg.get("experiment", experiment))
    try:
        head = HradHead(cfg["in_features"], cfg["hidden"], cfg["dropout"])
    except (KeyError, TypeError, ValueError) as err:
        raise BadInput(
            f"H-RAD head config {path / CONFIG} is corrupt ({type(err).__name__}: "
            f"{err}); re-create it with {fix}"
        ) from err
    load_state(
        head, read_tensors(path / WEIGHTS, "H-RAD head", fix), path / WEIGHTS, "H-RAD head", fix
    )
    head.meta = cfg
    return head.eval()
