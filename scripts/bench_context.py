"""Prefill and per-step cost of each method against the context length, beside ``ar``'s.

For every method preset and every context length ``L`` the script generates ``--new`` tokens
after an ``L``-token prompt (the repository's README as text, cut to ``L`` tokens; greedy) and
splits the time into

* prefill: the target's prompt forwards (``target``) and the rest of the prefill (``draft``: the
  drafter's catch-up on the prompt, e.g. a feature drafter's forward over every prompt position);
* per decoding step: ``draft`` (the drafter's propose, catch-up included), ``verify`` (the target's
  forwards) and ``other`` (the rest of the loop: verification rule, cache bookkeeping, commit).

Columns ``d/t pre`` = draft prefill / target prefill, ``d/ar step`` = draft ms per step / ``ar``'s
step (its verify ms) at the same length, and ``d grow`` / ``ar grow`` = the draft's (``ar``'s)
per-step ms at ``L`` over that at the shortest length: a drafter whose cost grows faster with the
context than the target's step shows ``d grow > ar grow``. On a shared machine absolute times move
with the load; ratios within one run are the informative part (the 1-minute load is printed).

Usage:
    python scripts/bench_context.py                                # SmolLM2 pair, 256..4k tokens
    python scripts/bench_context.py --methods ar,specblock --contexts 512,2048 --new 16
    python scripts/bench_context.py --model tiny --contexts 32,64 --new 4   # a quick check
    python scripts/bench_context.py --threads 1     # a shared machine: no two-thread spinning
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

import torch
from hydra.utils import instantiate

from specdec.bench.run.e2e import prefill_split
from specdec.bench.run.runner import build_method
from specdec.config import compose_config
from specdec.engine import generate
from specdec.paths import ROOT
from specdec.sampling import TorchCoins

METHODS = "ar,sps,pld,eagle3,specblock"
CONTEXTS = "256,512,1024,2048,4096"


@dataclass(frozen=True)
class Cost:
    """One generation's costs (seconds; per step: milliseconds)."""

    prefill_target: float
    prefill_draft: float
    draft_ms: float
    verify_ms: float
    other_ms: float
    tau: float


def measure(method, ids: list[int], new: int) -> Cost:
    """Generate ``new`` tokens greedily after ``ids``; the prefill split and per-step costs."""
    log = method.target.forward_log
    mark = len(log)
    out = generate(
        ids,
        method.target,
        method.drafter,
        method.verifier,
        sampling=method.sampling,
        coins=TorchCoins(0),
        max_new_tokens=new,
    )
    s = out.stats
    split = prefill_split(log[mark:], s.prefill_s)
    steps = max(s.target_forwards, 1)
    verify = sum(f.seconds for f in log[mark:] if f.step >= 0)
    return Cost(
        split["prefill_target_s"],
        split["prefill_draft_s"],
        1e3 * s.draft_s / steps,
        1e3 * verify / steps,
        1e3 * (s.decode_s - s.draft_s - verify) / steps,
        s.new_tokens / steps,
    )


def prompt_ids(tokenizer, length: int) -> list[int]:
    """``length`` token ids of the README's and the docs' text (repeated if it is shorter)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(p.read_text() for p in pages)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    while len(ids) < length:
        ids = ids + ids
    return ids[:length]


HEAD = (
    f"{'method':>10} {'context':>7} {'pre tgt s':>9} {'pre drf s':>9} {'d/t pre':>7} "
    f"{'draft ms':>8} {'verify ms':>9} {'other ms':>8} {'tau':>5} {'d/ar step':>9} "
    f"{'d grow':>6} {'ar grow':>7}"
)


def _div(a: float | None, b: float | None) -> float:
    return a / b if a is not None and b else float("nan")


def line(costs: dict[str, dict[int, Cost]], method: str, length: int) -> str:
    """The table's line of ``method`` at ``length`` (ratios against what ``costs`` holds so far:
    ``ar`` at the same length, the method's and ``ar``'s shortest length)."""
    c, by_len, ar = costs[method][length], costs[method], costs.get("ar", {})
    first = min(by_len)
    ar_step = ar[length].verify_ms if length in ar else None
    ar_first = ar[first].verify_ms if first in ar else None
    return (
        f"{method:>10} {length:>7} {c.prefill_target:>9.3f} {c.prefill_draft:>9.3f} "
        f"{_div(c.prefill_draft, c.prefill_target):>7.2f} {c.draft_ms:>8.1f} "
        f"{c.verify_ms:>9.1f} {c.other_ms:>8.1f} {c.tau:>5.2f} "
        f"{_div(c.draft_ms, ar_step):>9.2f} {_div(c.draft_ms, by_len[first].draft_ms):>6.2f} "
        f"{_div(ar_step, ar_first):>7.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--contexts", default=CONTEXTS, help="prompt lengths in tokens")
    ap.add_argument("--new", type=int, default=16, help="new tokens per generation")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (1 on a machine shared by other jobs)",
    )
    ap.add_argument("--override", action="append", default=[], help="extra Hydra overrides")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    lengths = [int(x) for x in args.contexts.split(",")]
    base = [f"model={args.model}", "sampling.temperature=0.0", *args.override]
    cfgs = {m: compose_config("eval", [*base, f"method={m}"]) for m in args.methods.split(",")}
    pair = instantiate(next(iter(cfgs.values())).model)
    costs: dict[str, dict[int, Cost]] = {}
    print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(HEAD, flush=True)
    for name, cfg in cfgs.items():
        # 1. Build the method, 2. warm up once at the shortest length, 3. measure every length,
        #    printing each line as it comes (``ar`` first gives the others their ratios).
        method = build_method(cfg, pair)
        measure(method, prompt_ids(pair.tokenizer, min(lengths)), args.new)
        costs[name] = {}
        for n in sorted(lengths):
            costs[name][n] = measure(method, prompt_ids(pair.tokenizer, n), args.new)
            print(line(costs, name, n), flush=True)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
