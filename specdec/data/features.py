"""EAGLE-3 training data: target traces plus the target's features at every trace position.

``stage=data`` writes, per chunk of prompts, ``traces_*.safetensors`` (the target's own answers
with its top-k log-probabilities, ``data.traces``) and ``features_*.safetensors``
(``[n, k, H]`` fp16 hidden states of the ``target_layers`` at each of the ``n`` trace tokens, one
batched target forward per chunk), plus ``token_map.safetensors`` (the draft vocabulary ``d2t``:
the most frequent target-argmax tokens; its coverage of the traces' argmax tokens is logged).
Features are computed once and cached: on a 2-core CPU a target forward costs far more than the
one-layer drafter's training step, and training makes several passes.

``synthetic_traces`` makes seeded random prompts for pairs without training data (the tiny pair
in tests and CI).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specdec.data.breadth import breadth_conversations
from specdec.data.code_prompts import write_code_prompts
from specdec.data.online_features import target_features
from specdec.data.self_instruct import self_instructions
from specdec.data.traces import (
    Trace,
    generate_continuations,
    load_traces,
    make_traces,
    save_traces,
    token_map,
    traces_of_file,
    write_token_map,
    write_trace_chunks,
)
from specdec.errors import BadInput, MissingInput

log = logging.getLogger(__name__)
DATA_COMMAND = "python -m specdec.train +experiment=eagle3_<model> stage=data"


def features_path(traces_file: Path) -> Path:
    return traces_file.with_name(traces_file.name.replace("traces", "features", 1))


@torch.inference_mode()
def cache_features(
    model, folder: str | Path, target_layers: Sequence[int], batch_size: int = 8
) -> int:
    """Write ``features_*.safetensors`` beside every traces file that lacks one; returns count.

    Args:
        model: the ``ModelPair`` whose target made the traces.
        folder: the traces folder.
        target_layers: indices into the target's ``hidden_states``.
        batch_size: traces per target forward (right-padded; padding never attends back).
    """
    target, written = model.target, 0
    device = next(target.parameters()).device
    for path in sorted(Path(folder).glob("traces*.safetensors")):
        out = features_path(path)
        if out.exists() and out.stat().st_mtime >= path.stat().st_mtime:
            continue  # a traces file rewritten after its features (a grown chunk) is redone
        rows = traces_of_file(path)
        feats = []
        for b in range(0, len(rows), batch_size):
            # 1. Right-pad a batch, 2. its fp16 features (the training step's own function,
            # data.online_features), 3. keep the real tokens.
            batch = rows[b : b + batch_size]
            length = torch.tensor([int(r.ids.numel()) for r in batch])  # [B]
            ids = torch.zeros(len(batch), int(length.max()), dtype=torch.long)  # [B, T]
            for i, r in enumerate(batch):
                ids[i, : r.ids.numel()] = r.ids
            stacked = target_features(target, ids.to(device), length, target_layers)  # [B,T,k,H]
            feats += [stacked[i, : r.ids.numel()].cpu() for i, r in enumerate(batch)]
        tmp = out.with_suffix(".tmp")
        save_file({"features": torch.cat(feats).contiguous()}, str(tmp))  # [sum n, k, H]
        tmp.rename(out)
        written += 1
        log.info("features: %s (%d traces)", out.name, len(rows))
    return written


def read_token_map(folder: str | Path) -> torch.Tensor:
    """The draft vocabulary ``d2t`` (``[V_d]`` sorted target ids) that ``stage=data`` wrote.

    Raises:
        FileNotFoundError: naming the command that writes it.
    """
    path = Path(folder) / "token_map.safetensors"
    if not path.exists():
        raise MissingInput(f"{path} is missing; create it with `{DATA_COMMAND}`")
    return load_file(str(path))["token_map"].long()


def frozen_target(model) -> torch.nn.Module:
    """The pair's target in fp32 with gradients off: the teacher a feature drafter reads."""
    target = model.target.float()
    for p in target.parameters():
        p.requires_grad_(False)
    return target


def load_feature_traces(
    folder: str | Path, *, features: bool = True
) -> list[tuple[Trace, torch.Tensor | None]]:
    """Every trace of ``folder`` with its ``[n, k, H]`` fp16 features (``features=False``: with
    None, for features computed online; no feature file is read or needed).

    Raises:
        FileNotFoundError: no traces, or a traces file without features (names the command).
    """
    files = sorted(Path(folder).glob("traces*.safetensors"))
    if not files:
        raise MissingInput(f"no traces in {folder}; create them with `{DATA_COMMAND}`")
    out = []
    for path in files:
        if not features:
            out += [(tr, None) for tr in traces_of_file(path)]
            continue
        fpath = features_path(path)
        if not fpath.exists():
            raise MissingInput(f"{fpath} is missing; finish `{DATA_COMMAND}`")
        feats, start = load_file(str(fpath))["features"], 0
        for tr in traces_of_file(path):
            n = int(tr.ids.numel())
            out.append((tr, feats[start : start + n]))
            start += n
        assert start == feats.shape[0], f"{fpath} does not match {path}"
    return out


