"""Vocabulary rows: a target and a draft that share a tokenizer but not their output-row counts.

Checkpoints pad their embedding / output matrices past the tokenizer (to a multiple of 64 or 128
rows for fast matrix kernels), so two models with one tokenizer can have different output rows:
Qwen2.5-0.5B has 151,936 rows and Qwen2.5-14B 152,064, for the same 151,665 tokenizer ids. Rows at
or past ``len(tokenizer)`` are *padding rows*: no text encodes to them.

Where the rows are reconciled: in one place, the draft's ``specdec.lm.CachedLM`` (built with
``vocab_size`` = the target's rows), which hands every drafter and verifier logits of shape
``[N, V_target]`` (``fit_rows``):

* a draft with fewer rows gets ``-inf`` logits on the missing rows, i.e. ``q = 0`` there (its
  distribution is padded with zeros): it can never draft a padding row it does not have;
* a draft with more rows has its extra rows cut before the softmax: its ``q`` is renormalised over
  the target's rows, which are a superset of the tokenizer's ids (``check_rows``);
* a token the target emits on one of its padding rows, which a shorter draft has no embedding
  for, is fed to the draft as id 0 (``fit_ids``); the committed ids keep the real token.

Why this is lossless: speculative sampling (Leviathan et al. 2023, arXiv:2211.17192, Theorem 1;
Chen et al. 2023, arXiv:2302.01318) emits tokens distributed exactly as the target ``p`` for *any*
proposal ``q`` over the same index set, provided the verifier is handed the ``q`` the draft was
actually sampled from. Both modified ``q`` above are proper distributions over the target's
``V_target`` indices, sampled from and verified as they are, so the output law is the target's.
The target's ``p`` is never touched: its own padding rows keep whatever mass the target gives them,
exactly as autoregressive decoding of the target alone would.

``check_rows`` refuses a pair whose tokenizers truly differ (their token → id maps, not only their
sizes) or whose models lack a row for some tokenizer id, naming both sizes and the fix.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedTokenizerBase

from specdec.errors import BadInput

#: how many differing tokens an error names
SHOWN = 5


def fit_rows(logits: torch.Tensor, rows: int) -> torch.Tensor:
    """Logits over exactly ``rows`` output rows: extra rows cut, missing rows ``-inf``.

    Args:
        logits: ``[N, V]`` raw logits of a model with ``V`` output rows.
        rows: the target's output rows ``V_target``.

    Returns:
        ``[N, rows]`` logits (``logits`` itself when ``V == rows``).
    """
    have = int(logits.shape[-1])
    if have == rows:
        return logits
    if have > rows:
        return logits[..., :rows]  # [N, rows]
    pad = logits.new_full((*logits.shape[:-1], rows - have), float("-inf"))  # [N, rows - V]
    return torch.cat([logits, pad], -1)  # [N, rows]


def fit_ids(tokens: torch.Tensor, rows: int | None) -> torch.Tensor:
    """Token ids a model with ``rows`` input embeddings can take: ids past them become 0.

    The target may emit one of its own padding rows (its law, which a trained target gives almost
    no mass); a draft without that row is fed id 0 in its place. Only the draft's proposal ``q``
    changes, so the output law stays the target's (module docstring). ``rows=None``: unchanged.
    """
    if rows is None:
        return tokens
    return torch.where(tokens < rows, tokens, torch.zeros_like(tokens))  # [N], no device sync


def _vocab_difference(a: dict[str, int], b: dict[str, int]) -> list[str]:
    """Up to ``SHOWN`` descriptions of tokens whose ids differ between two token → id maps."""
    out = []
    for token in sorted(set(a) | set(b), key=lambda t: (a.get(t, b.get(t, 0)), t)):
        if a.get(token) != b.get(token):
            out.append(f"{token!r}: target id {a.get(token)}, draft id {b.get(token)}")
            if len(out) == SHOWN:
                break
    return out


def check_rows(
    target_rows: int,
    draft_rows: int,
    tokenizer: PreTrainedTokenizerBase,
    draft_tokenizer: PreTrainedTokenizerBase | None = None,
) -> None:
    """Refuse a pair that cannot share token ids; accept one that differs only in padding rows.

    Args:
        target_rows, draft_rows: output rows of the target and of the draft.
        tokenizer: the pair's (the target's) tokenizer.
        draft_tokenizer: the draft's own tokenizer when it has one (hub / local pairs); compared
            token by token with ``tokenizer``.

    Raises:
        ValueError: naming both sizes and the fix when the tokenizers' vocabularies differ, or
            when either model has fewer output rows than the tokenizer has ids.
    """
    ids = max(tokenizer.get_vocab().values()) + 1  # ids 0..ids-1 must all have a row
    sizes = (
        f"target: {target_rows} output rows, draft: {draft_rows} output rows, tokenizer: {ids} ids"
    )
    if draft_tokenizer is not None:
        a, b = tokenizer.get_vocab(), draft_tokenizer.get_vocab()
        if a != b:
            diff = "; ".join(_vocab_difference(a, b))
            raise BadInput(
                f"the target's tokenizer ({len(a)} tokens) and the draft's ({len(b)} tokens) "
                f"differ ({diff}); {sizes}. Speculative decoding needs a draft trained on the "
                "target's tokenizer: pick a draft of the same model family in conf/model/"
            )
    short = min(target_rows, draft_rows)
    if short < ids:
        who = "target" if target_rows == short else "draft"
        raise BadInput(
            f"the {who} has {short} output rows but the tokenizer has {ids} ids ({sizes})"
            ": some tokens have no logit; the draft must share the target's tokenizer (pick a "
            "matching draft in conf/model/)"
        )
