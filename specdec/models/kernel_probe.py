"""``linear_kernel: auto``: the CPU linear kernel chosen by a short timed probe on this machine.

Why: the ``packed`` kernel (``specdec.models.kernels``) was tuned on an AMD EPYC. On an Intel Xeon
with AVX-512, SmolLM2 ``ar`` ran at 11.9 tokens/s with it and at 19.2 with stock PyTorch, so a fixed
``auto → packed`` made every default number on that machine come from the slower path.

The probe: the first ``COPIES`` linear layers of each distinct shape (in module order, so that their
weights stream from memory as in a forward) are run on ``ROWS`` rows (1: an AR or draft step; 4: a
typical verify forward) under each candidate kernel, and each shape's time is scaled to its number
of layers; one untimed pass, then at least ``REPEATS`` timed ones interleaved between kernels so
that a load change on the machine hits both; the best pass counts. The passes go on (at most
``MAX_REPEATS``) until they are stable: for every kernel and row count the second-best pass is
within ``MARGIN`` of the best (``spread``). ``decide`` (``models.kernel_decision``) keeps ``stock``
unless ``packed`` is faster by ``MARGIN`` in total and slower by no more than ``MARGIN`` at any row
count: ``auto`` never picks a kernel measured slower than stock. On SmolLM2's shapes the probe
should take well under a second, and a stable result is cached in
``<cache dir>/kernels/linear_kernel.json`` keyed by CPU model, torch version, torch threads, dtype
and the layer shapes (delete the file to probe again). A probe still unstable after ``MAX_REPEATS``
passes decided on noise (on a loaded machine one measured
``stock 1:57.83 4:7353.61 | packed 1:1942.34 4:3349.56 ms`` where a quiet one measures packed faster
at both): that run takes ``stock``, the log says so, and nothing is cached, so the next load probes
again. Models whose linear weights total under ``PROBE_MIN_BYTES`` (the tiny test pair) stay in
cache whatever the kernel, so nothing is timed: they keep ``packed``, which keeps the test suite on
the path the real pairs take. Off the CPU ``auto`` is ``stock``.

The choice and its timings go into the pair's fingerprint (``ModelPair.describe``:
``linear_kernel``, ``linear_kernel_probe``); runs that read the cache record the same timings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from specdec.models.kernel_decision import (
    MARGIN,
    Passes,
    best,
    decide,
    describe_timings,
    spread,
    spread_at,
)
from specdec.models.kernels import (
    KERNELS,
    PackedLinear,
    WeightStationaryLinear,
    apply_linear_kernel,
)

log = logging.getLogger(__name__)

CANDIDATES = ("stock", "packed")
ROWS = (1, 4)  # rows per probed product: a 1-token step, a 4-token verify
REPEATS = 2  # timed passes per (kernel, rows), after one untimed pass; the best counts
MAX_REPEATS = 6  # timed passes at most while the best two of a (kernel, rows) differ by > MARGIN
COPIES = 2  # layers timed per distinct shape (SmolLM2: 2 of its 30 blocks, and the head)
PROBE_MIN_BYTES = 16 * 2**20  # below this the weights stay in cache: nothing worth timing
SKIPPED = "packed"  # the choice when nothing was timed (small models)
CACHE_FILE = Path("kernels") / "linear_kernel.json"
SWAPPABLE = (nn.Linear, WeightStationaryLinear, PackedLinear)  # what apply_linear_kernel swaps


@dataclass(frozen=True)
class KernelChoice:
    """A resolved kernel and how it was chosen (``note``: for the fingerprint, None: given)."""

    kernel: str
    note: str | None = None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def default_cache_dir() -> Path:
    """``$SPECDEC_CACHE_DIR`` or ``<repo>/cache`` (what ``paths.cache_dir`` resolves to)."""
    env = os.environ.get("SPECDEC_CACHE_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "cache"


def linear_layers(models: Sequence[nn.Module | None]) -> list[nn.Linear]:
    """Every distinct plain linear layer of ``models`` (shared ones once), in module order."""
    seen: dict[int, nn.Linear] = {}
    for model in models:
        for module in model.modules() if model is not None else ():
            if type(module) in SWAPPABLE:  # subclasses of other libraries keep their forward
                seen.setdefault(id(module), module)
    return list(seen.values())


def sample_layers(
    linears: Sequence[nn.Linear], copies: int = COPIES
) -> list[tuple[list[nn.Linear], float]]:
    """Per distinct layer shape: its first ``copies`` layers and the factor (layers of that
    shape / layers taken) that scales their time to all of them."""
    groups: dict[str, list[nn.Linear]] = {}
    for lin in linears:
        groups.setdefault(shape_name(lin), []).append(lin)
    return [(group[:copies], len(group) / len(group[:copies])) for group in groups.values()]


def probe(
    linears: Sequence[nn.Linear],
    *,
    clock: Callable[[], float] = time.perf_counter,
    rows: Sequence[int] = ROWS,
    repeats: int = REPEATS,
    max_repeats: int = MAX_REPEATS,
) -> Passes:
    """Milliseconds of the linear layers of one forward per candidate kernel and row count, for
    each timed pass (``best`` takes the best of them, ``spread`` says how far they agree).

    Each distinct shape is timed on its first ``COPIES`` layers (read one after the other, so
    that they stream from memory as in a forward) and scaled to its number of layers. Per row
    count: one untimed pass, then timed passes (every kernel in turn) until there are ``repeats``
    of them and they are stable (``spread`` within ``MARGIN``), or ``max_repeats``. ``clock`` is
    read around each shape's layers (a test injects a deterministic one). Leaves the timed layers
    as ``packed``, their packed weights made; ``apply_linear_kernel`` then sets the choice and
    drops those copies if it is ``stock``.
    """
    groups = sample_layers(linears)
    timed = [lin for layers, _ in groups for lin in layers]
    passes: Passes = {k: {m: [] for m in rows} for k in CANDIDATES}
    with torch.inference_mode():
        for m in rows:
            inputs = {
                lin.in_features: torch.full((m, lin.in_features), 0.01, dtype=lin.weight.dtype)
                for lin in timed
            }  # width -> [m, in]
            rep = 0  # pass 0 is untimed (packing, allocator growth)
            while rep <= repeats or (rep <= max_repeats and spread_at(passes, m) > MARGIN):
                # 1. One pass of every kernel, 2. its time kept from the first timed pass on.
                for kernel in CANDIDATES:
                    apply_linear_kernel_keep_packs(timed, kernel)
                    total = 0.0
                    for layers, scale in groups:
                        start = clock()
                        for lin in layers:
                            lin(inputs[lin.in_features])
                        total += (clock() - start) * 1e3 * scale
                    if rep:
                        passes[kernel][m].append(total)
                rep += 1
    apply_linear_kernel_keep_packs(timed, "packed")
    return passes


def apply_linear_kernel_keep_packs(linears: Sequence[nn.Linear], kernel: str) -> None:
    """Set each layer's class without dropping its packed weight (the probe switches often)."""
    cls = PackedLinear if kernel == "packed" else nn.Linear
    for lin in linears:
        lin.__class__ = cls


