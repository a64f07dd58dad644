"""Where a pair's models and a method's nets live (``Placement``), and the two device checks.

``Placement`` is built once, by ``specdec.models.pair.make_pair`` (every loader ends there), from
what the loader placed: the target's input device (or its ``device_map``), the draft's device,
the dtype, the torch threads and the resolved CPU linear kernel and attention. ``build_method``
hands it to the drafters and policies whose constructor names ``placement``; nothing places
itself. Nets are moved with ``Placement.place(module, role)``:

* ``features`` -- nets that read the target's features, embedding or head (EAGLE-3, SpecBlock,
  the H-RAD head): on the target's ``device``;
* ``draft`` -- draft LMs and what reads their hidden states (the SpecDec++ head): on
  ``draft_device``;
* ``target`` -- the target itself (placed by its loader).

A big target is split over devices by ``model.device_map`` (``auto``, ``balanced``,
``balanced_low_0``, ``sequential``, a device, or a dict of module name -> device) within
``model.max_memory`` (device -> size), both passed to transformers' ``from_pretrained``.

The checks, one function each:

* ``check_before_loading``: every device named exists on this machine; ``disk`` / ``meta`` are
  refused in a ``device_map`` (a target streamed from disk would make every timing meaningless);
  ``max_memory`` without ``device_map`` is refused; a ``model.draft_device`` a feature drafter
  cannot honour is refused.
* ``check_built``: after the method is built, every parameter and buffer of every module it
  holds (``Method.modules()``) is on its role's device. ``check_loaded`` is the loader's step for
  a target split by ``device_map``: accelerate puts what does not fit on ``disk`` (parameters on
  ``meta``), i.e. on no device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import NamedTuple

import torch
from torch import nn

from specdec.errors import BadInput

ROLES = ("target", "features", "draft")
SHOWN = 5  # misplaced tensors named in an error
#: the placement strategies accelerate understands (anything else must name a device)
STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
NO_DEVICE = ("disk", "meta")

DeviceMap = str | Mapping[str, str | int] | None


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


def check_device(device: str | torch.device, *, key: str = "device") -> torch.device:
    """The torch device ``device`` names, if this machine has it.

    Raises:
        ValueError: naming ``key`` when the string is no device, or CUDA / MPS (or that CUDA
            index) is not available here.
    """
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise BadInput(f"{key}={device!r} is not a torch device (cpu, cuda, cuda:1, mps): "
                         f"{err}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BadInput(f"{key}={device} was requested but CUDA is not available on this machine "
                         "(torch.cuda.is_available() is False: no GPU, or a CPU-only torch "
                         f"build); run with {key}=cpu")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise BadInput(f"{key}={device}: this machine has {torch.cuda.device_count()} CUDA "
                         "device(s)")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise BadInput(f"{key}={device} was requested but MPS is not available on this "
                         f"machine; run with {key}=cpu")
    return dev


def _device_name(value: str | int) -> str:
    """accelerate's device names: an int is a CUDA index, a string a torch device."""
    return f"cuda:{value}" if isinstance(value, int) else str(value)


def _check_one(value: str | int, key: str) -> None:
    name = _device_name(value)
    if name in NO_DEVICE:
        raise BadInput(
            f"{key} puts the target on {name!r}, i.e. on no device: offloaded weights are "
            "streamed in at every forward, so no timing means anything; give the target GPUs "
            "(device_map=auto with more max_memory, or more GPUs) or a smaller target")
    check_device(name, key=key)


def _check_device_map(device_map: DeviceMap) -> None:
    """Refuse a ``device_map`` naming a device this machine lacks, ``disk``, or nothing at all.

    Raises:
        ValueError: naming the bad entry and the fix.
    """
    if device_map is None or (isinstance(device_map, str) and device_map in STRATEGIES):
        return
    if isinstance(device_map, str | int):
        _check_one(device_map, "model.device_map")
        return
    if not isinstance(device_map, Mapping) or not device_map:
        raise BadInput(
            f"model.device_map={device_map!r} leaves the target on no device: use one of "
            f"{STRATEGIES}, a device (cuda:0), or a non-empty dict of module name -> device")
    for module, value in device_map.items():
        _check_one(value, f"model.device_map[{module!r}]")


def _check_max_memory(max_memory: Mapping | None, device_map: DeviceMap) -> None:
    """Refuse ``max_memory`` without ``device_map`` or naming a device this machine lacks."""
    if max_memory is None:
        return
    if device_map is None:
        raise BadInput(
            "model.max_memory is set but model.device_map is null, so it would be ignored; "
            "set model.device_map=auto (or balanced / sequential) to place the target by it")
    if not isinstance(max_memory, Mapping) or not max_memory:
        raise BadInput(f"model.max_memory={max_memory!r} must be a non-empty dict of device -> "
                         "size, e.g. {0: 70GiB, 1: 70GiB, cpu: 200GiB}")
    for device in max_memory:
        name = _device_name(device)
        if name != "disk":  # a disk budget is refused after loading if anything lands there
            check_device(name, key=f"model.max_memory[{device!r}]")


def check_loaded(model: nn.Module, *, role: str = "target") -> None:
    """Raise ``ValueError`` when some of ``model``'s weights were left on no device.

    Args:
        model: a model loaded with a ``device_map`` (its ``hf_device_map`` says where each module
            went).
        role: named in the error.
    """
    placed = dict(getattr(model, "hf_device_map", None) or {})
    nowhere = sorted({name for name, dev in placed.items() if _device_name(dev) in NO_DEVICE})
    meta = [name for name, p in model.named_parameters() if p.device.type == "meta"]
    if nowhere or meta:
        where = ", ".join(nowhere[:5] or meta[:5]) or "''"
        raise BadInput(
            f"the {role} was left on no device: {len(meta)} parameters are on 'meta' (modules "
            f"{where} went to disk) because model.max_memory / model.device_map leave them no "
            "room on a device; raise max_memory, add GPUs, or pick a smaller target")


def check_before_loading(device: str | torch.device, *, draft_device: str | None = None,
                         device_map: DeviceMap = None, max_memory: Mapping | None = None,
                         drafter: type | None = None) -> None:
    """Refuse, before any weights load, a placement this machine or the drafter cannot honour:
    a ``device`` or ``model.draft_device`` it lacks, a ``device_map`` / ``max_memory`` naming
    one (or ``disk``), and a ``model.draft_device`` away from the target for a ``drafter`` class
    that drafts from the target's features (``Drafter.reads_target``).

    Raises:
        BadInput: naming the key and the fix.
    """
    check_device(device, key="device")
    if draft_device is not None:
        want = check_device(draft_device, key="model.draft_device")
        if getattr(drafter, "reads_target", False) and not same_device(want, device):
            raise BadInput(
                f"model.draft_device={draft_device}, but drafter {drafter.__name__} drafts from "
                f"the target's features with a net on the target's device ({device}); leave "
                f"model.draft_device null or set it to {device}")
    _check_device_map(device_map)
    _check_max_memory(max_memory, device_map)


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
            "loads with Placement.place (specdec/models/placement.py), not move it itself")


def cuda_devices(model: torch.nn.Module) -> list[torch.device]:
    """Every CUDA device holding some of ``model``'s parameters, in index order."""
    found = {p.device for p in model.parameters() if p.device.type == "cuda"}
    return sorted(found, key=lambda d: d.index or 0)
