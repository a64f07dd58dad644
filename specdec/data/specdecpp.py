"""Training data of the SpecDec++ acceptance head (``stage=data`` of ``+experiment=specdecpp_*``).

Per training prompt (SpecDec++ §4.4, Huang, Guo & Wang, arXiv:2405.19715), with the *deployment*
sampling everywhere:

1. the target answers the prompt (``engine.generate`` with the empty drafter): ``X = x_1..x_n``;
2. one teacher-forced draft forward on prompt + X gives ``q_t`` (warped with ``warp``) and a draft
   token ``y_t ~ q_t`` per response position; one target forward gives ``p_t`` (same warp);
3. label ``a_t = min(1, p_t(y_t) / q_t(y_t))``: the probability that speculative sampling accepts
   ``y_t`` after the prefix ``prompt + x_{<t}``. The public code takes p and q from the *raw*
   softmax while it decodes with T=0.6/top-p 0.9; here both use the same ``Sampling`` as eval.

Rows (``datasets`` Arrow, one ``DatasetDict`` saved with ``save_to_disk``): ``prompt_id``,
``source``, ``prompt_ids``, ``response_ids`` (X), ``draft_ids`` (Y), ``labels`` (a). Splits are by
prompt id (a hash), never by row. Prompts (``load_source``): registered datasets' training splits
under the data dir, or any reader (a question JSONL, made-up prompts); eval prompts are dropped.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch

from specdec.data import registry
from specdec.data.prompts import encode_turn
from specdec.data.sources import QuestionFile, TopicPrompts, training_rows
from specdec.data.training import split_of
from specdec.errors import BadInput, MissingInput
from specdec.models import ModelPair
from specdec.sampling import Sampling, TorchCoins, prompt_seed, warp

log = logging.getLogger(__name__)


# the two prompt sources that are no dataset, by the names configs (and the pinned experiment
# snapshot) give them; any other is a registered dataset or a ``reader: {_target_: ...}`` node
NAMED_READERS = {
    "jsonl": lambda source: QuestionFile(source["path"]),
    "synthetic": lambda source: TopicPrompts(source.get("limit") or 8),
}


def load_source(source: dict, data_dir: Path) -> list[tuple[str, str]]:
    """``(prompt_id, text)`` pairs of one source, eval prompts and repeats dropped.

    ``source``: ``{name, limit?, reader?}``. With ``reader`` (a ``_target_`` node, e.g. of
    ``specdec.data.sources``) ``name`` only prefixes the ids; ``jsonl`` (``path``) and
    ``synthetic`` are ``NAMED_READERS``; any other ``name`` is a registered dataset whose training
    split is read (``source.train`` of ``conf/dataset/<name>.yaml``).
    Every prompt that is an eval prompt of a registered dataset (``registry.eval_texts``) is left
    out. Alpaca's input follows a blank line, the eval set's format.
    """
    name, limit = str(source["name"]), source.get("limit")
    try:
        if source.get("reader") is not None:
            reader = registry.instantiate_node(dict(source["reader"]), f"source {name!r} reader")
            rows = reader.rows(data_dir, name)
        elif name in NAMED_READERS:
            rows = NAMED_READERS[name](source).rows(data_dir, name)
        else:
            rows = training_rows(name, data_dir)
    except MissingInput as e:
        raise MissingInput(
            f"{e}; set data_gen.data_dir to the folder holding the training "
            "data (laid out like shared/data)"
        ) from e
    banned, seen, out = registry.eval_texts(data_dir), set(), []
    for row in rows:
        text = row.turn("\n\n")
        key = registry.norm_text(text)
        if key not in banned and key not in seen:
            seen.add(key)
            out.append((row.id, text))
    return out[:limit] if limit is not None else out


@torch.inference_mode()
def label_response(
    pair: ModelPair,
    prompt_ids: list[int],
    response_ids: list[int],
    sampling: Sampling,
    generator: torch.Generator,
) -> tuple[list[int], list[float]]:
    """Draft token per response position and its acceptance probability ``min(1, p/q)``.

    Returns:
        ``(draft_ids [n], labels [n])``.
    """
    ids = torch.tensor([prompt_ids + response_ids], device=pair.target.device)  # [1, P+n]
    start, n = len(prompt_ids) - 1, len(response_ids)
    q = warp(pair.draft(input_ids=ids).logits[0, start : start + n].double(), sampling)  # [n, V]
    p = warp(pair.target(input_ids=ids).logits[0, start : start + n].double(), sampling)  # [n, V]
    draft = torch.multinomial(q.cpu(), 1, generator=generator).to(q.device)  # [n, 1]
    labels = (p.gather(1, draft) / q.gather(1, draft)).clamp(max=1.0)[:, 0]  # [n]
    return draft[:, 0].tolist(), labels.float().tolist()


def generate_acceptance_data(
    model: ModelPair,
    out_dir: str,
    sources: list[dict],
    *,
    data_dir: str = ".",
    sampling: dict | None = None,
    max_new_tokens: int = 128,
    seed: int = 0,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    batch_size: int = 1,
    exclude_traces: str | None = None,
) -> Path:
    """Write the acceptance-head dataset (see module docstring) to ``out_dir``; returns it.

    Args:
        sampling: the deployment sampling (``Sampling``'s keys; None: its defaults, greedy).
        batch_size: greedy (T = 0) answers are generated this many prompts at a time with HF
            ``generate`` (the target's greedy answer either way; ~6x faster on CPU); T > 0 always
            samples one prompt at a time through the engine with the deployment coins.
        exclude_traces: a draft-distillation traces folder; its prompts are skipped, so the head
            learns the draft's acceptance on prompts the draft was not trained on.
    """
    from datasets import Dataset, DatasetDict

    from specdec.compose import compose_method
    from specdec.drafters import EmptyDrafter
    from specdec.engine import generate
    from specdec.verifiers import Tokenwise

    if model.draft is None:
        raise ValueError("the acceptance head needs a draft model: pick a pair with a draft")
    smp = Sampling(**(sampling or {}))
    prompts = [p for s in sources for p in load_source(dict(s), Path(data_dir))]
    if len({pid for pid, _ in prompts}) != len(prompts):
        raise BadInput("duplicate prompt ids across sources")
    # the eval's composition (specdec.compose) of the ar method: the target answers alone
    ar = compose_method(model, smp, lambda lm: EmptyDrafter(), Tokenwise)
    tok = model.tokenizer
    stop_ids = [tok.eos_token_id] if tok.eos_token_id is not None else []
    encoded = [
        (pid, encode_turn(tok, [{"role": "user", "content": text}], chat_template=True))
        for pid, text in prompts
    ]
    if exclude_traces:
        from specdec.data.traces import load_traces

        seen = {tuple(tr.ids[: tr.prompt_len].tolist()) for tr in load_traces(exclude_traces)}
        encoded = [(pid, ids) for pid, ids in encoded if tuple(ids) not in seen]
        log.info(
            "acceptance data: %d prompts left after excluding %d traced prompts",
            len(encoded),
            len(seen),
        )
    greedy: dict[str, list[int]] = {}
    if smp.temperature == 0 and batch_size > 1:
        from specdec.data.traces import generate_continuations

        for b in range(0, len(encoded), batch_size):
            chunk = encoded[b : b + batch_size]
            conts = generate_continuations(
                model.target,
                tok,
                [ids for _, ids in chunk],
                max_new=max_new_tokens,
                temperature=0.0,
                seed=seed,
            )
            greedy.update({pid: c[0] for (pid, _), c in zip(chunk, conts)})
            log.info("acceptance data: answers %d/%d", b + len(chunk), len(encoded))
    rows: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    for k, (pid, prompt_ids) in enumerate(encoded):
        # 1. The target's own answer, sampled exactly as in deployment (greedy: batched above).
        if pid in greedy:
            response = greedy[pid]
        else:
            coins = TorchCoins(prompt_seed(seed, pid))
            response = generate(
                prompt_ids,
                ar.target,
                ar.drafter,
                ar.verifier,
                sampling=smp,
                coins=coins,
                max_new_tokens=max_new_tokens,
                stop_ids=stop_ids,
            ).tokens
        if not response:
            continue
        # 2-3. Draft token per position and its label min(1, p/q).
        gen = torch.Generator().manual_seed(prompt_seed(seed + 1, pid))
        draft_ids, labels = label_response(model, prompt_ids, response, smp, gen)
        rows[split_of(pid, val_fraction, test_fraction)].append(
            {
                "prompt_id": pid,
                "source": pid.split("/")[0],
                "prompt_ids": prompt_ids,
                "response_ids": response,
                "draft_ids": draft_ids,
                "labels": labels,
            }
        )
        if k % 50 == 0:
            log.info("acceptance data: %d/%d prompts", k + 1, len(encoded))
    empty = [name for name, r in rows.items() if not r]
    if empty:
        raise ValueError(f"split(s) {empty} got no prompt; use more prompts or larger fractions")
    out = Path(out_dir)
    DatasetDict({name: Dataset.from_list(r) for name, r in rows.items()}).save_to_disk(str(out))
    meta = {
        "sampling": {"temperature": smp.temperature, "top_k": smp.top_k, "top_p": smp.top_p},
        "model": model.describe(),
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "rows": {name: len(r) for name, r in rows.items()},
    }
    (out / "acceptance_meta.json").write_text(json.dumps(meta, indent=2))
    log.info("wrote %s (%s)", out, meta["rows"])
    return out
