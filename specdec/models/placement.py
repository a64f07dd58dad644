"""Where a pair's models and a method's nets live (``Placement``), and the two device checks.

A model config states its placement once, in its ``placement:`` node (``conf/model/*.yaml``;
keys, defaults and the flat keys it replaced: ``specdec.models.placement_config``).
``Placement.from_config`` is the one function that turns a model config (or that node) into a
``Placement``; every loader takes one (``placement=``: Hydra hands it the node) and reads no
placement key itself. ``specdec.models.pair.make_pair`` (every loader ends there) records what the
loader placed: the target's input device, the resolved CPU linear kernel and attention, the torch
threads. ``build_method`` hands that placement to the drafters and policies whose constructor
names ``placement``; nothing places itself. Nets are moved with ``Placement.place(module, role)``:

* ``features`` -- nets that read the target's features, embedding or head (EAGLE-3, SpecBlock,
  the H-RAD head): on the target's ``device``;
* ``draft`` -- draft LMs and what reads their hidden states (the SpecDec++ head): on
  ``draft_device``;
* ``target`` -- the target itself (placed by its loader).

A big target is split over devices by ``model.placement.device_map`` (``auto``, ``balanced``,
``balanced_low_0``, ``sequential``, a device, or a dict of module name -> device) within
``model.placement.max_memory`` (device -> size), both passed to transformers' ``from_pretrained``.

The devices are checked twice, one function each (``specdec.models.devices`` holds their steps):

* ``check_before_loading``, once before anything loads, by the entry point (the eval's preflight,
  which ``specdec.load`` runs too, and ``specdec.train``): every device named exists on this
  machine; ``disk`` / ``meta`` are refused in a ``device_map``; ``max_memory`` without
  ``device_map`` is refused; a ``draft_device`` a feature drafter cannot honour is refused.
* ``check_built``, once after the method is built (``specdec.compose``): every parameter and
  buffer of every module it holds (``Method.modules()``) is on its role's device. A target split
  by ``device_map`` is checked by its loader as it loads (``devices.check_loaded``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import NamedTuple

import torch
from torch import nn

from specdec.errors import BadInput
from specdec.models.devices import (
    check_device,
    check_device_map,
    check_max_memory,
    matches,
    same_device,
)
from specdec.models.placement_config import (
    check_values,
    key_name,
    node_of,
    parse_device,
    resolve_dtype,
)

ROLES = ("target", "features", "draft")
SHOWN = 5  # misplaced tensors named in an error


class Held(NamedTuple):
    """A module a method holds and its role (which of the placement's devices it belongs on)."""

    role: str
    module: nn.Module


@dataclass(frozen=True)
class Placement:
    """Where a method's models live, with the settings every placed net shares.

    ``from_config`` gives the placement a config asks for; ``make_pair`` replaces it by what the
    loader did (the target's input device, the kernel ``auto`` resolved to, the attention).

    Attributes:
        device: where the target's inputs go (its embedding's device under a ``device_map``).
        draft_device: the draft LM's device (asked for: ``device`` when the node leaves it null).
        dtype: the models' dtype.
        linear_kernel: the CPU linear kernel (asked for: maybe ``auto``; built: the one
            ``make_pair`` resolved for the target, ``specdec.models.kernels``).
        attention: the target's attention implementation (asked for: ``attn_implementation``;
            built: after loading; None: transformers' default / unknown).
        device_map: the target's ``device_map`` (None: the whole target on ``device``).
        max_memory: with ``device_map``, the per-device budget passed to ``from_pretrained``.
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
    max_memory: Mapping | None = None

    @classmethod
    def from_config(cls, config: Mapping | Placement | None = None) -> Placement:
        """The placement a model config asks for: the one function from config to ``Placement``.

        Args:
            config: a model config (``conf/model/*.yaml``: its ``placement:`` node is read), the
                node itself (what Hydra hands a loader) or some of its keys
                (``{"dtype": "float64"}``: the others take their defaults); a ``Placement`` is
                returned as it is; None: the defaults (CPU, float32, ``linear_kernel: auto``).

        Raises:
            BadInput: a flat placement key of a model config (naming its new key), a key the
                node lacks, or a value that is no device, dtype, kernel or thread count.
        """
        if isinstance(config, Placement):
            return config
        node = node_of(config)
        check_values(node)
        device = parse_device(node["device"], "device")
        draft = node["draft_device"]
        return cls(
            device=device,
            draft_device=device if draft is None else parse_device(draft, "draft_device"),
            dtype=resolve_dtype(node["dtype"]),
            linear_kernel=str(node["linear_kernel"]),
            attention=node["attn_implementation"],
            device_map=node["device_map"],
            max_memory=node["max_memory"],
            draft_threads=node["draft_threads"],
        )

    @property
    def draft_follows_target(self) -> bool:
        """Whether the draft goes where the target's inputs are (``draft_device`` left null)."""
        return self.draft_device == self.device

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
        out = {
            "device": str(self.device),
            "draft_device": str(self.draft_device),
            "dtype": str(self.dtype).replace("torch.", ""),
            "linear_kernel": self.linear_kernel,
            "attention": str(self.attention or "default"),
        }
        optional = {
            "device_map": self.device_map,
            "threads": self.threads,
            "draft_threads": self.draft_threads,
        }
        return {**out, **{k: str(v) for k, v in optional.items() if v is not None}}


def drafter_modules(drafter: object) -> dict[str, Held]:
    """The modules a drafter holds by default: each draft ``LM``'s model (role ``draft``) and its
    policy's (``Policy.modules``); feature drafters add their net (``Drafter.modules``)."""
    models = getattr(drafter, "models", ())
    out = {
        f"drafter.lm{i or ''}": Held("draft", lm.model)
        for i, lm in enumerate(models)
        if isinstance(getattr(lm, "model", None), nn.Module)
    }
    policy = getattr(drafter, "policy", None)
    return {**out, **(policy.modules() if hasattr(policy, "modules") else {})}


def check_before_loading(placement: Placement, *, drafter: type | None = None) -> None:
    """Refuse, before any weights load, a placement this machine or the drafter cannot honour:
    a ``device`` or ``draft_device`` it lacks, a ``device_map`` / ``max_memory`` naming one (or
    ``disk``), and a ``draft_device`` away from the target for a ``drafter`` class that drafts
    from the target's features (``Drafter.reads_target``). Called once per run by the entry
    point, before anything loads (see the module docstring).

    Raises:
        BadInput: naming the key and the fix.
    """
    device = check_device(placement.device, key="device")
    if not placement.draft_follows_target:
        key = key_name("draft_device")
        want = check_device(placement.draft_device, key=key)
        if getattr(drafter, "reads_target", False) and not same_device(want, device):
            raise BadInput(
                f"{key}={want}, but drafter {drafter.__name__} drafts from the target's features "
                f"with a net on the target's device ({device}); leave {key} null or set it to "
                f"{device}"
            )
    check_device_map(placement.device_map)
    check_max_memory(placement.max_memory, placement.device_map)


def check_built(modules: Mapping[str, Held], placement: Placement) -> None:
    """Refuse any parameter or buffer of ``modules`` that is not on its role's device.

    A target split by ``device_map`` was checked by ``check_loaded`` when it loaded.

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
            "loads with Placement.place (specdec/models/placement.py), not move it itself"
        )
