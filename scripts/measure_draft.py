"""Measure a SmolLM2 draft: acceptance per γ and temperature, sps vs ar wall clock, modeled time.

    python scripts/measure_draft.py --datasets gsm8k --prompts 10 --gammas 2 3 4 5
    python scripts/measure_draft.py --datasets gsm8k alpaca humaneval --gammas 4 --temperature 1
    python scripts/measure_draft.py --ar --cost --gammas 4      # speedup and modeled_s vs wall_s
    python scripts/measure_draft.py --draft-path outputs/.../draft   # an exported checkpoint

Prompts are the EAGLE eval question files (``<data>/<dataset>/eagle_question.jsonl``), first turn,
formatted with the chat template like the eval. Prints one line per (dataset, method).
"""

from __future__ import annotations

import argparse
import os

import torch

from specdec.bench.run.calibration import calibrate
from specdec.data.prompts import encode_turn, load_jsonl_prompts
from specdec.drafters import EmptyDrafter, ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.models.smollm2 import smollm2_pair
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import Tokenwise

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(pair, target, draft, prompts, gamma, temperature, max_new, cost):
    """Totals over the prompts for one method (gamma 0 = ar)."""
    sampling = Sampling(temperature=temperature)
    drafter = EmptyDrafter() if gamma == 0 else ModelDrafter(draft, Fixed(gamma))
    tot = {
        "tokens": 0,
        "drafted": 0,
        "accepted": 0,
        "steps": 0,
        "wall": 0.0,
        "modeled": 0.0,
        "draft_s": 0.0,
    }
    for i, ids in enumerate(prompts):
        out = generate(
            ids,
            target,
            drafter,
            Tokenwise(),
            sampling=sampling,
            coins=TorchCoins(1000 + i),
            max_new_tokens=max_new,
            stop_ids=[pair.tokenizer.eos_token_id],
        )
        tot["wall"] += out.stats.decode_s
        tot["tokens"] += out.stats.new_tokens
        tot["drafted"] += out.stats.drafted
        tot["accepted"] += out.stats.accepted
        tot["steps"] += out.stats.target_forwards
        tot["draft_s"] += out.stats.draft_s
        if cost is not None:
            tot["modeled"] += cost(out.stats.forwards)
    return tot


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    p.add_argument("--datasets", nargs="+", default=["gsm8k"])
    p.add_argument("--prompts", type=int, default=10)
    p.add_argument("--max-new", type=int, default=128)
    p.add_argument("--gammas", type=int, nargs="+", default=[4])
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--draft", default="trained")
    p.add_argument("--draft-path", default=None)
    p.add_argument("--ar", action="store_true", help="also run ar (speedup)")
    p.add_argument("--cost", action="store_true", help="calibrate the cost model (modeled_s)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--kernel", default="auto", help="linear_kernel of the pair (kernels.py)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = smollm2_pair(
        draft=args.draft, draft_path=args.draft_path, placement={"linear_kernel": args.kernel}
    )
    target, draft = CachedLM(pair.target), CachedLM(pair.draft, role="draft")
    cost = calibrate(target, draft, max_new=max(args.gammas) + 1) if args.cost else None
    if cost is not None:
        print("cost table (ms):", cost.describe())
    print(
        f"draft={pair.info['draft']} T={args.temperature} max_new={args.max_new} "
        f"threads={torch.get_num_threads()}"
    )
    for name in args.datasets:
        path = os.path.join(args.data, name, "eagle_question.jsonl")
        prompts = [
            encode_turn(
                pair.tokenizer, [{"role": "user", "content": q.turns[0]}], chat_template=True
            )
            for q in load_jsonl_prompts(path, name, limit=args.prompts + 1)
        ]
        run(pair, target, draft, prompts[:1], args.gammas[0], args.temperature, 8, None)  # warm
        prompts = prompts[1:]
        base = None
        if args.ar:
            base = run(pair, target, draft, prompts, 0, args.temperature, args.max_new, cost)
            print(
                f"{name:9s} ar      tok={base['tokens']:5d} "
                f"tok/s={base['tokens'] / base['wall']:6.2f} wall={base['wall']:7.1f}s "
                f"modeled={base['modeled']:7.1f}s",
                flush=True,
            )
        for g in args.gammas:
            t = run(pair, target, draft, prompts, g, args.temperature, args.max_new, cost)
            alpha = t["accepted"] / max(t["drafted"], 1)
            line = (
                f"{name:9s} sps g={g} tok={t['tokens']:5d} accept={alpha:.3f} "
                f"tok/step={t['tokens'] / max(t['steps'], 1):.2f} "
                f"tok/s={t['tokens'] / t['wall']:6.2f} wall={t['wall']:7.1f}s "
                f"modeled={t['modeled']:7.1f}s draft_ms/tok="
                f"{1000 * t['draft_s'] / max(t['drafted'], 1):.1f}"
            )
            if base is not None:
                ratio = (t["tokens"] / t["wall"]) / (base["tokens"] / base["wall"])
                line += f" speedup={ratio:.3f}"
                if cost is not None:  # one table prices both runs: load drift cancels
                    priced = (t["tokens"] / t["modeled"]) / (base["tokens"] / base["modeled"])
                    line += f" modeled_speedup={priced:.3f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
