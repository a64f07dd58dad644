"""The GPU path: flash-attention where it can run, ``sdpa`` where it cannot, and GPU versions.

``model.placement.attn_implementation: flash_attention_2`` needs the ``flash-attn`` package (the
``[gpu]`` extra: ``pip install -e .[gpu]``), a CUDA device and a half-precision dtype
(``bfloat16`` / ``float16``); ``check_attention`` refuses the request before any weights load
otherwise, naming the missing piece and the fix.

Tree drafts (SpecInfer, Miao et al. 2024; EAGLE-2, Li et al. 2024; Sequoia) are verified in one
forward under an explicit 4-D ancestor mask (``specdec.lm_inputs.position_inputs``), which
flash-attention's varlen kernels cannot take (they support only causal / sliding-window masks).
``fit_attention`` therefore switches a flash model to ``sdpa`` when the method makes trees, logs
the switch, and records it in the pair's fingerprint (``attention``: the implementation that ran,
``attention_requested``: the one the config asked for), so a report never compares a tree
method's time on ``sdpa`` with a chain method's on flash without saying so.

``gpu_versions`` gives the run fingerprint the CUDA build, the NVIDIA driver and flash-attn
versions (``None`` for each one this machine lacks).

Untested here: the flash-attention and driver paths need a GPU; the CPU tests exercise the
choice logic with stand-in configs.
"""

from __future__ import annotations

import importlib.util
import logging
import subprocess
from collections.abc import Callable, Iterable
from importlib import metadata

import torch

from specdec.errors import BadInput
from specdec.models.placement_config import key_name

log = logging.getLogger(__name__)

#: implementations that cannot take an arbitrary (tree) mask → the python module each needs
FLASH = {"flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn_interface"}
TREE_FALLBACK = "sdpa"
HALF = (torch.bfloat16, torch.float16)
ATTN = key_name("attn_implementation")


def flash_installed(implementation: str) -> bool:
    """Whether the package ``implementation`` needs is importable here."""
    return importlib.util.find_spec(FLASH[implementation]) is not None


def check_attention(
    requested: str | None,
    *,
    device: str,
    dtype: torch.dtype,
    installed: Callable[[str], bool] | None = None,
) -> None:
    """Refuse a flash-attention request this machine or configuration cannot serve.

    Args:
        requested: ``model.placement.attn_implementation`` (``None``: transformers' default).
        device: the target's device (``device``; with a ``device_map``, the eval's ``device``).
        dtype: the models' dtype.
        installed: whether a flash implementation's package is importable (None:
            ``flash_installed``; a parameter for tests).

    Raises:
        ValueError: naming the missing package, device or dtype, and the fix.
    """
    if requested not in FLASH:
        return
    attn, sdpa = f"{ATTN}={requested}", f"{ATTN}=sdpa"
    if not (installed or flash_installed)(requested):
        raise BadInput(
            f"{attn} needs the {FLASH[requested]!r} package, which is not installed; install the "
            f"GPU extra (pip install -e '.[gpu]', see docs/gpu.md) or use {sdpa}"
        )
    if not str(device).startswith("cuda"):
        raise BadInput(f"{attn} runs on CUDA only, but device={device}; use device=cuda or {sdpa}")
    if dtype not in HALF:
        raise BadInput(
            f"{attn} needs bfloat16 or float16 weights, got "
            f"{str(dtype).replace('torch.', '')}; set {key_name('dtype')}=bfloat16 "
            f"or {sdpa}"
        )


def fit_attention(models: Iterable[tuple[str, object]], *, makes_trees: bool) -> dict[str, str]:
    """Switch flash-attention models to ``sdpa`` when the method verifies trees.

    Args:
        models: ``(role, model)`` pairs; each model has ``config._attn_implementation`` and
            ``set_attn_implementation`` (transformers' ``PreTrainedModel``); ``None`` models are
            skipped.
        makes_trees: whether the drafter proposes trees (``Drafter.makes_trees``).

    Returns:
        ``{role: requested implementation}`` for each model switched (empty: none).
    """
    switched: dict[str, str] = {}
    if not makes_trees:
        return switched
    for role, model in models:
        current = getattr(getattr(model, "config", None), "_attn_implementation", None)
        if current in FLASH:
            model.set_attn_implementation(TREE_FALLBACK)
            switched[role] = current
            log.info(
                "the %s runs %s instead of %s: this method verifies token trees, whose "
                "ancestor masks flash-attention cannot take",
                role,
                TREE_FALLBACK,
                current,
            )
    return switched


def _driver() -> str | None:
    if not torch.cuda.is_available():
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.stdout.strip().splitlines()[:1]
    return first[0].strip() if out.returncode == 0 and first else None


def _package(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def gpu_versions() -> dict[str, str | None]:
    """CUDA (torch's build), NVIDIA driver and flash-attn versions; ``None`` where absent."""
    return {
        "cuda": torch.version.cuda,
        "cuda_driver": _driver(),
        "flash_attn": _package("flash-attn") or _package("flash_attn"),
    }
