"""Training data for draft distillation: the target's own continuations of *training* prompts.

DistillSpec (Zhou et al. 2024, "DistillSpec: Improving Speculative Decoding via Knowledge
Distillation") finds on-policy data — sequences the target (or draft) generates — better than
fixed reference text: the draft is judged on the target's continuations, so it is trained on them.
Here ``make_traces`` runs batched generation (``data.batch_decode``) of the target on GSM8K-train
and Alpaca-train prompts (eval prompts are excluded by exact text match), formatted exactly as the
eval formats them (``specdec.data.prompts.encode_turn``), and stores ``prompt + continuation``
ids; ``token_map`` picks the ``V_d`` most frequent continuation tokens (EAGLE-3's reduced draft
vocabulary ``d2t``).

Stored format (``traces.safetensors``): ``tokens [T_total]`` (int32), ``offsets [N+1]``,
``prompt_len [N]``; ``token_map.safetensors``: ``token_map [V_d]`` (sorted ids), ``counts [V]``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from specdec.data.batch_decode import generate_batched
from specdec.data.prompts import encode_turn
from specdec.data.training import DEFAULT_SETS, reference_texts, training_prompts
from specdec.errors import MissingInput

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Trace:
    """``ids [T]`` = prompt + continuation; the target's top-k for each continuation token."""

    ids: torch.Tensor
    prompt_len: int
    topk_ids: torch.Tensor  # [T - prompt_len, k]
    topk_logp: torch.Tensor  # [T - prompt_len, k]


DATA_COMMAND = "python -m specdec.train +experiment=draft_lm_smollm2 stage=data"


@torch.inference_mode()
def generate_continuations(
    model,
    tokenizer,
    prompts: list[list[int]],
    *,
    max_new: int,
    temperature: float,
    seed: int,
    topk: int = 8,
) -> list[tuple[list[int], torch.Tensor, torch.Tensor]]:
    """The target's continuation of every prompt, each cut after its first EOS
    (``data.batch_decode``: length buckets, a preallocated cache, finished rows dropped).

    Returns:
        per prompt ``(continuation ids, top-k ids [C, k], top-k log-probs [C, k])`` where row
        ``j`` is the target's (unwarped) distribution for continuation token ``j``.
    """
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    return generate_batched(
        model,
        prompts,
        max_new=max_new,
        eos=eos,
        pad=pad,
        temperature=temperature,
        seed=seed,
        topk=topk,
    )


def save_traces(
    path: str | Path,
    prompts: list[list[int]],
    conts: list[tuple[list[int], torch.Tensor, torch.Tensor]],
) -> None:
    seqs = [p + c[0] for p, c in zip(prompts, conts, strict=True)]
    offsets = torch.tensor([0] + [len(s) for s in seqs]).cumsum(0)
    flat = torch.tensor([t for s in seqs for t in s], dtype=torch.int32)
    save_file(
        {
            "tokens": flat,
            "offsets": offsets,
            "prompt_len": torch.tensor([len(p) for p in prompts]),
            "topk_ids": torch.cat([c[1] for c in conts]).contiguous(),
            "topk_logp": torch.cat([c[2] for c in conts]).contiguous(),
        },
        str(path),
    )


def _prompts_in(path: Path) -> int:
    """How many prompts a ``traces*.safetensors`` file holds (reads one small tensor)."""
    with safe_open(str(path), framework="pt") as f:
        return int(f.get_slice("prompt_len").get_shape()[0])


def load_traces(folder: str | Path) -> list[Trace]:
    """Every trace in the ``traces*.safetensors`` files of ``folder``."""
    files = sorted(Path(folder).glob("traces*.safetensors"))
    if not files:
        raise MissingInput(f"no traces*.safetensors in {folder}; create them with `{DATA_COMMAND}`")
    return [tr for f in files for tr in traces_of_file(f)]


def traces_of_file(path: str | Path) -> list[Trace]:
    """The traces of one ``traces*.safetensors`` file, in file order."""
    d = load_file(str(path))
    off, c, out = d["offsets"].tolist(), 0, []
    for i, plen in enumerate(d["prompt_len"].tolist()):
        n = off[i + 1] - off[i] - plen  # continuation length
        out.append(
            Trace(
                d["tokens"][off[i] : off[i + 1]].long(),
                plen,
                d["topk_ids"][c : c + n].long(),
                d["topk_logp"][c : c + n].float(),
            )
        )
        c += n
    return out


def token_map(counts: torch.Tensor, size: int, always: Sequence[int] = ()) -> torch.Tensor:
    """The ``size`` most frequent token ids (plus ``always``), sorted: EAGLE-3's ``d2t``."""
    size = min(size, counts.numel())
    boost = counts.clone().float()
    boost[list(always)] = float(counts.max()) + 1
    return torch.topk(boost, size).indices.sort().values


