"""Share of decoding wall time spent outside model forwards (Python loop, verification, cache work).

For each method (``ar``, ``sps``) the script generates on a few prompts and compares the decode wall
time with the summed forward times from the ``CachedLM`` forward logs:

    overhead = (decode_s − Σ forward seconds) / decode_s

Usage:
    python scripts/bench_overhead.py                      # SmolLM2 pair (model=smollm2)
    python scripts/bench_overhead.py --model tiny --max-new 64
    python scripts/bench_overhead.py --override model.draft=truncated   # any Hydra override
"""

from __future__ import annotations

import argparse

from hydra.utils import instantiate

from specdec.bench.run.runner import build_method
from specdec.config import compose_config
from specdec.data.prompts import encode_turn
from specdec.engine import generate
from specdec.metrics import summarize
from specdec.sampling import TorchCoins

PROMPTS = [
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast and bakes muffins with four. "
    "She sells the rest for $2 each. How much does she make every day?",
    "Write a Python function that checks whether a string is a palindrome.",
    "Give three tips for staying healthy.",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--methods", default="ar,sps")
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--max-new", type=int, default=96)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--override", action="append", default=[], help="extra Hydra overrides")
    args = ap.parse_args()
    base = [f"model={args.model}", f"sampling.temperature={args.temperature}", *args.override]
    cfgs = {
        m: compose_config(
            "eval",
            [*base, f"method={m}"] + ([f"drafter.policy.gamma={args.gamma}"] if m != "ar" else []),
        )
        for m in args.methods.split(",")
    }
    pair = instantiate(next(iter(cfgs.values())).model)
    print(
        f"{'method':>8} {'tokens':>7} {'decode s':>9} {'forward s':>10} {'overhead':>9} "
        f"{'tok/s':>7} {'BE':>6}"
    )
    for method, cfg in cfgs.items():
        m = build_method(cfg, pair)
        target, drafter, verifier, sampling = m.target, m.drafter, m.verifier, m.sampling
        stats = []
        for i, text in enumerate([PROMPTS[0], *PROMPTS]):  # the first run is warm-up
            ids = encode_turn(
                pair.tokenizer, [{"role": "user", "content": text}], chat_template=True
            )
            out = generate(
                ids,
                target,
                drafter,
                verifier,
                sampling=sampling,
                coins=TorchCoins(i),
                max_new_tokens=args.max_new,
            )
            if i:
                stats.append(out.stats)
        decode = sum(s.decode_s for s in stats)
        forward = sum(f.seconds for s in stats for f in s.forwards)
        m = summarize(stats)
        print(
            f"{method:>8} {m['new_tokens']:>7} {decode:>9.2f} {forward:>10.2f} "
            f"{(decode - forward) / decode:>8.1%} {m['tokens_per_s']:>7.1f} "
            f"{m['block_efficiency']:>6.2f}"
        )


if __name__ == "__main__":
    main()
