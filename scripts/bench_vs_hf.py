"""Our greedy ``sps`` against transformers' assisted generation with the same pair, γ and prompts.

    python scripts/bench_vs_hf.py                       # SmolLM2 + shipped draft, GSM8K, γ=4
    python scripts/bench_vs_hf.py --draft truncated --gamma 3 --prompts 3 --max-new 64

Runs are interleaved per prompt (ours, HF, ours, HF, ...) after one warm-up each. transformers 5.x
reads ``num_assistant_tokens`` and its schedule from the *draft's* ``generation_config`` (kwargs
to ``generate`` are ignored), so we set them there: constant schedule, γ tokens. Our reduced-
vocabulary draft is a ``PreTrainedModel`` + ``GenerationMixin`` whose logits cover the full
vocabulary (``-inf`` outside its token map), so HF can use it as the assistant directly.
Prints tokens/s of each, the ratio, new tokens per target call, and whether outputs are identical.

Two HF rows (``--hf-kernels``): ``hf`` runs on the very models ours uses, so it shares this
project's CPU kernels (``specdec/models/kernels.py``, ``specdec/models/attention.py``) and the ratio
isolates the decoding loop; ``hf_stock`` loads the pair a second time with ``linear_kernel=stock``
(stock ``nn.Linear`` and transformers' ``sdpa``), i.e. assisted generation as a transformers user
runs it.
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
    drafter = ModelDrafter(CachedLM(pair.draft, role="draft"), Fixed(gamma))
    start = time.perf_counter()
    out = generate(
        ids,
        CachedLM(pair.target),
        drafter,
        Tokenwise(),
        sampling=sampling,
        coins=TorchCoins(0),
        max_new_tokens=max_new,
        stop_ids=[pair.tokenizer.eos_token_id],
    )
    return out.tokens, time.perf_counter() - start, out.stats.target_forwards


def hf(pair, ids: list[int], max_new: int, calls: list[int]) -> tuple[list[int], float, int]:
    calls.clear()
    x = torch.tensor([ids])
    start = time.perf_counter()
    with torch.inference_mode():
        gen = pair.target.generate(
            input_ids=x,
            attention_mask=torch.ones_like(x),
            assistant_model=pair.draft,
            do_sample=False,
            max_new_tokens=max_new,
            eos_token_id=pair.tokenizer.eos_token_id,
            pad_token_id=pair.tokenizer.eos_token_id,
        )
    seconds = time.perf_counter() - start
    return gen[0, len(ids) :].tolist(), seconds, len(calls) - 1  # minus the prefill call


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=os.path.join(ROOT, "..", "shared", "data", "gsm8k", "eagle_question.jsonl"),
    )
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--max-new", type=int, default=128)
    parser.add_argument("--draft", default="trained", choices=["trained", "truncated"])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument(
        "--hf-kernels",
        nargs="+",
        default=["same", "stock"],
        choices=["same", "stock"],
        help="HF rows: our kernels, stock kernels",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = smollm2_pair(draft=args.draft)
    hf_pairs = {
        ("hf" if k == "same" else "hf_stock"): (
            pair
            if k == "same"
            else smollm2_pair(draft=args.draft, placement={"linear_kernel": "stock"})
        )
        for k in args.hf_kernels
    }
    calls: list[int] = []
    for p in hf_pairs.values():
        # transformers 5.x takes the assistant schedule from the draft's generation_config
        p.draft.generation_config.num_assistant_tokens = args.gamma
        p.draft.generation_config.num_assistant_tokens_schedule = "constant"
        p.draft.generation_config.assistant_confidence_threshold = 0.0
        p.target.register_forward_hook(lambda *_: calls.append(1))
    prompts = load_jsonl_prompts(args.data, "bench", limit=args.prompts + 1)
    encoded = [
        encode_turn(pair.tokenizer, [{"role": "user", "content": p.turns[0]}], chat_template=True)
        for p in prompts
    ]
    ours(pair, encoded[0], args.gamma, 16)  # warm-ups
    for p in hf_pairs.values():
        hf(p, encoded[0], 16, calls)
    rows = {k: [0, 0.0, 0] for k in ["ours", *hf_pairs]}
    same = dict.fromkeys(hf_pairs, 0)
    for ids in encoded[1:]:
        runs = {"ours": ours(pair, ids, args.gamma, args.max_new)}  # interleaved per prompt
        runs.update({k: hf(p, ids, args.max_new, calls) for k, p in hf_pairs.items()})
        for key, (toks, secs, fwd) in runs.items():
            rows[key][0] += len(toks)
            rows[key][1] += secs
            rows[key][2] += fwd
        for k in hf_pairs:
            same[k] += runs[k][0] == runs["ours"][0]
        print(
            "prompt: "
            + " | ".join(
                f"{k} {len(t)} tok {s:.2f}s ({f} target calls)" for k, (t, s, f) in runs.items()
            ),
            flush=True,
        )
    tps = {k: v[0] / v[1] for k, v in rows.items()}
    per_call = {k: v[0] / max(v[2], 1) for k, v in rows.items()}
    print(
        f"\ngamma={args.gamma} greedy, {len(encoded) - 1} prompts, draft={args.draft}, "
        f"threads={torch.get_num_threads()}"
    )
    for k in rows:
        print(f"{k:8s}: {tps[k]:7.2f} tokens/s  {per_call[k]:.2f} tokens per target call")
    for k in hf_pairs:
        print(
            f"ratio ours/{k}: {tps['ours'] / tps[k]:.3f}   outputs identical to ours: "
            f"{same[k]}/{len(encoded) - 1}"
        )


if __name__ == "__main__":
    main()
