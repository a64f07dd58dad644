"""H-RAD's input features, built by one function for training data and for serving.

SpecBranch (Shen et al., ICLR 2026, H-RAD): the three-way classifier reads
``z_t = Concat(f_{t-1}, e_t)``, where ``f_{t-1}`` is the target's hidden states of its last K = 4
layers (transformers' ``hidden_states[-K:]``: outputs of layers L−K+1..L−1 and the final-normed
output of layer L) at the last *verified* position, and ``e_t`` the target's input embedding of
"the token just selected" (digest), the paper's new token ``x_t``. In this project's loop that
token is the **root** of the next draft (``Draft.tokens[0]``, ``Context.root``): the recovered or
bonus token the last verification emitted, which the target chose from ``f_{t-1}``'s output and
has not scored yet. ``f_{t-1}`` is the last row of ``Context.target_features`` (the kept root +
accepted nodes of the last step) or, on the first step, the last row of the prompt's prefill
features. So ``z_t`` is known before the drafter drafts anything, which is when SpecBranch needs
the signal, and the classifier predicts how much of the draft hanging off ``x_t`` the target will
accept.

``StepFeatures`` tracks ``f_{t-1}`` across prefill and steps; the data writer
(``data.hrad``) and a drafter that serves the head both call it, so the features cannot
drift between training and serving.
"""

from __future__ import annotations

import torch

from specdec.core import Context, TargetView

DEFAULT_LAYERS = 4  # K: the paper's choice (more layers: 1-2 tokens/s for much more memory)


def hrad_layers(num_layers: int, k: int = DEFAULT_LAYERS) -> tuple[int, ...]:
    """Indices into ``hidden_states`` of the target's last ``k`` layers: ``(-k, ..., -1)``.

    ``hidden_states`` has ``num_layers + 1`` entries (the embeddings first), so ``k`` can be at
    most ``num_layers + 1``.

    Raises:
        ValueError: ``k`` outside ``1..num_layers + 1`` (names both and the config key).
    """
    if not 1 <= k <= num_layers + 1:
        raise ValueError(
            f"hrad.layers={k} but a {num_layers}-layer target has {num_layers + 1} "
            f"hidden states; use 1 <= hrad.layers <= {num_layers + 1}"
        )
    return tuple(range(-k, 0))


def hrad_features(hidden: torch.Tensor, root_embedding: torch.Tensor) -> torch.Tensor:
    """``z = Concat(f_{t-1}, e_t)`` in float32.

    Args:
        hidden: ``[..., k, H]`` target hidden states of the K layers at the last verified position.
        root_embedding: ``[..., H]`` target input embedding of the root ``x_t``.

    Returns:
        ``[..., (k + 1) * H]``: the k layers in ``hidden_states`` order, then the embedding.
    """
    if (
        hidden.dim() < 2
        or hidden.shape[-1] != root_embedding.shape[-1]
        or hidden.shape[:-2] != root_embedding.shape[:-1]
    ):
        raise ValueError(
            f"hidden [..., k, H] {tuple(hidden.shape)} does not match root embedding "
            f"[..., H] {tuple(root_embedding.shape)}"
        )
    flat = hidden.float().flatten(-2)  # [..., k*H]
    return torch.cat([flat, root_embedding.float().to(flat.device)], -1)  # [..., (k+1)*H]


class StepFeatures:
    """``z_t`` at every decoding step of one generation (feed it ``prefill``, then call it).

    A drafter that declares ``target_layers = hrad_layers(...)`` calls ``prefill`` from its own
    ``prefill`` and ``__call__`` from ``propose`` (the engine has handed over the last step's kept
    features in ``ctx.target_features`` by then).
    """

    def __init__(self) -> None:
        self._last: torch.Tensor | None = None  # [k, H] f at the last verified position

    def prefill(self, features: torch.Tensor | None) -> None:
        """``features [T-1, k, H]`` of the prompt but its root, or ``None`` (a 1-token prompt)."""
        self._last = None if features is None or features.shape[0] == 0 else features[-1]

    def __call__(self, ctx: Context, view: TargetView) -> torch.Tensor | None:
        """``z_t [(k + 1) * H]`` for the draft rooted at ``ctx.root``; ``None`` before any
        verified position exists (a 1-token prompt's first step)."""
        if ctx.target_features is not None:
            self._last = ctx.target_features[-1]  # [k, H] the last kept node
        if self._last is None:
            return None
        root = torch.tensor([ctx.root], dtype=torch.long)
        return hrad_features(self._last, view.embed(root)[0])  # [(k+1)*H]
