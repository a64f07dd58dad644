"""Tokens/s of the data stage's batched decoder (``specdec.data.batch_decode``) on the SmolLM2
target, per batch size, against this CPU's roofline.

The prompts are the data stage's own (training prompts of the shared data, chat template, eval
prompts excluded), ``--prompts`` of them in hash order; every batch size decodes the same prompts
greedily for ``--max-new`` tokens. Printed per batch size: generated tokens/s, prompt+generated
tokens/s, seconds, and the load average before and after (other processes on the machine slow
it; measure when it is low).

Roofline: achievable GFLOP/s from a large fp32 matmul and GB/s from a large copy (read + write),
both measured here. Model cost: FLOPs/token = 2 * params + 4 * layers * context * hidden
(attention scores and weighted sum); bytes per decode step = the fp32 weights once (shared by the
batch) + each row's KV cache. FLOP bound = GFLOP/s / FLOPs per token; memory bound = batch /
(bytes per step / GB/s).

Usage:
    python scripts/bench_datagen.py [--batches 1 8 32 64] [--prompts 64] [--max-new 64]
        [--threads 2] [--stock 0]   # --stock B: also time transformers generate at batch B
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from specdec.data.batch_decode import generate_batched
from specdec.data.prompts import encode_turn
from specdec.data.training import training_prompts
from specdec.models.smollm2 import smollm2_pair


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0]


def gflops(n: int = 1024, repeats: int = 5) -> float:
    """Best-of-``repeats`` GFLOP/s of an ``n x n @ n x n`` fp32 matmul."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_time(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def gbps(mib: int = 512, repeats: int = 5) -> float:
    """Best-of-``repeats`` GB/s of copying a ``mib`` MiB fp32 tensor (bytes read + written)."""
    src = torch.empty(mib * 2**18)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = min(_time(lambda: dst.copy_(src)) for _ in range(repeats))
    return 2 * src.numel() * 4 / best / 1e9


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bounds(model, batch: int, context: int, flops_s: float, bytes_s: float) -> tuple[float, float]:
    """(FLOP-bound, memory-bound) tokens/s of decoding ``batch`` rows at ``context`` tokens."""
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    per_token = 2 * params + 4 * cfg.num_hidden_layers * context * cfg.hidden_size
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    kv_row = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * context * 4
    step_bytes = params * 4 + batch * kv_row
    return flops_s * 1e9 / per_token, batch / (step_bytes / (bytes_s * 1e9))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--source", default="../shared/data", help="training prompts folder")
    ap.add_argument("--stock", type=int, default=0, help="also time HF generate at this batch")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    pair = smollm2_pair(draft="none")
    model, tok = pair.target, pair.tokenizer
    texts = training_prompts(args.source, limit=args.prompts)
    prompts = [
        encode_turn(tok, [{"role": "user", "content": t}], chat_template=True) for t in texts
    ]
    mean_len = sum(map(len, prompts)) / len(prompts)
    print(
        f"{len(prompts)} prompts, mean {mean_len:.0f} tokens, max_new {args.max_new}, "
        f"{args.threads} threads, load {loadavg()}"
    )
    flops_s, bytes_s = gflops(), gbps()
    print(f"roofline: matmul {flops_s:.1f} GFLOP/s, copy {bytes_s:.1f} GB/s (load {loadavg()})")
    eos = tok.eos_token_id
    for batch in args.batches:
        # 1. Decode every prompt at this batch size, 2. print rates and bounds.
        before = loadavg()
        start = time.perf_counter()
        out = generate_batched(
            model,
            prompts,
            max_new=args.max_new,
            eos=eos,
            pad=tok.pad_token_id or eos,
            max_rows=batch,
        )
        secs = time.perf_counter() - start
        gen = sum(len(c) for c, _, _ in out)
        ctx = int(mean_len + sum(len(c) for c, _, _ in out) / len(out) / 2)
        fb, mb = bounds(model, batch, ctx, flops_s, bytes_s)
        print(
            f"batch {batch:3d}: {gen / secs:6.1f} generated tok/s, "
            f"{(gen + sum(map(len, prompts))) / secs:6.1f} incl. prompt, {secs:6.1f} s | "
            f"bounds at context {ctx}: FLOP {fb:6.1f} tok/s, memory {mb:6.1f} tok/s | "
            f"load {before} -> {loadavg()}",
            flush=True,
        )
    if args.stock:
        stock(model, tok, prompts, args.stock, args.max_new)


def stock(model, tok, prompts: list[list[int]], batch: int, max_new: int) -> None:
    """transformers ``generate`` (left padding, greedy) of the same prompts at ``batch``."""
    pad = tok.pad_token_id or tok.eos_token_id
    before, start, gen = loadavg(), time.perf_counter(), 0
    for b in range(0, len(prompts), batch):
        chunk = prompts[b : b + batch]
        width = max(map(len, chunk))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk])
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new,
                do_sample=False,
                pad_token_id=pad,
                eos_token_id=tok.eos_token_id,
            )
        for row in out[:, width:].tolist():
            gen += row.index(tok.eos_token_id) + 1 if tok.eos_token_id in row else len(row)
    secs = time.perf_counter() - start
    print(
        f"stock generate batch {batch}: {gen / secs:6.1f} generated tok/s, {secs:6.1f} s | "
        f"load {before} -> {loadavg()}"
    )


if __name__ == "__main__":
    main()