def make_traces(
    model,
    out_dir: str,
    source_dir: str,
    *,
    datasets: Sequence[str] = DEFAULT_SETS,
    passes: Sequence[dict] = ({"temperature": 0.0},),
    max_new: int = 256,
    batch_size: int = 16,
    limit: int | None = None,
    vocab_map_size: int = 8192,
    topk: int = 8,
    max_minutes: float | None = None,
    seed: int = 0,
    first_chunk: int = 0,
) -> Path:
    """``stage=data``: write ``traces_p<pass>_<chunk>.safetensors`` and ``token_map.safetensors``.

    Resumable: existing chunk files are skipped. ``max_minutes`` stops generating (between
    chunks) after that long; the token map is then built from what exists.

    Args:
        model: a ``ModelPair`` (its target generates; its tokenizer formats the prompts).
        passes: one dict per generation pass (``temperature``), e.g. greedy then T=1.
        batch_size: prompts per ``generate`` call (= per chunk file).
        limit: use at most this many prompts.
        topk: target log-probabilities kept per continuation token (soft labels).
        first_chunk: skip chunks before this one (e.g. the prompts a warm-started draft saw).
    """
    out = Path(out_dir)
    tok = model.tokenizer
    texts = training_prompts(source_dir, datasets, limit)
    log.info("traces: %d training prompts -> %s", len(texts), out)
    write_trace_chunks(
        model,
        out,
        texts,
        passes=passes,
        max_new=max_new,
        batch_size=batch_size,
        topk=topk,
        max_minutes=max_minutes,
        seed=seed,
        first_chunk=first_chunk,
    )
    write_token_map(model.target.config.vocab_size, tok, out, source_dir, vocab_map_size)
    return out


def write_token_map(vocab: int, tok, out: Path, source_dir: str | Path, size: int) -> Path:
    """``token_map.safetensors`` from the traces in ``out`` (weight 10) and the references."""
    counts = torch.zeros(vocab, dtype=torch.long)
    for text in reference_texts(source_dir):
        counts += torch.bincount(
            torch.tensor(tok.encode(text, add_special_tokens=False), dtype=torch.long),
            minlength=vocab,
        )
    trace_counts = torch.zeros(vocab, dtype=torch.long)
    for tr in load_traces(out):
        trace_counts += torch.bincount(tr.topk_ids[:, 0], minlength=vocab)  # target argmax
    counts += 10 * trace_counts
    tmap = token_map(counts, size, always=[tok.eos_token_id])
    save_file({"token_map": tmap, "counts": counts}, str(out / "token_map.safetensors"))
    covered = trace_counts[tmap].sum().item() / max(trace_counts.sum().item(), 1)
    log.info("token map: %d tokens cover %.4f of the target's argmax tokens", tmap.numel(), covered)
    return out / "token_map.safetensors"


def write_trace_chunks(
    model,
    out: Path,
    texts: Sequence[str | list[dict]],
    *,
    prefix: str = "traces",
    passes: Sequence[dict] = ({"temperature": 0.0},),
    max_new: int = 256,
    batch_size: int = 16,
    topk: int = 8,
    max_minutes: float | None = None,
    seed: int = 0,
    first_chunk: int = 0,
    chat_template: bool = True,
) -> bool:
    """Write ``<prefix>_p<pass>_<chunk>.safetensors`` for user turns ``texts``; resumable.

    ``chat_template=False`` encodes each text as a plain completion prompt (``encode_turn``); an
    item may also be a whole conversation (``[{"role": ..., "content": ...}, ...]``, ending with
    a user turn).

    Returns:
        ``True`` when every chunk exists, ``False`` when ``max_minutes`` stopped it early.
    """
    out.mkdir(parents=True, exist_ok=True)
    tok = model.tokenizer
    prompts = [
        encode_turn(
            tok,
            [{"role": "user", "content": t}] if isinstance(t, str) else t,
            chat_template=chat_template,
        )
        for t in texts
    ]
    start = time.monotonic()
    for i, spec in enumerate(passes):
        for c, b in enumerate(range(0, len(prompts), batch_size)):
            # 1. One chunk file per batch of prompts (skip what a previous run wrote).
            path = out / f"{prefix}_p{i}_{c:05d}.safetensors"
            batch = prompts[b : b + batch_size]
            if c < first_chunk or (path.exists() and _prompts_in(path) == len(batch)):
                continue
            if path.exists():  # a short last chunk of a smaller run: the prompt list grew
                log.info(
                    "%s: regenerating %s (%d -> %d prompts)",
                    prefix,
                    path.name,
                    _prompts_in(path),
                    len(batch),
                )
            if max_minutes is not None and time.monotonic() - start > 60 * max_minutes:
                return False
            # 2. Generate, 3. write atomically.
            conts = generate_continuations(
                model.target,
                tok,
                batch,
                max_new=max_new,
                temperature=float(spec["temperature"]),
                seed=seed + 1000 * i + c,
                topk=topk,
            )
            save_traces(path.with_suffix(".tmp"), batch, conts)
            path.with_suffix(".tmp").rename(path)
            log.info(
                "%s: pass %d chunk %d (%d prompts, %.0f s)",
                prefix,
                i,
                c,
                min(b + batch_size, len(prompts)),
                time.monotonic() - start,
            )
    return True
