"""Devices by name: whether this machine has one, whether two names mean the same, and the checks
of a target split by ``device_map`` (the steps of ``placement.check_before_loading``).

* ``check_device``: the torch device a name means, if this machine has it (CUDA / MPS available,
  the CUDA index within the device count); ``check_device_map`` / ``check_max_memory``: every
  device a ``device_map`` or ``max_memory`` names, ``disk`` / ``meta`` refused in a
  ``device_map`` (a target streamed from disk would make every timing meaningless), and
  ``max_memory`` without ``device_map``.
* ``check_loaded``: the loader's step after a target split by ``device_map`` loaded: accelerate
  puts what does not fit on ``disk`` (parameters on ``meta``), i.e. on no device.
* ``matches`` / ``same_device``: ``cuda`` stands for any CUDA index.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from specdec.errors import BadInput
from specdec.models.placement_config import key_name

#: the placement strategies accelerate understands (anything else must name a device)
STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
NO_DEVICE = ("disk", "meta")
DEVICE_MAP, MAX_MEMORY = key_name("device_map"), key_name("max_memory")

DeviceMap = str | Mapping[str, str | int] | None


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
        BadInput: naming ``key`` when the string is no device, or CUDA / MPS (or that CUDA
            index) is not available here.
    """
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise BadInput(
            f"{key}={device!r} is not a torch device (cpu, cuda, cuda:1, mps): {err}"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BadInput(
            f"{key}={device} was requested but CUDA is not available on this machine "
            "(torch.cuda.is_available() is False: no GPU, or a CPU-only torch "
            f"build); run with {key}=cpu"
        )
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise BadInput(
            f"{key}={device}: this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise BadInput(
            f"{key}={device} was requested but MPS is not available on this "
            f"machine; run with {key}=cpu"
        )
    return dev


def device_name(value: str | int) -> str:
    """accelerate's device names: an int is a CUDA index, a string a torch device."""
    return f"cuda:{value}" if isinstance(value, int) else str(value)


def _check_one(value: str | int, key: str) -> None:
    name = device_name(value)
    if name in NO_DEVICE:
        raise BadInput(
            f"{key} puts the target on {name!r}, i.e. on no device: offloaded weights are "
            "streamed in at every forward, so no timing means anything; give the target GPUs "
            "(device_map=auto with more max_memory, or more GPUs) or a smaller target"
        )
    check_device(name, key=key)


def check_device_map(device_map: DeviceMap) -> None:
    """Refuse a ``device_map`` naming a device this machine lacks, ``disk``, or nothing at all.

    Raises:
        BadInput: naming the bad entry and the fix.
    """
    if device_map is None or (isinstance(device_map, str) and device_map in STRATEGIES):
        return
    if isinstance(device_map, str | int):
        _check_one(device_map, DEVICE_MAP)
        return
    if not isinstance(device_map, Mapping) or not device_map:
        raise BadInput(
            f"{DEVICE_MAP}={device_map!r} leaves the target on no device: use one of "
            f"{STRATEGIES}, a device (cuda:0), or a non-empty dict of module name -> device"
        )
    for module, value in device_map.items():
        _check_one(value, f"{DEVICE_MAP}[{module!r}]")


def check_max_memory(max_memory: Mapping | None, device_map: DeviceMap) -> None:
    """Refuse ``max_memory`` without ``device_map`` or naming a device this machine lacks."""
    if max_memory is None:
        return
    if device_map is None:
        raise BadInput(
            f"{MAX_MEMORY} is set but {DEVICE_MAP} is null, so it would be ignored; "
            f"set {DEVICE_MAP}=auto (or balanced / sequential) to place the target by it"
        )
    if not isinstance(max_memory, Mapping) or not max_memory:
        raise BadInput(
            f"{MAX_MEMORY}={max_memory!r} must be a non-empty dict of device -> "
            "size, e.g. {0: 70GiB, 1: 70GiB, cpu: 200GiB}"
        )
    for device in max_memory:
        name = device_name(device)
        if name != "disk":  # a disk budget is refused after loading if anything lands there
            check_device(name, key=f"{MAX_MEMORY}[{device!r}]")


def check_loaded(model: nn.Module, *, role: str = "target") -> None:
    """Raise ``BadInput`` when some of ``model``'s weights were left on no device.

    Args:
        model: a model loaded with a ``device_map`` (its ``hf_device_map`` says where each module
            went).
        role: named in the error.
    """
    placed = dict(getattr(model, "hf_device_map", None) or {})
    nowhere = sorted({name for name, dev in placed.items() if device_name(dev) in NO_DEVICE})
    meta = [name for name, p in model.named_parameters() if p.device.type == "meta"]
    if nowhere or meta:
        where = ", ".join(nowhere[:5] or meta[:5]) or "''"
        raise BadInput(
            f"the {role} was left on no device: {len(meta)} parameters are on 'meta' (modules "
            f"{where} went to disk) because {MAX_MEMORY} / {DEVICE_MAP} leave them no "
            "room on a device; raise max_memory, add GPUs, or pick a smaller target"
        )


def cuda_devices(model: torch.nn.Module) -> list[torch.device]:
    """Every CUDA device holding some of ``model``'s parameters, in index order."""
    found = {p.device for p in model.parameters() if p.device.type == "cuda"}
    return sorted(found, key=lambda d: d.index or 0)
