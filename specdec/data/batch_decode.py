"""Batched CPU generation of the target's answers to training prompts (the data stage's decoder).

Throughput on a small CPU comes from three things that transformers' ``generate`` does not do:

1. **Length buckets.** Prompts are sorted by length and grouped (``plan_batches``) so a batch's
   left padding is small; a batch holds at most ``max_rows`` rows and ``rows * (width + max_new)``
   cache slots at most ``slot_budget``.
2. **A preallocated KV cache** (``data.slot_cache.SlotKV``): written in place, never concatenated.
3. **Finished rows leave the batch.** A row that emitted EOS or its ``max_new``-th token stops
   costing compute: once at least an eighth of the live rows are finished, they are dropped (one
   gather of the cache), so the batch shrinks instead of decoding padding.

Each row sees exactly its own prompt: left-padded slots are masked out (a padding query attends to
itself only, so no slot holds NaN) and positions count from the row's first real token, so greedy
output equals decoding that prompt alone (up to floating-point summation order; identical in
float64, ``tests/data/test_batch_decode.py``). Sampling (``temperature > 0``) draws every row from
one seeded generator: reproducible for a fixed prompt list and batch plan.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence

import torch

from specdec.data.slot_cache import SlotKV

Continuation = tuple[list[int], torch.Tensor, torch.Tensor]  # ids, top-k ids [C, k], log-p [C, k]


def plan_batches(
    lengths: Sequence[int], *, max_new: int, max_rows: int = 64, slot_budget: int = 32768
) -> list[list[int]]:
    """Prompt indices grouped into decode batches, longest prompts first.

    A batch holds at most ``max_rows`` rows and ``rows * (width + max_new) <= slot_budget`` (its
    widest prompt sets ``width``); a prompt too long for the budget gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        cur = batches[-1] if batches else None
        if (
            cur
            and len(cur) < max_rows
            and (len(cur) + 1) * (lengths[cur[0]] + max_new) <= slot_budget
        ):
            cur.append(i)
        else:
            batches.append([i])
    return batches


@functools.cache
def _cache_kw(cls: type) -> str:
    """The keyword of a model class's KV cache: ``cache`` (newer transformers) or the old one."""
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def _choose(logits: torch.Tensor, temperature: float, gen: torch.Generator | None) -> torch.Tensor:
    """The next token of each row (``logits [b, V]`` -> ``[b]``): argmax, or a sample at T."""
    if temperature <= 0:
        return logits.argmax(-1)
    probs = (logits.float() / temperature).softmax(-1)  # [b, V]
    return torch.multinomial(probs, 1, generator=gen)[:, 0]