def shape_name(lin: nn.Linear) -> str:
    """``<out>x<in>`` and ``+b`` for a layer with a bias."""
    return f"{lin.out_features}x{lin.in_features}{'+b' if lin.bias is not None else ''}"


def probe_key(linears: Sequence[nn.Linear]) -> str:
    """What a cached probe result holds for: CPU, torch version and threads, dtype, shapes."""
    shapes: dict[str, int] = {}
    for lin in linears:
        shapes[shape_name(lin)] = shapes.get(shape_name(lin), 0) + 1
    dtype = str(linears[0].weight.dtype) if linears else "none"
    parts = [
        cpu_model(),
        torch.__version__,
        str(torch.get_num_threads()),
        dtype,
        json.dumps(shapes, sort_keys=True),
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:  # a cache: a bad file is remade, not an input error
        log.warning("ignoring the kernel probe cache %s (%s); probing again", path, err)
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError as err:  # a read-only cache dir costs a probe per load, nothing else
        log.warning("could not write the kernel probe cache %s (%s)", path, err)


def choose_linear_kernel(
    kernel: str,
    models: Sequence[nn.Module | None],
    *,
    cache_dir: str | Path | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> KernelChoice:
    """Resolve ``kernel`` for ``models`` (``auto``: by the cached or a new probe; see above).

    Args:
        kernel: ``auto`` | ``stock`` | ``weight_stationary`` | ``packed``.
        models: the models that will run the kernel (``None`` entries are skipped); their
            layers are left as the probe leaves them (``apply_linear_kernel`` sets the choice).
        cache_dir: folder of the probe cache (default ``default_cache_dir()``).
        clock: seconds, read around each timed pass.
    """
    if kernel not in KERNELS:
        raise ValueError(f"unknown linear_kernel {kernel!r}; choose one of {list(KERNELS)}")
    if kernel != "auto":
        return KernelChoice(kernel)
    linears = linear_layers(models)
    if not linears or linears[0].weight.device.type != "cpu":
        return KernelChoice("stock")
    size = sum(lin.weight.numel() * lin.weight.element_size() for lin in linears)
    if size < PROBE_MIN_BYTES:
        return KernelChoice(SKIPPED, f"not probed: {size / 2**20:.1f} MiB of linear weights")
    path = Path(cache_dir or default_cache_dir()) / CACHE_FILE
    key, cache = probe_key(linears), _read_cache(path)
    entry = cache.get(key)
    if not (isinstance(entry, dict) and entry.get("kernel") in CANDIDATES):
        start = time.perf_counter()
        passes = probe(linears, clock=clock)
        timings, noise = describe_timings(best(passes)), spread(passes)
        if noise > MARGIN:  # decided on noise: stock for this run, probe again next time
            log.warning(
                "linear kernel probe (%.2f s) unstable: its passes differ by %.0f %% "
                "(margin %.0f %%): %s -> stock for this run, not cached",
                time.perf_counter() - start,
                100 * noise,
                100 * MARGIN,
                timings,
            )
            return KernelChoice("stock", f"probe unstable ({100 * noise:.0f} % spread): {timings}")
        entry = {
            "kernel": decide(best(passes)),
            "timings": timings,
            "cpu": cpu_model(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }
        log.info(
            "linear kernel probe (%.2f s): %s -> %s",
            time.perf_counter() - start,
            entry["timings"],
            entry["kernel"],
        )
        _write_cache(path, {**cache, key: entry})
    return KernelChoice(entry["kernel"], f"probe: {entry['timings']}")


def resolve_for(
    kernel: str, models: Sequence[nn.Module | None], *, cache_dir: str | Path | None = None
) -> KernelChoice:
    """``choose_linear_kernel`` then ``apply_linear_kernel`` on each model; the choice."""
    choice = choose_linear_kernel(kernel, models, cache_dir=cache_dir)
    for model in models:
        apply_linear_kernel(model, choice.kernel)
    return choice
