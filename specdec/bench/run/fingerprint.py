"""Digests of the learned weights a run uses, so records of one set of weights never resume another.

An eval run's ``config_hash`` (``specdec.bench.records``) covers its configuration. A
configuration names weights by path (``model.draft_path``, ``drafter.policy.head``), and
retraining rewrites the file at the same path: without the weights in the hash, ``python -m
specdec.eval`` after a retrain would resume the old draft's records and report them as the new
draft's. ``learned_weights`` finds every ``nn.Module`` a run's draft side holds (the pair's draft,
and modules inside the drafter, its policy and the verifier, such as the SpecDec++ acceptance head)
and digests each; the runner hashes those digests with the configuration. The target is left out:
it is named by the pair and can be large (hashing a 70B target would take minutes).

A digest hashes every tensor's name, shape and dtype, up to ``SAMPLES`` evenly spaced values and
an integer sum of all its values' bits (exact whatever the summation order or thread count), so
it is cheap even for a 1B draft and changes whenever a training step has touched the weights.

The machine and software fingerprints (``machine_tag``, ``software_versions``) go into
``summary.json`` so the report refuses speedups across different machines or library versions
(the CUDA, driver and flash-attn versions included).
"""

from __future__ import annotations

import hashlib
import platform
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

SAMPLES = 4096  # values sampled per tensor
MAX_DEPTH = 4  # attribute levels searched below the drafter and the verifier
INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # bytes → int view


def weights_digest(module: nn.Module) -> str:
    """A short hash of ``module``'s parameters and buffers (names, shapes, dtypes, some values)."""
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        flat = t.detach().reshape(-1)  # [N]
        step = max(1, flat.numel() // SAMPLES)
        picked = flat[::step][:SAMPLES].to(device="cpu", dtype=torch.float64)  # [≤ SAMPLES]
        # every value counts through an integer sum of the raw bits: exact in any order
        bits = flat.contiguous().view(INT_OF_SIZE[t.element_size()])  # [N]
        total = int(bits.sum(dtype=torch.int64))
        h.update(f"{name}|{tuple(t.shape)}|{t.dtype}|{total}|".encode())
        h.update(picked.numpy().tobytes())
    return h.hexdigest()[:12]


Found = list[tuple[str, nn.Module]]  # (attribute path, module)


def _modules_below(obj: object, path: str, depth: int, seen: set[int]) -> Found:
    """Each module reachable from ``obj`` through attributes of specdec objects, lists, tuples."""
    if id(obj) in seen or depth > MAX_DEPTH:
        return []
    seen.add(id(obj))
    if isinstance(obj, nn.Module):
        return [(path, obj)]
    if isinstance(obj, list | tuple):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    elif type(obj).__module__.startswith("specdec") and hasattr(obj, "__dict__"):
        items = [(f"{path}.{k}", v) for k, v in vars(obj).items()]
    else:
        return []
    found: Found = []
    for sub_path, value in items:
        found += _modules_below(value, sub_path, depth + 1, seen)
    return found


def learned_weights(target: nn.Module, draft: nn.Module | None, *parts: object) -> dict[str, str]:
    """Digest of the draft and of each module inside ``parts`` (drafter, verifier), by name.

    Args:
        target: the pair's target; skipped wherever it is found.
        draft: the pair's draft model, or None.
        parts: objects to search (attributes of ``specdec`` classes, lists and tuples).
    """
    seen = {id(target)}
    out: dict[str, str] = {}
    if draft is not None:
        seen.add(id(draft))
        out["draft"] = weights_digest(draft)
    for part in parts:  # paths are unique: each module is found once (``seen``)
        for path, module in _modules_below(part, type(part).__name__, 0, seen):
            out[path] = weights_digest(module)
    return out


def machine_tag(devices: Sequence[torch.device]) -> dict[str, str]:
    """Hostname-independent description of the hardware that timed the run.

    Args:
        devices: the devices the models are on (``ModelPair.devices()``), not the requested one.
    """
    from specdec.models.kernel_probe import cpu_model

    tag = {
        "cpu": cpu_model(),
        "torch_threads": str(torch.get_num_threads()),
        "device": ",".join(str(d) for d in devices),
    }
    gpus = [torch.cuda.get_device_name(d) for d in devices if d.type == "cuda"]
    if gpus:
        tag["gpu"] = ",".join(gpus)
    return tag


def software_versions() -> dict[str, str | None]:
    """Versions of the libraries whose changes move timings: python, torch, transformers, and the
    CUDA build, NVIDIA driver and flash-attn (``specdec.models.gpu.gpu_versions``; ``None`` each
    where this machine has none)."""
    import transformers

    from specdec.models.gpu import gpu_versions

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        **gpu_versions(),
    }


SCHEMA_VERSION = 2  # of summary.json and the records; 2: provenance, counters, completeness


def provenance() -> dict:
    """Where a summary came from: the project's git commit (``None`` outside a checkout), whether
    the working tree had uncommitted changes, the UTC time, and the results' schema version."""
    import datetime
    import subprocess

    root = Path(__file__).resolve().parents[3]  # the repository (specdec/bench/run/ is 3 down)

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "git_commit": commit,
        "git_dirty": None if status is None else bool(status),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "schema_version": SCHEMA_VERSION,
    }
