"""Teacher-forced greedy agreement of SmolLM2 drafts with the target on its own eval answers.

Under greedy decoding every speculative method emits the target's greedy continuation, and the
draft is asked for the next token of a prefix of it. So the share of positions where the draft's
argmax equals the target's greedy token (teacher forcing on that continuation) is the per-token
greedy acceptance ``α`` that decides what a chain draft buys (``E[tokens per target call] =
(1 - α^(γ+1)) / (1 - α)`` if tokens were independent). It costs one target generation per prompt
(shared by all drafts) and one draft forward per prompt and draft, so it compares drafts and
checkpoints in seconds, without the timing noise of a decoding benchmark.

    python scripts/draft_agreement.py --drafts specdec/assets/draft_lm/smollm2 outputs/run/export
        [--datasets gsm8k alpaca humaneval] [--prompts 10] [--max-new 96] [--threads 2]
"""

from __future__ import annotations

import argparse
import os

import torch

from specdec.data.prompts import encode_turn, load_jsonl_prompts
from specdec.models.reduced_draft import load_draft
from specdec.models.smollm2 import smollm2_pair

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@torch.inference_mode()
def greedy_answer(target, ids: list[int], max_new: int, eos: int) -> list[int]:
    """The target's greedy continuation of ``ids`` (cut after EOS)."""
    x = torch.tensor([ids])
    out = target.generate(
        input_ids=x,
        attention_mask=torch.ones_like(x),
        do_sample=False,
        max_new_tokens=max_new,
        eos_token_id=eos,
        pad_token_id=eos,
    )
    return out[0, len(ids) :].tolist()


@torch.inference_mode()
def agreement(draft, ids: list[int], answer: list[int]) -> tuple[int, int]:
    """``(matches, positions)``: the draft's argmax vs ``answer`` under teacher forcing."""
    seq = torch.tensor([ids + answer])  # [1, P + A]
    logits = draft(input_ids=seq).logits[0, len(ids) - 1 : -1]  # [A, V] predicting answer tokens
    hits = int((logits.argmax(-1) == torch.tensor(answer)).sum())
    return hits, len(answer)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--drafts",
        nargs="+",
        default=[os.path.join(ROOT, "specdec", "assets", "draft_lm", "smollm2")],
    )
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    p.add_argument("--datasets", nargs="+", default=["gsm8k", "alpaca", "humaneval"])
    p.add_argument("--prompts", type=int, default=10)
    p.add_argument("--max-new", type=int, default=96)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    pair = smollm2_pair(draft="none")
    tok, eos = pair.tokenizer, pair.tokenizer.eos_token_id
    drafts = {d: load_draft(d, pair.target, tokenizer=tok) for d in args.drafts}
    print(
        f"{'dataset':10s} "
        + " ".join(f"{os.path.basename(os.path.normpath(d)):>24s}" for d in drafts)
        + "   positions"
    )
    for name in args.datasets:
        path = os.path.join(args.data, name, "eagle_question.jsonl")
        prompts = load_jsonl_prompts(path, name, limit=args.prompts)
        totals = dict.fromkeys(drafts, 0)
        positions = 0
        for prompt in prompts:
            # 1. The target's greedy answer (what every lossless greedy method emits).
            ids = encode_turn(
                tok, [{"role": "user", "content": prompt.turns[0]}], chat_template=True
            )
            answer = greedy_answer(pair.target, ids, args.max_new, eos)
            # 2. Each draft's argmax at every answer position, teacher-forced.
            for d, net in drafts.items():
                hits, n = agreement(net, ids, answer)
                totals[d] += hits
            positions += len(answer)
        print(
            f"{name:10s} "
            + " ".join(f"{totals[d] / max(positions, 1):24.3f}" for d in drafts)
            + f"   {positions}",
            flush=True,
        )


if __name__ == "__main__":
    main()
