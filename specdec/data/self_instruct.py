"""Self-generated training prompts: the instruct target writes the user turns itself.

Magpie (Xu et al. 2024, "Magpie: Alignment Data Synthesis from Scratch by Prompting Aligned LLMs
with Nothing") observes that an aligned chat model, given only its template's *user* header, samples
plausible user requests from the distribution it was tuned on. A feature drafter's data is limited
by the breadth of its prompts, not their number (our EAGLE-3 curve flattened on GSM8K + Alpaca
alone), so these prompts add the domains the training files lack. A ``starter`` (a few generic
words such as ``"Write a Python function"`` or ``"Translate"``) may follow the header to steer the
*domain* of a request without naming any benchmark item; ``""`` is the pure Magpie case.

Kept prompts: the sampled turn ended with the template's end-of-turn token, is 16..2000
characters long, is not an eval prompt (``sources.eval_texts``) and is new. They are appended,
batch by batch, to ``self_instruct.jsonl`` in the traces folder (resumable; the file is the record
of what was trained on).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from specdec.data.training import eval_texts, norm_text
from specdec.errors import BadInput

log = logging.getLogger(__name__)
SENTINEL = "\u2063SPECDEC\u2063"
FILE = "self_instruct.jsonl"


def user_header(tokenizer) -> str:
    """The chat template's text before a user turn's content (Magpie's pre-query template).

    Raises:
        ValueError: the tokenizer has no chat template (a base model cannot self-instruct).
    """
    if not getattr(tokenizer, "chat_template", None):
        raise BadInput(
            "self-instruct prompts need an instruct target with a chat template; "
            "drop data_gen.self_instruct for this pair"
        )
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": SENTINEL}], tokenize=False, add_generation_prompt=False
    )
    return text[: text.index(SENTINEL)]


def read_instructions(folder: str | Path) -> list[str]:
    """The prompts already written to ``folder/self_instruct.jsonl`` (empty if none)."""
    return [r["text"] for r in _rows(Path(folder)) if "text" in r]


@torch.inference_mode()
def self_instructions(
    model,
    out_dir: str | Path,
    *,
    count: int,
    source_dir: str | Path | None,
    starters: Sequence[str] = ("",),
    temperature: float = 0.9,
    top_p: float = 0.95,
    max_new: int = 96,
    batch_size: int = 48,
    seed: int = 0,
    max_minutes: float | None = None,
) -> list[str]:
    """Sample up to ``count`` user prompts from the target (resuming ``self_instruct.jsonl``).

    Batch ``b`` uses starter ``starters[b % len(starters)]`` and seed ``seed + b``, so a resumed
    run continues the same sequence. Stops after ``max_minutes`` (between batches) or after
    ``4 * count / batch_size`` batches if too few samples pass the filters.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok, target = model.tokenizer, model.target
    rows = _rows(out)  # resume: the prompts kept so far and the batches finished
    kept = [r["text"] for r in rows if "text" in r]
    seen = {norm_text(t) for t in kept} | (eval_texts(Path(source_dir)) if source_dir else set())
    header, eos = user_header(tok), tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    device = next(target.parameters()).device
    start = time.monotonic()
    batch_no = 1 + max((r["batch"] for r in rows if r.get("done")), default=-1)
    while len(kept) < count and batch_no < 4 * count // batch_size + 1:
        if max_minutes is not None and time.monotonic() - start > 60 * max_minutes:
            break
        # 1. Header (+ starter) for every row of the batch.
        starter = starters[batch_no % len(starters)]
        ids = torch.tensor([tok.encode(header + starter, add_special_tokens=False)] * batch_size)
        # 2. Sample the user turns.
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed + batch_no)
            gen = target.generate(
                input_ids=ids.to(device),
                attention_mask=torch.ones_like(ids).to(device),
                do_sample=True,
                temperature=temperature,
                top_p=top_p,
                top_k=0,
                max_new_tokens=max_new,
                pad_token_id=pad,
                eos_token_id=eos,
            )
        # 3. Keep finished, new, non-eval turns; append them with the batch number.
        new = []
        for row in gen[:, ids.shape[1] :].tolist():
            if eos not in row:
                continue
            text = (starter + tok.decode(row[: row.index(eos)])).strip()
            if 16 <= len(text) <= 2000 and norm_text(text) not in seen:
                seen.add(norm_text(text))
                new.append(text)
        lines = [
            json.dumps({"batch": batch_no, "starter": starter, "text": t})
            for t in new[: count - len(kept)]
        ]
        lines.append(json.dumps({"batch": batch_no, "done": True}))
        with (out / FILE).open("a") as f:
            f.write("\n".join(lines) + "\n")  # one write per batch
        kept += new[: count - len(kept)]
        batch_no += 1
        log.info(
            "self-instruct: batch %d kept %d/%d (%d total, %.0f s)",
            batch_no,
            len(new),
            batch_size,
            len(kept),
            time.monotonic() - start,
        )
    return kept


def _rows(folder: Path) -> list[dict]:
    path = folder / FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
