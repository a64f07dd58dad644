"""Two checks of ``scripts/gpu_check.sh`` on decoding speed and precision, one subcommand each.

``graphs``: ``ar`` on a pair with the static cache, eager (``model.cuda_graphs=false``) and
replayed (``model.cuda_graphs=true``: CUDA graphs on cuda, the fixed-address path elsewhere), plus
the dynamic cache for reference. Prints each path's per-step milliseconds (decode time over
decoding steps, after one untimed generation that captures the graphs) and its replay / fallback
counters; fails (exit 1) when the replayed tokens differ from the eager static path's (the same
kernels on the same shapes: they must agree token for token). The dynamic path's agreement is
reported, not asserted (other shapes may round differently in low precision).

``dtypes``: ``ar`` in float32 and in bfloat16 on the same prompts: the fraction of identical
tokens (position by position) and the first divergence per prompt, reported, never asserted
(bfloat16 rounding legitimately flips near-tied argmaxes).

Run ``python scripts/gpu_graphs.py <subcommand> --help``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # this checkout's specdec, then gpu_check

from gpu_check import PROMPTS, compose, first_difference  # noqa: E402

PATHS = {
    "dynamic": ["model.static_cache=false"],
    "static_eager": ["model.static_cache=true", "model.cuda_graphs=false"],
    "static_graphs": ["model.static_cache=true", "model.cuda_graphs=true"],
}


def run_ar(overrides: list[str], max_new_tokens: int, profile: int = 0) -> tuple[dict, float, dict]:
    """``ar``'s tokens per prompt, its per-step ms (after a warm-up generation) and counters;
    ``profile > 0`` prints the ``profile`` costliest kernels / ops of one more generation
    (``torch.profiler``, device time on CUDA, CPU time elsewhere)."""
    import torch
    from hydra.utils import instantiate

    from specdec.bench.run.method import build_method
    from specdec.engine import generate
    from specdec.sampling import TorchCoins

    cfg = compose([*overrides, "method=ar", "sampling.temperature=0"])
    pair = instantiate(cfg.model)
    m = build_method(cfg, pair)

    def one(prompt: str):
        return generate(
            pair.tokenizer.encode(prompt),
            m.target,
            m.drafter,
            m.verifier,
            sampling=m.sampling,
            coins=TorchCoins(0),
            max_new_tokens=max_new_tokens,
        )

    one(PROMPTS[0])  # warm-up: kernels loaded, every decode bucket captured
    tokens, seconds, steps, counters = {}, 0.0, 0, {}
    for prompt in PROMPTS:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        gen = one(prompt)
        tokens[prompt] = gen.tokens
        seconds += gen.stats.decode_s
        steps += len(gen.stats.accepted_per_step)
        for key, value in gen.stats.counters.items():
            counters[key] = counters.get(key, 0) + value
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as profiler

        cuda = torch.cuda.is_available()
        activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
        with profiler(activities=activities) as prof:
            one(PROMPTS[0])
            if cuda:
                torch.cuda.synchronize()
        key = "cuda_time_total" if cuda else "cpu_time_total"
        print(prof.key_averages().table(sort_by=key, row_limit=profile))
    return tokens, 1000 * seconds / max(steps, 1), counters


def agreement(want: dict, got: dict) -> tuple[float, list[int | None]]:
    """Fraction of identical tokens over every prompt (position by position) and the first
    difference per prompt (``None``: identical)."""
    same = sum(a == b for p in want for a, b in zip(want[p], got[p]))
    total = sum(max(len(want[p]), len(got[p])) for p in want)
    return same / max(total, 1), [first_difference(want[p], got[p]) for p in want]


def graphs(args: argparse.Namespace) -> int:
    """Eager vs replayed ``ar``: per-step ms and greedy identity."""
    base = [
        f"model={args.pair}",
        "benchmark=tiny",
        f"device={args.device}",
        f"model.placement.dtype={args.dtype}",
        *args.overrides,
    ]
    print(
        f"graphs: ar on {args.pair}, device={args.device}, {args.dtype}, "
        f"{len(PROMPTS)} prompts x {args.max_new_tokens} tokens"
    )
    results = {
        name: run_ar(
            [*base, *extra], args.max_new_tokens, args.profile if name == "static_graphs" else 0
        )
        for name, extra in PATHS.items()
    }
    for name, (_, ms, counters) in results.items():
        shown = {k: v for k, v in counters.items() if k.startswith(("graph_", "cache_"))}
        print(f"  {name:14s} {ms:8.3f} ms/step  {shown}")
    eager, replayed = results["static_eager"][0], results["static_graphs"][0]
    same, firsts = agreement(eager, replayed)
    dyn_same, _ = agreement(results["dynamic"][0], replayed)
    speedup = results["static_eager"][1] / max(results["static_graphs"][1], 1e-9)
    print(
        f"  graphs vs static eager: {same:.3f} identical tokens (first differences {firsts}); "
        f"speed-up {speedup:.2f}x"
    )
    print(f"  graphs vs dynamic: {dyn_same:.3f} identical tokens (reported)")
    ok = same == 1.0 and results["static_graphs"][2].get("graph_replays", 0) > 0
    print("graphs: " + ("ok" if ok else "FAILED (replayed tokens differ, or nothing replayed)"))
    return 0 if ok else 1


def dtypes(args: argparse.Namespace) -> int:
    """``ar`` in float32 vs bfloat16: the fraction of identical tokens (reported)."""
    base = [f"model={args.pair}", "benchmark=tiny", f"device={args.device}", *args.overrides]
    f32, ms32, _ = run_ar([*base, "model.placement.dtype=float32"], args.max_new_tokens)
    bf16, ms16, _ = run_ar([*base, "model.placement.dtype=bfloat16"], args.max_new_tokens)
    same, firsts = agreement(f32, bf16)
    print(
        f"dtypes: ar on {args.pair}, device={args.device}: bfloat16 vs float32 "
        f"{same:.3f} identical tokens (first differences per prompt {firsts}); "
        f"{ms32:.3f} vs {ms16:.3f} ms/step"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("graphs", help="eager vs replayed ar: ms per step, greedy identity")
    p.add_argument("--dtype", default="float32")
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="print the N costliest kernels of one replayed generation",
    )
    p.set_defaults(run=graphs)
    q = sub.add_parser("dtypes", help="ar in float32 vs bfloat16: identical-token fraction")
    q.set_defaults(run=dtypes)
    for parser_ in (p, q):
        parser_.add_argument(
            "overrides", nargs="*", help="extra config overrides (model.draft=none, ...)"
        )
        parser_.add_argument("--pair", default="tiny")
        parser_.add_argument("--device", default="cuda")
        parser_.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
