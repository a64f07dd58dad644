"""Exact comparison of verifiers on random context-dependent TableLM pairs (no sampling noise).

For every instance (V ∈ {2,3,4}, γ ∈ {1..5}, T ∈ {0.7, 1}, several seeds) and every verifier this
computes, with the enumeration harness through ``engine.generate`` (``specdec.testing.step``):

* the exact expected number of tokens one target call emits (block efficiency of a step);
* the exact total-variation distance between "one step, then target sampling" and the target's
  autoregressive joint over γ+1 tokens (0 up to rounding for a lossless verifier).

It prints, per verifier, the mean / min / max of the BE ratio against tokenwise on the same
instance and the max TV. Multi-draft rows (K=2 i.i.d. chains) run on the instances with γ ≤ 2 and
are compared with single-chain tokenwise on the same instance (they draft twice as many tokens).

    python scripts/exact_compare.py [--seeds 3] [--big 64] [--max-drafts 256] [--multi-max-gamma 2]

The default skips V=4, γ=5 (1024 drafts, ~30 s per verifier); ``--max-drafts 1024`` adds it.
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch

from specdec.drafters import ModelDrafter, MultiDraftDrafter
from specdec.drafters.policies import Fixed
from specdec.sampling import Sampling
from specdec.testing.enumeration import total_variation
from specdec.testing.step import complete, expected_emitted, one_step
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Blockwise, Hierarchical, RecursiveRejection, Tokenwise

PROMPT = [0, 1]
CHAIN = {
    "tokenwise": Tokenwise,
    "blockwise": Blockwise,
    "hsd (capped)": lambda: Hierarchical("capped"),
    "hsd_code (joint)": lambda: Hierarchical("joint"),
}
MULTI = {
    "multi2 rrs": RecursiveRejection,
    "multi2 blockwise": Blockwise,
    "multi2 hsd (capped)": lambda: Hierarchical("capped"),
    "multi2 hsd_code (joint)": lambda: Hierarchical("joint"),
}


def measure(verifier, drafter, target, sampling, gamma) -> tuple[float, float]:
    """(expected tokens per target call, TV to the target over γ+1 tokens)."""
    step = one_step(target, drafter, verifier, PROMPT, sampling, gamma + 1)
    got = complete(step, target, PROMPT, sampling, gamma + 1)
    want = ar_joint(target, PROMPT, gamma + 1, sampling)
    return expected_emitted(step), total_variation(got, want)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per small (V, γ, T)")
    parser.add_argument("--big", type=int, default=64, help="V^γ above this: one seed only")
    parser.add_argument("--max-drafts", type=int, default=256, help="skip V^γ above this")
    parser.add_argument("--multi-max-gamma", type=int, default=2, help="γ limit, multi rows")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny tensors: extra threads only add contention
    start = time.perf_counter()
    ratios: dict[str, list[float]] = {name: [] for name in [*CHAIN, *MULTI]}
    worst_tv: dict[str, float] = dict.fromkeys(ratios, 0.0)
    grid = itertools.product([2, 3, 4], range(1, 6), [0.7, 1.0], range(args.seeds))
    instances = 0
    for vocab, gamma, temperature, seed in grid:
        # 1. One random context-dependent pair per instance (big instances: fewer seeds).
        if vocab**gamma > args.max_drafts or (vocab**gamma > args.big and seed > 0):
            continue
        instances += 1
        sampling = Sampling(temperature=temperature)
        target = TableLM(vocab, 1000 * seed + 10 * vocab + gamma)
        draft = TableLM(vocab, 1000 * seed + 10 * vocab + gamma + 500, role="draft")
        # 2. Exact BE and TV per chain verifier; 3. multi-draft on small instances.
        base = None
        for name, make in CHAIN.items():
            be, tv = measure(make(), ModelDrafter(draft, Fixed(gamma)), target, sampling, gamma)
            base = be if base is None else base
            ratios[name].append(be / base)
            worst_tv[name] = max(worst_tv[name], tv)
        if gamma <= args.multi_max_gamma and vocab ** (2 * gamma) <= 256:
            for name, make in MULTI.items():
                drafter = MultiDraftDrafter(draft, Fixed(gamma), num_drafts=2)
                be, tv = measure(make(), drafter, target, sampling, gamma)
                ratios[name].append(be / base)
                worst_tv[name] = max(worst_tv[name], tv)
    print(
        f"{instances} instances (V in 2..4, gamma in 1..5, T in 0.7/1; {args.seeds} seeds if "
        f"V^gamma <= {args.big}, 1 seed up to {args.max_drafts}), "
        f"{time.perf_counter() - start:.0f} s"
    )
    print(
        f"| {'verifier':<24} | {'n':>4} | {'BE/tokenwise mean':>17} | {'min':>6} | {'max':>6} | "
        f"{'max TV':>9} |"
    )
    print(f"|{'-' * 26}|{'-' * 6}|{'-' * 19}|{'-' * 8}|{'-' * 8}|{'-' * 11}|")
    for name, values in ratios.items():
        if values:
            print(
                f"| {name:<24} | {len(values):>4} | {sum(values) / len(values):>17.4f} | "
                f"{min(values):>6.4f} | {max(values):>6.4f} | {worst_tv[name]:>9.2e} |"
            )


if __name__ == "__main__":
    main()
