"""Teacher-forced target labels on reference answers: the CPU-cheap alternative to target traces.

On a CPU, batched prefill scores many more tokens per second than generation, so ``stage=data`` can
instead run the target once over ``chat(prompt) + reference answer`` of the training prompts (GSM8K
train answers, Alpaca outputs) and keep, at every answer position, the target's top-k
log-probabilities: the draft is then distilled towards the target's distribution (its argmax is the
hard label) on reference contexts (DistillSpec's "fixed dataset" setting, Zhou et al. 2024).
Output: the same ``traces_*.safetensors`` format as ``traces.make_traces``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from specdec.data.prompts import encode_turn
from specdec.data.traces import save_traces, write_token_map
from specdec.data.training import DEFAULT_SETS, training_pairs

log = logging.getLogger(__name__)


@torch.inference_mode()
def score_answers(
    target, prompts: list[list[int]], answers: list[list[int]], topk: int
) -> list[tuple[list[int], torch.Tensor, torch.Tensor]]:
    """One right-padded prefill; per row the answer and the target's top-k for each answer token."""
    device = next(target.parameters()).device
    seqs = [p + a for p, a in zip(prompts, answers, strict=True)]
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)  # [B, T]
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.tensor(s)
    h = target.model(input_ids=ids.to(device)).last_hidden_state  # [B, T, H]
    out = []
    for r, (p, a) in enumerate(zip(prompts, answers, strict=True)):
        rows = h[r, len(p) - 1 : len(p) + len(a) - 1]  # [A, H] positions predicting the answer
        top = target.lm_head(rows).float().log_softmax(-1).topk(topk, dim=-1)  # [A, k]
        out.append((a, top.indices.int().cpu(), top.values.half().cpu()))
    return out


def label_references(
    model,
    out_dir: str,
    source_dir: str,
    *,
    datasets: Sequence[str] = DEFAULT_SETS,
    batch_size: int = 8,
    max_len: int = 384,
    limit: int | None = None,
    vocab_map_size: int = 8192,
    topk: int = 8,
    max_minutes: float | None = None,
) -> Path:
    """``stage=data`` on CPU: write ``traces_r_<chunk>.safetensors`` (resumable) + the token map.

    Args:
        model: a ``ModelPair`` (target scores, tokenizer formats).
        max_len: prompt + answer tokens kept per example (the answer is truncated).
        max_minutes: stop (between chunks) after this long; rerun to continue.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok, start = model.tokenizer, time.monotonic()
    pairs = training_pairs(source_dir, datasets)[:limit]
    log.info("reference labels: %d training pairs -> %s", len(pairs), out)
    for c, b in enumerate(range(0, len(pairs), batch_size)):
        # 1. One chunk file per batch (skip what a previous run wrote).
        path = out / f"traces_r_{c:05d}.safetensors"
        if path.exists():
            continue
        if max_minutes is not None and time.monotonic() - start > 60 * max_minutes:
            break
        prompts, answers = [], []
        for prompt, answer in pairs[b : b + batch_size]:
            p = encode_turn(tok, [{"role": "user", "content": prompt}], chat_template=True)
            a = tok.encode(answer, add_special_tokens=False) + [tok.eos_token_id]
            prompts.append(p)
            answers.append(a[: max(1, max_len - len(p))])
        # 2. Score and store.
        conts = score_answers(model.target, prompts, answers, topk)
        save_traces(path.with_suffix(".tmp"), prompts, conts)
        path.with_suffix(".tmp").rename(path)
        log.info(
            "reference labels: chunk %d (%d pairs, %.0f s)",
            c,
            b + len(prompts),
            time.monotonic() - start,
        )
    write_token_map(model.target.config.vocab_size, tok, out, source_dir, vocab_map_size)
    return out
