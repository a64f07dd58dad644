"""Forward cost per number of new tokens per CPU linear kernel (stock, weight-stationary, packed).

Loads the SmolLM2 pair once, then for each kernel (``specdec/models/kernels.py``) runs the cost
model's calibration (``specdec.bench.run.calibration.calibrate``: median of repeated cached
forwards at a reference context) and prints milliseconds per forward of n new tokens for target
and draft, and the verify/step ratio T(n)/T(1) that decides how much acceptance SD needs to pay.

Usage:
    python scripts/bench_kernels.py [--max-new 8] [--repeats 7] [--context 200] [--threads 2]
        [--kernels stock weight_stationary packed]
"""

from __future__ import annotations

import argparse

import torch

from specdec.bench.run.calibration import calibrate
from specdec.lm import CachedLM
from specdec.models.attention import use_cpu_attention
from specdec.models.kernels import KERNELS, apply_linear_kernel
from specdec.models.smollm2 import smollm2_pair


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--max-new", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--context", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--draft", default="trained", help="trained | truncated")
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS[1:]), choices=KERNELS[1:])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    pair = smollm2_pair(draft=args.draft, placement={"linear_kernel": "stock"})
    target, draft = CachedLM(pair.target, "target"), CachedLM(pair.draft, "draft")
    sizes = range(1, args.max_new + 1)
    rows = {}
    for kernel in [*args.kernels, *args.kernels]:  # two interleaved passes
        apply_linear_kernel(pair.target, kernel)
        apply_linear_kernel(pair.draft, kernel)
        for model in (pair.target, pair.draft):  # attention as make_pair sets it per kernel
            model.set_attn_implementation("sdpa")
            if kernel != "stock":
                use_cpu_attention(model)
        table = calibrate(
            target,
            draft,
            max_new=args.max_new,
            repeats=args.repeats,
            ref_context=args.context,
            far_context=args.context + 256,
        )
        for role, times in table.times.items():
            prev = rows.setdefault((role, kernel), {})
            for n in sizes:  # keep the faster of the two passes (less noise from the machine)
                prev[n] = min(prev.get(n, float("inf")), 1000 * times[n])
    head = " ".join(f"{'n=' + str(n):>7}" for n in sizes)
    print(f"{'role':>6} {'kernel':>18} {head}   T(4)/T(1)")
    for (role, kernel), ms in rows.items():
        cells = " ".join(f"{ms[n]:7.1f}" for n in sizes)
        ratio = ms[min(4, args.max_new)] / ms[1]
        print(f"{role:>6} {kernel:>18} {cells}   {ratio:.2f}")
    for kernel in args.kernels:
        t1, d1 = rows[("target", kernel)][1], rows[("draft", kernel)][1]
        print(f"{kernel}: draft/target cost per token {d1 / t1:.3f} (1/{t1 / d1:.1f})")


if __name__ == "__main__":
    main()