@torch.inference_mode()
def decode_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new: int,
    eos: int | None,
    pad: int,
    temperature: float = 0.0,
    topk: int = 8,
    gen: torch.Generator | None = None,
    prefill_tokens: int = 4096,
) -> list[Continuation]:
    """Decode one batch; per prompt ``(continuation ids, top-k ids [C, k] int32, top-k log-probs
    [C, k] fp16)``, the continuation ending at its first EOS or after ``max_new`` tokens; row
    ``j`` of the top-k is the target's unwarped distribution of continuation token ``j``."""
    device = next(model.parameters()).device
    rows, width = len(prompts), max(len(p) for p in prompts)
    plen = torch.tensor([len(p) for p in prompts])  # [B]
    kv = SlotKV.for_model(model, rows, width + max_new)
    # 1. Left-pad; ``valid [B, S]`` marks the slots holding a row's real tokens.
    ids = torch.full((rows, width), pad, dtype=torch.long)  # [B, W]
    valid = torch.zeros(rows, width + max_new, dtype=torch.bool)  # [B, S]
    for r, p in enumerate(prompts):
        ids[r, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        valid[r, width - len(p) : width] = True
    # 2. Prefill in groups of rows (bounded activations); keep each row's last logits.
    causal = torch.ones(width, width, dtype=torch.bool).tril()  # [W, W]
    own = torch.eye(width, dtype=torch.bool)  # a padding query attends to itself only
    step = max(1, prefill_tokens // width)
    last = []
    for a in range(0, rows, step):
        b = min(rows, a + step)
        kv.rows, kv.length = slice(a, b), 0
        mask = (causal[None] & valid[a:b, None, :width]) | own[None]  # [b, W, W]
        pos = (torch.arange(width)[None] - (width - plen[a:b, None])).clamp(min=0)  # [b, W]
        out = model(
            input_ids=ids[a:b].to(device),
            attention_mask=mask[:, None].to(device),
            position_ids=pos.to(device),
            use_cache=True,
            **{_cache_kw(type(model)): kv},
            logits_to_keep=1,
        )
        last.append(out.logits[:, -1])  # [b, V]
    kv.rows, kv.length = slice(None), width
    logits = torch.cat(last)  # [B, V]
    # 3. Decode: record, choose, drop finished rows, feed the chosen tokens.
    live = torch.arange(rows)  # original row of each batch row
    finished = torch.zeros(rows, dtype=torch.bool)  # [b] done but still in the batch
    pos = plen.clone()  # [b] position of the token fed next
    conts: list[list[int]] = [[] for _ in range(rows)]
    tops: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in range(rows)]
    for t in range(max_new):
        # 3a. The target's top-k and the next token of every row still running.
        top = logits.float().log_softmax(-1).topk(topk, dim=-1)  # [b, k]
        nxt = _choose(logits, temperature, gen).cpu()  # [b]
        top_ids, top_lp = top.indices.int().cpu(), top.values.half().cpu()
        for i in (~finished).nonzero()[:, 0].tolist():
            r = int(live[i])
            conts[r].append(int(nxt[i]))
            tops[r].append((top_ids[i], top_lp[i]))
        finished |= (nxt == eos) if eos is not None else torch.zeros_like(finished)
        if t + 1 == max_new or bool(finished.all()):
            break
        # 3b. Drop finished rows once they are an eighth of the batch.
        if int(finished.sum()) * 8 >= len(live):
            keep = (~finished).nonzero()[:, 0]  # [b']
            kv.keep(keep.to(device))
            live, valid, pos, nxt = live[keep], valid[keep], pos[keep], nxt[keep]
            finished = finished[keep]
        # 3c. One forward of the chosen tokens at slot ``width + t``.
        valid[:, width + t] = True
        mask = valid[:, None, None, : width + t + 1]  # [b, 1, 1, L]
        out = model(
            input_ids=nxt[:, None].to(device),
            attention_mask=mask.to(device),
            position_ids=pos[:, None].to(device),
            use_cache=True,
            **{_cache_kw(type(model)): kv},
            logits_to_keep=1,
        )
        kv.length += 1
        pos += 1
        logits = out.logits[:, -1]  # [b, V]
    return [
        (c, torch.stack([s[0] for s in tp]), torch.stack([s[1] for s in tp]))
        for c, tp in zip(conts, tops)
    ]


def generate_batched(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new: int,
    eos: int | None,
    pad: int,
    temperature: float = 0.0,
    seed: int = 0,
    topk: int = 8,
    max_rows: int = 64,
    slot_budget: int = 32768,
) -> list[Continuation]:
    """``decode_batch`` over length buckets (``plan_batches``); results in prompt order."""
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed) if temperature > 0 else None
    out: list[Continuation | None] = [None] * len(prompts)
    for idx in plan_batches(
        [len(p) for p in prompts], max_new=max_new, max_rows=max_rows, slot_budget=slot_budget
    ):
        res = decode_batch(
            model,
            [prompts[i] for i in idx],
            max_new=max_new,
            eos=eos,
            pad=pad,
            temperature=temperature,
            topk=topk,
            gen=gen,
        )
        for i, r in zip(idx, res):
            out[i] = r
    return out  # type: ignore[return-value]
