"""Plain ``nn.Module`` heads of the auxiliary learners and their Lightning-free save/load.

``AcceptanceHead`` is SpecDec++'s acceptance prediction head (Huang, Guo & Wang, arXiv:2405.19715,
§4.3; public code github.com/Kaffaljidhmah2/SpecDec_pp): D residual blocks ``x ← x + SiLU(W_d x +
b_d)`` over the draft's last hidden state,
then a 2-way linear layer (class 1 = accept); ``p̂ = softmax(logits)[1]``. The blocks have
independent weights by default; ``tie=True`` reuses one block D times, as the public code does.

Export format (read by eval without Lightning): a folder with ``model.safetensors`` and
``config.json`` (``kind``, ``hidden_size``, ``depth``, ``tie`` plus free-form metadata such as the
experiment that trained it, the draft it sits on and the sampling its labels used).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from specdec.errors import BadInput, MissingInput
from specdec.models.shipped import (
    CONFIG,
    WEIGHTS,
    load_state,
    read_checkpoint,
    read_config,
    read_tensors,
    write_asset,
)

HEAD_KIND = "acceptance_head"


class ResBlock(nn.Module):
    """``x + SiLU(Linear(x))``."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.silu(self.linear(x))


class AcceptanceHead(nn.Module):
    """Predicts whether the token at each position will be accepted by the target.

    Args:
        hidden_size: H, the draft's hidden size.
        depth: D ≥ 0 residual blocks (0 = a linear classifier).
        tie: share one block's weights across the D blocks (the public SpecDec++ code).
    """

    def __init__(self, hidden_size: int, depth: int = 3, *, tie: bool = False) -> None:
        super().__init__()
        if depth < 0 or hidden_size < 1:
            raise ValueError(f"need depth >= 0 and hidden_size >= 1, got {depth}, {hidden_size}")
        self.hidden_size, self.depth, self.tie = int(hidden_size), int(depth), bool(tie)
        self.meta: dict = {}  # the export's config.json (``load_head``): experiment, sampling
        if tie and depth > 0:
            block = ResBlock(hidden_size)
            self.blocks = nn.ModuleList([block] * depth)  # one module, D uses
        else:
            self.blocks = nn.ModuleList([ResBlock(hidden_size) for _ in range(depth)])
        self.out = nn.Linear(hidden_size, 2)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden [..., H]`` → ``logits [..., 2]`` (computed in the head's dtype)."""
        x = hidden.to(self.out.weight.dtype)
        for block in self.blocks:
            x = block(x)
        return self.out(x)

    def accept_prob(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden [..., H]`` → ``p̂ [...]``, the predicted acceptance probability."""
        return self.forward(hidden).softmax(-1)[..., 1]

    def config(self) -> dict:
        return {
            "kind": HEAD_KIND,
            "hidden_size": self.hidden_size,
            "depth": self.depth,
            "tie": self.tie,
        }


def save_head(head: AcceptanceHead, path: str | Path, **meta: object) -> Path:
    """Write ``head`` as ``path/model.safetensors`` + ``path/config.json`` (``meta`` merged in)
    atomically: a failed or killed export leaves the folder as it was."""
    # tied blocks share tensors; safetensors refuses shared storage, so store one copy
    state = {
        k: v.detach().cpu().contiguous().clone()
        for k, v in head.state_dict().items()
        if not (head.tie and k.startswith("blocks.") and not k.startswith("blocks.0."))
    }
    return write_asset(path, state, {**meta, **head.config()})


def load_head(path: str | Path, *, experiment: str = "specdecpp_<model>") -> AcceptanceHead:
    """Load a head written by ``save_head`` (no Lightning import).

    Raises:
        FileNotFoundError: no exported head at ``path``; names the experiment that trains it.
        ValueError: (``BadInput``) the folder holds something else than an acceptance head, a
            corrupt file or a NaN/inf weight (naming the file and the commands).
    """
    path = Path(path)
    fix = (
        f"`python -m specdec.train +experiment={experiment} stage=data` then "
        f"`python -m specdec.train +experiment={experiment}`"
    )
    if not (path / CONFIG).exists() or not (path / WEIGHTS).exists():
        raise MissingInput(
            f"no acceptance head at {path} (expected config.json + model.safetensors); train and "
            f"export it with {fix}, or set drafter.policy.head=<dir>"
        )
    cfg = read_config(path, "acceptance head", fix, keys=("kind",))
    if cfg["kind"] != HEAD_KIND:
        raise BadInput(
            f"{path} holds a {cfg['kind']!r}, not an {HEAD_KIND}; set "
            f"drafter.policy.head=<dir> to an acceptance head or re-create it with "
            f"{fix}"
        )
    try:
        head = AcceptanceHead(cfg["hidden_size"], cfg["depth"], tie=cfg["tie"])
    except (KeyError, TypeError, ValueError) as err:
        raise BadInput(
            f"acceptance head config {path / CONFIG} is corrupt ({type(err).__name__}: "
            f"{err}); re-create it with {fix}"
        ) from err
    state = read_tensors(path / WEIGHTS, "acceptance head", fix)
    if head.tie:
        for k in list(state):
            if k.startswith("blocks.0."):
                for d in range(1, head.depth):
                    state[k.replace("blocks.0.", f"blocks.{d}.", 1)] = state[k]
    load_state(head, state, path / WEIGHTS, "acceptance head", fix)
    head.meta = cfg
    return head.eval()


def head_from_checkpoint(ckpt_path: str | Path) -> AcceptanceHead:
    """The head inside a Lightning checkpoint of ``AcceptanceLearner`` (no Lightning import).

    Raises:
        FileNotFoundError, ValueError: (``InputError``) a missing, truncated or foreign file.
    """
    fix = (
        "point to a complete AcceptanceLearner checkpoint or retrain one with "
        "`python -m specdec.train +experiment=specdecpp_<model>`"
    )
    ckpt = read_checkpoint(ckpt_path, fix)
    state = {k[len("head.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("head.")}
    if "out.weight" not in state:
        raise BadInput(
            f"training checkpoint {ckpt_path} holds no acceptance head (no head.out.weight); {fix}"
        )
    hp = ckpt.get("hyper_parameters", {})
    depth, tie = int(hp.get("depth", 0)), bool(hp.get("tie", False))
    head = AcceptanceHead(int(state["out.weight"].shape[1]), depth, tie=tie)
    head.load_state_dict(state)
    return head.eval()