def synthetic_traces(
    model,
    out_dir: str | Path,
    *,
    prompts: int = 24,
    max_new: int = 24,
    vocab_map_size: int = 64,
    seed: int = 0,
    batch_size: int = 8,
) -> Path:
    """Greedy target answers to seeded random printable prompts, and their token map."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok, gen = model.tokenizer, torch.Generator().manual_seed(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz ,.?"
    texts = [
        "".join(alphabet[i] for i in torch.randint(len(alphabet), (12,), generator=gen))
        for _ in range(prompts)
    ]
    ids = [tok.encode(t) for t in texts]
    for c, b in enumerate(range(0, len(ids), batch_size)):
        path = out / f"traces_p0_{c:05d}.safetensors"
        if not path.exists():
            batch = ids[b : b + batch_size]
            conts = generate_continuations(
                model.target, tok, batch, max_new=max_new, temperature=0.0, seed=seed + c
            )
            save_traces(path.with_suffix(".tmp"), batch, conts)  # atomic: a kill mid-write
            path.with_suffix(".tmp").rename(path)  # leaves no half file that a rerun would keep
    write_argmax_map(out, model.target.config.vocab_size, vocab_map_size, tok.eos_token_id)
    return out


def write_argmax_map(folder: Path, vocab: int, size: int, eos: int | None) -> Path:
    """``token_map.safetensors``: the ``size`` most frequent target-argmax tokens of the traces."""
    counts = torch.zeros(vocab, dtype=torch.long)
    for tr in load_traces(folder):
        counts += torch.bincount(tr.topk_ids[:, 0], minlength=vocab)
    tmap = token_map(counts, size, always=[eos] if eos is not None else [])
    save_file({"token_map": tmap, "counts": counts}, str(folder / "token_map.safetensors"))
    log.info(
        "token map: %d tokens cover %.4f of the target's argmax tokens",
        tmap.numel(),
        counts[tmap].sum().item() / max(counts.sum().item(), 1),
    )
    return folder / "token_map.safetensors"


def make_eagle3_data(
    model,
    out_dir: str,
    target_layers: Sequence[int],
    *,
    source_dir: str | None = None,
    synthetic: dict | None = None,
    self_instruct: dict | None = None,
    code_completion: dict | None = None,
    breadth: dict | None = None,
    feature_batch: int = 8,
    features: str = "cache",
    **trace_kwargs,
) -> Path:
    """``stage=data``: traces (from ``source_dir``'s training prompts, or ``synthetic``), the
    target's answers to ``self_instruct`` prompts (``data.self_instruct``: its
    keyword arguments, e.g. ``{count: 1500, starters: [...]}``) in ``traces_self_*`` files, its
    continuations of ``code_completion`` prompts (``data.code_prompts``: ``{count,
    roots}``; no chat template) in ``traces_code_*`` files, conversations of the ``breadth``
    domains (``data.breadth``: ``{domain: count}``) in ``traces_<domain>_*`` files, then the
    features of every trace.
    Resumable: finished chunk files are kept. ``features=none`` writes traces and token map
    only, for training with ``datamodule.features=online`` (``online.py``)."""
    if features not in ("cache", "none"):
        raise BadInput(f"data_gen.features={features!r} is unknown; use cache or none")
    if synthetic is not None:
        synthetic_traces(model, out_dir, **synthetic)
    elif source_dir is not None:
        make_traces(model, out_dir, source_dir, **trace_kwargs)
    else:
        raise BadInput("set data_gen.source_dir (training prompts) or data_gen.synthetic")
    keys = ("passes", "max_new", "batch_size", "topk", "max_minutes", "seed")
    chunk_kwargs = {k: v for k, v in trace_kwargs.items() if k in keys}
    if self_instruct:
        texts = self_instructions(model, out_dir, source_dir=source_dir, **self_instruct)
        write_trace_chunks(model, Path(out_dir), texts, prefix="traces_self", **chunk_kwargs)
    if code_completion:
        texts = write_code_prompts(out_dir, source_dir=source_dir, **code_completion)
        write_trace_chunks(
            model, Path(out_dir), texts, prefix="traces_code", chat_template=False, **chunk_kwargs
        )
    if breadth:
        if source_dir is None:
            raise BadInput("data_gen.breadth needs data_gen.source_dir (the training splits)")
        for domain, convs in breadth_conversations(source_dir, dict(breadth)).items():
            log.info("breadth: %d %s conversations", len(convs), domain)
            write_trace_chunks(
                model, Path(out_dir), convs, prefix=f"traces_{domain}", **chunk_kwargs
            )
    if self_instruct or code_completion or breadth:  # the token map over every trace
        write_token_map(
            model.target.config.vocab_size,
            model.tokenizer,
            Path(out_dir),
            source_dir,
            int(trace_kwargs.get("vocab_map_size", 8192)),
        )
    if features == "cache":
        cache_features(model, out_dir, target_layers, batch_size=feature_batch)
    return Path(out_dir)
