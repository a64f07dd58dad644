"""Our greedy ``sps`` against transformers' assisted generation with the same pair, γ and prompts.

    python scripts/bench_vs_hf.py                       # SmolLM2 + shipped draft, GSM8K, γ=4
    python scripts/bench_vs_hf.py --draft truncated --gamma 3 --prompts 3 --max-new 64

Runs are interleaved per prompt (ours, HF, ours, HF, ...) after one warm-up each. transformers 5.x
reads ``num_assistant_tokens`` and its schedule from the *draft's* ``generation_config`` (kwargs
to ``generate`` are ignored), so we set them there: constant schedule, γ tokens. Our reduced-
vocabulary draft is a ``PreTrainedModel`` + ``GenerationMixin`` whose logits cover the full
vocabulary (``-inf`` outside its token map), so HF can use it as the assistant directly.
Prints tokens/s of each, the ratio, new tokens per target call, and whether outputs are identical.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from specdec.data.prompts import encode_turn, load_jsonl_prompts
from specdec.drafters import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.models.smollm2 import smollm2_pair
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import Tokenwise

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ours(pair, ids: list[int], gamma: int, max_new: int) -> tuple[list[int], float, int]:
    sampling = Sampling(temperature=0.0)
    drafter = ModelDrafter(CachedLM(pair.draft, role="draft"), Fixed(gamma), sampling)
    start = time.perf_counter()
    out = generate(ids, CachedLM(pair.target), drafter, Tokenwise(), sampling=sampling,
                   coins=TorchCoins(0), max_new_tokens=max_new,
                   stop_ids=[pair.tokenizer.eos_token_id])
    return out.tokens, time.perf_counter() - start, out.stats.target_forwards


def hf(pair, ids: list[int], max_new: int, calls: list[int]) -> tuple[list[int], float, int]:
    calls.clear()
    x = torch.tensor([ids])
    start = time.perf_counter()
    with torch.inference_mode():
        gen = pair.target.generate(input_ids=x, attention_mask=torch.ones_like(x),
                                   assistant_model=pair.draft, do_sample=False,
                                   max_new_tokens=max_new,
                                   eos_token_id=pair.tokenizer.eos_token_id,
                                   pad_token_id=pair.tokenizer.eos_token_id)
    seconds = time.perf_counter() - start
    return gen[0, len(ids):].tolist(), seconds, len(calls) - 1  # minus the prefill call


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "gsm8k",
                                                       "eagle_question.jsonl"))
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--max-new", type=int, default=128)
    parser.add_argument("--draft", default="trained", choices=["trained", "truncated"])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = smollm2_pair(draft=args.draft)
    # transformers 5.x takes the assistant schedule from the draft's generation_config
    pair.draft.generation_config.num_assistant_tokens = args.gamma
    pair.draft.generation_config.num_assistant_tokens_schedule = "constant"
    pair.draft.generation_config.assistant_confidence_threshold = 0.0
    calls: list[int] = []
    pair.target.register_forward_hook(lambda *_: calls.append(1))
    prompts = load_jsonl_prompts(args.data, "bench", limit=args.prompts + 1)
    encoded = [encode_turn(pair.tokenizer, [{"role": "user", "content": p.turns[0]}],
                           chat_template=True) for p in prompts]
    ours(pair, encoded[0], args.gamma, 16)  # warm-ups
    hf(pair, encoded[0], 16, calls)
    rows = {"ours": [0, 0.0, 0], "hf": [0, 0.0, 0]}
    same = 0
    for ids in encoded[1:]:
        a, ta, fa = ours(pair, ids, args.gamma, args.max_new)
        b, tb, fb = hf(pair, ids, args.max_new, calls)
        for key, (toks, secs, fwd) in (("ours", (a, ta, fa)), ("hf", (b, tb, fb))):
            rows[key][0] += len(toks)
            rows[key][1] += secs
            rows[key][2] += fwd
        same += a == b
        print(f"prompt: ours {len(a)} tok {ta:.2f}s ({fa} target calls) | hf {len(b)} tok "
              f"{tb:.2f}s ({fb} calls) | identical={a == b}", flush=True)
    tps = {k: v[0] / v[1] for k, v in rows.items()}
    per_call = {k: v[0] / max(v[2], 1) for k, v in rows.items()}
    print(f"\ngamma={args.gamma} greedy, {len(encoded) - 1} prompts, draft={args.draft}, "
          f"threads={torch.get_num_threads()}")
    for k in rows:
        print(f"{k:5s}: {tps[k]:7.2f} tokens/s  {per_call[k]:.2f} tokens per target call")
    print(f"ratio ours/hf: {tps['ours'] / tps['hf']:.3f}   identical outputs: {same}/"
          f"{len(encoded) - 1}")


if __name__ == "__main__":
    main()
