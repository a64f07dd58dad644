"""One typed placement for a run: where every model and net of a method lives, and checking it.

``Placement`` is built once, by ``specdec.models.pair.make_pair`` (every loader ends there), from
what the loader placed: the target's input device (or its ``device_map``), the draft's device, the
dtype, the torch threads and the resolved CPU linear kernel and attention. ``build_method`` hands
it to the drafter and the policy at construction; nothing places itself. Nets a drafter or policy
loads are moved with ``Placement.place(module, role)``:

* ``features`` -- nets that read the target's features, embedding or head (EAGLE-3, SpecBlock,
  the H-RAD head): on the target's ``device``;
* ``draft`` -- draft LMs and what reads their hidden states (the SpecDec++ head): on
  ``draft_device``;
* ``target`` -- the target itself (placed by its loader).

``place`` casts to the placement's dtype (``cast=False`` keeps a head's own dtype) and applies the
pair's CPU linear kernel and CPU attention as ``make_pair`` does, for the device the net lands on.

After building, ``check_placement`` walks every parameter and buffer of every module a method
holds (``Method.modules()``) and refuses, before decoding, any tensor not on its role's device.
``check_drafter_device`` refuses, before any weights load, a ``model.draft_device`` that a drafter
drafting from the target's features (``Drafter.reads_target``) could not honour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import NamedTuple

import torch
from omegaconf import DictConfig
from torch import nn

from specdec.errors import BadInput

ROLES = ("target", "features", "draft")
SHOWN = 5  # misplaced tensors named in an error


class Held(NamedTuple):
    """A module a method holds and its role (which of the placement's devices it belongs on)."""

    role: str
    module: nn.Module


@dataclass(frozen=True)
class Placement:
    """Where a method's models live, with the settings every placed net shares.

    Attributes:
        device: where the target's inputs go (its embedding's device under a ``device_map``).
        draft_device: the draft LM's device.
        dtype: the models' dtype.
        linear_kernel: the CPU linear kernel ``make_pair`` resolved for the target
            (``specdec.models.kernels``).
        attention: the target's attention implementation after loading (None: unknown).
        device_map: the target's ``model.device_map`` (None: the whole target on ``device``).
        threads: torch threads of the process when the pair was built.
        draft_threads: torch threads of the draft's forwards (None: the process's).
    """

    device: torch.device
    draft_device: torch.device
    dtype: torch.dtype
    linear_kernel: str = "stock"
    attention: str | None = None
    device_map: str | int | Mapping | None = None
    threads: int | None = None
    draft_threads: int | None = None

    @staticmethod
    def cpu(dtype: torch.dtype = torch.float32) -> Placement:
        """Everything on the CPU in ``dtype``, stock kernels (unit tests, drafters built alone)."""
        cpu = torch.device("cpu")
        return Placement(device=cpu, draft_device=cpu, dtype=dtype)

    def device_for(self, role: str) -> torch.device:
        """The device of a module with ``role`` (one of ``ROLES``)."""
        if role not in ROLES:
            raise ValueError(f"unknown placement role {role!r}; use one of {list(ROLES)}")
        return self.draft_device if role == "draft" else self.device

    def kernel_for(self, device: torch.device) -> str:
        """The pair's linear kernel on the CPU; ``stock`` elsewhere (the CPU kernels fall back to
        ``F.linear`` off the CPU anyway)."""
        return self.linear_kernel if device.type == "cpu" else "stock"

    def place(self, module: nn.Module, role: str, *, cast: bool = True) -> nn.Module:
        """Move ``module`` to its role's device (and dtype unless ``cast=False``), with the pair's
        CPU linear kernel and CPU attention there; returns it."""
        from transformers import PreTrainedModel

        from specdec.models.attention import use_cpu_attention
        from specdec.models.kernels import apply_linear_kernel

        device = self.device_for(role)
        module.to(device=device, dtype=self.dtype if cast else None)
        kernel = self.kernel_for(device)
        apply_linear_kernel(module, kernel)
        if kernel != "stock":  # as make_pair does for the pair
            for sub in module.modules():
                if isinstance(sub, PreTrainedModel):
                    use_cpu_attention(sub)
        return module

    def describe(self) -> dict[str, str]:
        """The placement's part of the pair fingerprint (unset optional fields left out)."""
        out = {"device": str(self.device), "draft_device": str(self.draft_device),
               "dtype": str(self.dtype).replace("torch.", ""), "linear_kernel": self.linear_kernel,
               "attention": str(self.attention or "default")}
        optional = {"device_map": self.device_map, "threads": self.threads,
                    "draft_threads": self.draft_threads}
        return {**out, **{k: str(v) for k, v in optional.items() if v is not None}}


def drafter_modules(drafter: object) -> dict[str, Held]:
    """The modules a drafter holds by default: each draft ``LM``'s model (role ``draft``) and its
    policy's (``Policy.modules``); feature drafters add their net (``Drafter.modules``)."""
    models = getattr(drafter, "models", ())
    out = {f"drafter.lm{i or ''}": Held("draft", lm.model) for i, lm in enumerate(models)
           if isinstance(getattr(lm, "model", None), nn.Module)}
    policy = getattr(drafter, "policy", None)
    return {**out, **(policy.modules() if hasattr(policy, "modules") else {})}


def matches(got: torch.device, want: torch.device) -> bool:
    """Whether a tensor on ``got`` is on ``want`` (``cuda`` means any CUDA index)."""
    return got.type == want.type and (want.index is None or got.index == want.index)


def same_device(a: str | torch.device, b: str | torch.device) -> bool:
    """Whether two device names can mean the same device (``cuda`` is any CUDA index)."""
    a, b = torch.device(a), torch.device(b)
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def check_placement(modules: Mapping[str, Held], placement: Placement) -> None:
    """Refuse any parameter or buffer of ``modules`` that is not on its role's device.

    A target split by ``device_map`` is left to ``models.placement.check_loaded``.

    Raises:
        BadInput: naming the first misplaced tensors, where the placement puts them, and the fix.
    """
    wrong: list[str] = []
    for name, (role, module) in modules.items():
        if role == "target" and placement.device_map is not None:
            continue
        want = placement.device_for(role)
        for tname, tensor in chain(module.named_parameters(), module.named_buffers()):
            if not matches(tensor.device, want):
                wrong.append(f"{name}.{tname} on {tensor.device}, the placement says {want}")
    if wrong:
        more = f" (and {len(wrong) - SHOWN} more)" if len(wrong) > SHOWN else ""
        raise BadInput(
            f"{len(wrong)} tensor(s) of the method are not where the placement puts them: "
            f"{'; '.join(wrong[:SHOWN])}{more}. A drafter, policy or head must place what it "
            "loads with Placement.place (specdec/placement.py), not move it itself")


def check_drafter_device(cfg: DictConfig) -> None:
    """Refuse, before any weights load, a device that does not exist or a ``model.draft_device``
    the drafter cannot honour (it drafts from the target's features, on the target's device)."""
    from hydra.utils import get_class

    from specdec.models.placement import check_device

    model = cfg.get("model") or {}
    device = model.get("device") or cfg.get("device") or "cpu"
    draft_device = model.get("draft_device")
    check_device(device, key="device")
    if draft_device is None:
        return
    want = check_device(draft_device, key="model.draft_device")
    target = (cfg.get("drafter") or {}).get("_target_")
    if target is None or not getattr(get_class(target), "reads_target", False):
        return
    if not same_device(want, device):
        raise BadInput(
            f"model.draft_device={draft_device}, but drafter {target.rsplit('.', 1)[-1]} drafts "
            f"from the target's features with a net on the target's device ({device}); leave "
            f"model.draft_device null or set it to {device}")
