"""CPU linear kernel for decoding: compute ``x @ Wᵀ`` as ``(W @ xᵀ)ᵀ`` for small token counts.

Why (measured on the project's 2-core CPU, fp32, SmolLM2-135M, 200-token context; numbers from
``scripts/bench_kernels.py``): a decoding forward over k new tokens is a linear layer with
M = k ≤ 8 rows against a weight that does not fit in cache. Stock ``F.linear`` sends M = 1 to a
matrix-vector routine (~9 GB/s of weights) and 2 ≤ M ≤ 8 to a GEMM path that repacks the whole
weight on every call, so a 2–8-token verify forward cost 1.5–2× a 1-token step. Swapping the
operands, ``torch.mm(W [O, I], xᵀ [I, M])``, makes the big weight the GEMM's left operand, read
once in its stored layout; a single row is duplicated to M = 2 so that it takes the same path.
Target forward: 67 → 34 ms for 1 token, 93 → 52 ms for 4 tokens; draft 6.0 → 3.1 ms per token
(same weights; max logit difference ~1e-4 from a different summation order).

For 3–8 rows the MKL GEMM under ``torch.mm`` is still slow, so ``packed`` (``PackedLinear``)
keeps the weight-stationary path for 1–2 rows and multiplies 3–``MAX_ROWS`` rows with a
oneDNN-prepacked copy of the weight: target 4-token verify 66 → 54 ms, 5 tokens 68 → 47 ms
(2 threads, best of two interleaved passes of ``bench_kernels.py``). Those numbers are that CPU's
(an AMD EPYC): on an Intel Xeon with AVX-512 stock was faster, so ``auto`` times both on the
machine it runs on (``specdec.models.kernel_probe``).

The swap changes only the class of each ``nn.Linear`` (same parameters, same ``state_dict``, ties
kept); with autograd enabled, off the CPU or for M above ``MAX_ROWS`` (prefill) the stock
``F.linear`` runs, so training is untouched. Every method and the ``ar`` baseline get the same
kernel (it is a property of the loaded pair, recorded in its fingerprint), so speedups stay fair.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

KERNELS = ("auto", "stock", "weight_stationary", "packed")
MAX_ROWS = 64  # above this (prompt prefill) the stock GEMM is as fast and better tested


class WeightStationaryLinear(nn.Linear):
    """``nn.Linear`` computing ``(W @ xᵀ)ᵀ`` at inference on CPU for ≤ ``MAX_ROWS`` rows."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [..., I]
        rows = x.numel() // x.shape[-1]
        if torch.is_grad_enabled() or x.device.type != "cpu" or rows > MAX_ROWS:
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(rows, x.shape[-1])  # [M, I]
        cols = torch.cat([flat, flat]) if rows == 1 else flat  # [max(M, 2), I]
        # row-major again: a transposed view would send attention (strided q/k/v) and the
        # elementwise ops down their slow strided paths
        out = torch.mm(self.weight, cols.t())[:, :rows].t().contiguous()  # [M, O]
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], out.shape[-1])


class PackedLinear(WeightStationaryLinear):
    """``weight_stationary`` for 1–2 rows, a oneDNN-packed copy of the weight for 3–``MAX_ROWS``.

    The MKL GEMM behind ``torch.mm`` has no efficient path for 3–8 columns; oneDNN's prepacked
    (blocked) weight layout keeps a 3–8-token verify forward close to the cost of reading the
    weights once. The packed copy is made at the first inference call and remade if the weight
    changes (its version counter); it doubles the memory of the linear weights.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [..., I]
        rows = x.numel() // x.shape[-1]
        if (
            rows <= 2
            or rows > MAX_ROWS
            or torch.is_grad_enabled()
            or x.device.type != "cpu"
            or self.weight.dtype != torch.float32
            or not torch.backends.mkldnn.is_available()
        ):
            return super().forward(x)
        key = (self.weight.data_ptr(), self.weight._version)
        if getattr(self, "_packed_key", None) != key:
            self._packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), 8)
            self._packed_key = key
        flat = x.reshape(rows, x.shape[-1]).contiguous()  # [M, I]
        out = torch.ops.mkldnn._linear_pointwise(flat, self._packed, self.bias, "none", [], "")
        return out.reshape(*x.shape[:-1], out.shape[-1])  # [..., O]


def apply_linear_kernel(model: nn.Module | None, kernel: str) -> int:
    """Switch every plain ``nn.Linear`` of ``model`` to ``kernel`` in place; returns how many.

    Args:
        model: a model (``None`` is allowed: nothing to do).
        kernel: ``stock``, ``weight_stationary`` or ``packed`` (``auto`` is resolved by
            ``specdec.models.kernel_probe.choose_linear_kernel``).
    """
    if model is None:
        return 0
    if kernel not in KERNELS[1:]:
        raise ValueError(f"linear kernel must be one of {list(KERNELS[1:])}, got {kernel!r}")
    classes = {
        "stock": nn.Linear,
        "weight_stationary": WeightStationaryLinear,
        "packed": PackedLinear,
    }
    new_cls = classes[kernel]
    swapped = 0
    for module in model.modules():
        if type(module) in classes.values() and type(module) is not new_cls:
            module.__class__ = new_cls
            module.__dict__.pop("_packed", None)  # a packed copy of the weight (PackedLinear)
            module.__dict__.pop("_packed_key", None)
            swapped += 1
    return swapped
