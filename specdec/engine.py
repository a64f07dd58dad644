"""generate(): the one decoding loop every method runs through, AR included.

A method is a (drafter, verifier) pair. Each step the drafter proposes a token tree rooted at the
last committed token (the *root*), the target scores root + drafted nodes in one forward, the
verifier accepts a path and emits one recovered-or-bonus token, and the target cache keeps the root
and the accepted nodes. AR is the empty draft, so it gets the same accounting as every method.

Cache invariant: at the start of every step the target cache holds exactly the committed tokens
except the root.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from specdec.coins import Coins
from specdec.core import LM, Context, Drafter, TargetView, Verifier
from specdec.errors import BadInput
from specdec.forwards import NonFiniteLogits, stamp_step
from specdec.graphs import graph_counts
from specdec.metrics import GenerationStats
from specdec.sampling import Sampling, warp
from specdec.threads import loop_threads


@dataclass
class Generation:
    """The new tokens of one generation and its accounting."""

    tokens: list[int]
    stats: GenerationStats


def check_compatible(target: LM, drafter: Drafter, verifier: Verifier) -> None:
    """Raise ``ValueError`` when a drafter and verifier (or the models) cannot work together."""
    if drafter.makes_trees and not verifier.supports_trees:
        raise BadInput(
            f"verifier {type(verifier).__name__} does not support tree drafts from "
            f"{type(drafter).__name__}; use a tree-capable verifier or a chain "
            "drafter"
        )
    for lm in drafter.models:
        if lm.vocab_size != target.vocab_size:
            raise ValueError(
                f"target vocabulary size {target.vocab_size} != draft vocabulary size "
                f"{lm.vocab_size}; speculative decoding needs a draft with the "
                "target's tokenizer"
            )


# The loop's own tensor work runs on one thread, every model forward on the caller's budget
# (threads.py: small parallel ops stall while another process holds a core).
@loop_threads()
def generate(
    prompt_ids: torch.Tensor | Sequence[int],
    target: LM,
    drafter: Drafter,
    verifier: Verifier,
    *,
    sampling: Sampling,
    coins: Coins,
    max_new_tokens: int,
    stop_ids: Sequence[int] = (),
    on_step: Callable[[list[int]], None] | None = None,
) -> Generation:
    """Generate up to ``max_new_tokens`` tokens after ``prompt_ids``.

    Args:
        prompt_ids: ``[T]`` (or ``[1, T]``) prompt token ids, T ≥ 1.
        target: the target model with its cache (``lm.CachedLM`` or a test double).
        drafter: proposes drafts; owns its draft model(s) in ``drafter.models``.
        verifier: accept/resample rule.
        sampling: temperature / top-k / top-p of this generation: applied to the target logits
            and handed to the drafter in every step's ``Context`` (a drafter holds none).
        coins: all randomness of this generation (drafting and verification).
        max_new_tokens: upper bound on new tokens (0 returns nothing).
        stop_ids: token ids that end the generation (kept in the output and counted).
        on_step: called after each decoding step with the tokens it committed (streaming,
            ``specdec.api``); an exception it raises ends the generation.

    Returns:
        ``Generation(tokens, stats)`` with the new tokens only.
    """
    # 0. Validate: batch size 1, non-empty prompt, compatible parts.
    prompt = torch.as_tensor(prompt_ids, dtype=torch.long).cpu()
    if prompt.dim() == 2:
        if prompt.shape[0] != 1:
            raise ValueError(f"batch size must be 1, got prompt_ids of shape {tuple(prompt.shape)}")
        prompt = prompt[0]
    if prompt.numel() == 0:
        raise ValueError("empty prompt: speculative decoding needs at least one prompt token")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    check_compatible(target, drafter, verifier)
    stats, step = GenerationStats(), -1  # step -1: the prefill
    if max_new_tokens == 0:
        return Generation([], stats)
    stops = frozenset(int(s) for s in stop_ids)
    logs = [target.forward_log, *[m.forward_log for m in drafter.models]]
    graphs_before = graph_counts([target, *drafter.models])  # replays/fallbacks (model.cuda_graphs)
    layers = drafter.target_layers
    try:
        # 1. Prefill every prompt token but the root, in the target and in the draft models (the
        #    drafter reconciles its caches with the committed tokens at every propose after this);
        #    a feature drafter gets the prompt's target features.
        start = time.perf_counter()
        target.reset()
        drafter.reset()
        drafter.attach(TargetView(target))
        features = None
        if prompt.numel() > 1:
            features = target.forward(prompt[:-1], hidden_layers=layers).hidden  # [T-1, k, H]
            target.keep(list(range(prompt.numel() - 1)))
        drafter.prefill(prompt, features)
        marks = marks_at_decode = [len(log) for log in logs]
        stats.prefill_s = time.perf_counter() - start

        # 2. Draft, verify, keep, commit until a stop id or the token budget ends the generation.
        start = time.perf_counter()
        # the committed tokens live in one buffer; each step's context reads a view of its
        # prefix (committed tokens never change, so a view a drafter keeps stays valid)
        committed = torch.empty(prompt.numel() + max_new_tokens, dtype=torch.long)  # [T + max]
        committed[: prompt.numel()] = prompt
        length, root, new, features, step = prompt.numel(), int(prompt[-1]), [], None, 0
        while len(new) < max_new_tokens:
            ctx = Context(
                tokens=committed[:length],
                coins=coins,
                sampling=sampling,
                step=step,
                stop_ids=stops,
                budget=max_new_tokens - len(new),
                target_features=features,
            )
            # 2.1 Propose a draft rooted at the last committed token.
            t0 = time.perf_counter()
            draft = drafter.propose(ctx)
            stats.draft_s += time.perf_counter() - t0
            assert int(draft.tokens[0]) == root, "a draft must be rooted at the last token"
            # 2.2 Score root + drafted nodes in one target forward (tree-masked for trees).
            out = target.forward(draft.tokens, draft.parent, hidden_layers=layers)
            p = warp(out.logits, sampling)  # [N, V]
            # 2.3 Verify: accepted path + one recovered or bonus token.
            verdict = verifier.verify(draft, p, coins)
            # 2.4 Keep root + accepted nodes in the target cache; the new root stays uncached.
            kept_nodes = [0, *verdict.path]
            target.keep(kept_nodes)
            if out.hidden is not None:
                features = out.hidden[kept_nodes]  # [1 + accepted, k, H]
            # 2.5 Commit the emitted tokens, truncated at a stop id or at the token budget.
            emitted = verdict.emitted(draft)[: max_new_tokens - len(new)]
            stop_at = next((i for i, t in enumerate(emitted) if t in stops), None)
            if stop_at is not None:
                emitted = emitted[: stop_at + 1]
            committed[length : length + len(emitted)] = torch.tensor(emitted)
            length, root = length + len(emitted), emitted[-1]
            new += emitted
            # 2.6 Feedback (joins the drafter's background work), then this step's accounting.
            drafter.observe(ctx, draft, verdict)
            stats.step(draft.num_drafted, verdict.num_accepted, len(emitted))
            for log, mark in zip(logs, marks):
                stamp_step(log, mark, step)
            marks, step = [len(log) for log in logs], step + 1
            # 2.7 Hand the committed tokens to the caller's hook (streaming).
            if on_step is not None:
                on_step(list(emitted))
            # 2.8 Stop on a stop id.
            if stop_at is not None:
                break
    except NonFiniteLogits as err:  # the model knows its forward, the loop knows the step
        raise err.at(f"decoding step {step}" if step >= 0 else "the prompt's prefill") from None
    stats.decode_s = time.perf_counter() - start
    for log, mark in zip(logs, marks_at_decode):
        stats.forwards.extend(log[mark:])
    stats.draft_forwards = sum(f.role != target.role for f in stats.forwards)
    stats.counters = dict(drafter.counters())
    stats.counters.update(graph_counts([target, *drafter.models]) - graphs_before)
    return Generation(new, stats)
