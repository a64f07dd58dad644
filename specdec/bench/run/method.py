"""What a method preset builds on a pair (``Method``, composed by ``specdec.compose``), and
answering one prompt with it.

``run_prompt`` answers every turn of a prompt in order (later turns see the model's own earlier
answers), each turn through ``engine.generate`` with its own stream of the prompt's coins
(``sampling.turn_coins``: drafters' fork keys recur across turns of equal length), timed between
CUDA syncs of every device of the pair (never per step; ``specdec.bench.run.runner`` has the timing
rules). Before each turn it checks that the conversation so far plus ``max_new_tokens`` fits in
every model's positions (``specdec.bench.run.checks.fit_context``): a longer one fails naming the
prompt, or, with ``truncate_prompts=left``, keeps its last tokens and counts the dropped ones. A
drafter's background job that fails (``specdec.drafters.ahead.BackgroundError``, naming the
decoding step) is re-raised naming the prompt; the runner then writes no record for it.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field

import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from specdec.bench.run.checks import check_drafter_fits, context_limits, fit_context
from specdec.compose import Method, compose_method
from specdec.core import Drafter
from specdec.cuda_sync import synchronize
from specdec.data.prompts import Prompt, encode_turn, format_turn
from specdec.drafters.ahead import BackgroundError
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.metrics import GenerationStats
from specdec.models import ModelPair
from specdec.sampling import Sampling, TorchCoins, prompt_seed, turn_coins

# Method (specdec.compose) and CachedLM stay importable from here
__all__ = ["Answer", "CachedLM", "Method", "build_method", "run_prompt"]


def build_method(cfg: DictConfig, pair: ModelPair) -> Method:
    """Instantiate the target cache, drafter and verifier that the method preset chose, and check
    that every tensor they hold sits where the pair's placement says
    (``specdec.models.placement.check_built``), before any decoding.

    The drafter and its policy get, of the draft ``lm``, the ``policy`` and the pair's
    ``placement``, only what their constructor names; sampling is no constructor's: the method's
    (``cfg.sampling``) reaches every step in ``Context.sampling``, so a generation at another
    temperature reuses the same drafter.
    """
    sampling = Sampling(**OmegaConf.to_container(cfg.sampling, resolve=True))

    def make_drafter(lm: CachedLM | None) -> Drafter:
        offered: dict[str, object] = {"lm": lm, "placement": pair.placement}
        if cfg.drafter.get("policy") is not None:
            offered["policy"] = _construct(cfg.drafter.policy, {"placement": pair.placement})
        drafter = _construct(cfg.drafter, offered)
        check_drafter_fits(cfg, pair, drafter)  # its assets were trained for this pair
        return drafter

    return compose_method(
        pair,
        sampling,
        make_drafter,
        lambda: instantiate(cfg.verifier),
        # the cost model is fitted on per-forward times, which on CUDA need a sync per forward
        synchronize=bool(cfg.get("cost_model", False)),
    )


def _construct(node: DictConfig, offered: dict[str, object]) -> object:
    """``instantiate(node, **given)`` where ``given`` is what of ``offered`` the constructor of
    ``node._target_`` names, the objects handed over as themselves.

    Hydra would turn a dataclass keyword (``Placement``) into a config, so they are passed to the
    partial; a constructor's error is wrapped as Hydra wraps it (the entry points unwrap it).
    """
    from hydra.utils import get_object

    target = get_object(str(node._target_))
    named = inspect.signature(target).parameters
    given = {k: v for k, v in offered.items() if k in named}
    factory = instantiate(node, **{k: None for k in given}, _partial_=True, _convert_="object")
    try:
        return factory(**given)
    except Exception as err:
        raise InstantiationException(
            f"Error in call to target '{node._target_}':\n{err!r}"
        ) from err


@dataclass(frozen=True)
class Answer:
    """A prompt's answers (one per turn), summed stats, prefill+decode seconds between syncs, the
    prompt tokens ``truncate_prompts=left`` dropped (0: none), and per turn the new token ids and
    the length of the prompt they followed (the conversation so far, as encoded), its seconds
    (prefill + decode between syncs) and its decoding steps (Spec-Bench's per-turn fields,
    ``specdec.bench.report.specbench``)."""

    answers: list[str]
    stats: GenerationStats
    seconds: float
    truncated_tokens: int = 0
    output_ids: list[list[int]] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    turn_seconds: list[float] = field(default_factory=list)
    turn_steps: list[int] = field(default_factory=list)


def _sync(devices: list[torch.device]) -> None:
    """Wait for every CUDA device the pair runs on (target and draft may differ)."""
    for device in devices:
        if device.type == "cuda":
            synchronize(device)  # never during another thread's graph capture (cuda_sync)


def run_prompt(
    prompt: Prompt,
    pair: ModelPair,
    method: Method,
    *,
    seed: int,
    max_new_tokens: int,
    chat_template: bool,
    template: str = "{turn}",
    truncate: str | None = None,
) -> Answer:
    """Answer every turn of a prompt (later turns see the model's own earlier answers).

    Args:
        truncate: ``None`` (a prompt too long for the models raises ``ValueError``) or ``left``.
    """
    coins = TorchCoins(prompt_seed(seed, prompt.id))
    stop_ids = [pair.tokenizer.eos_token_id] if pair.tokenizer.eos_token_id is not None else []
    devices, limits = pair.devices(), context_limits(pair)
    messages: list[dict[str, str]] = []
    total, answers, seconds, dropped = GenerationStats(), [], 0.0, 0
    output_ids: list[list[int]] = []
    prompt_tokens: list[int] = []
    turn_seconds: list[float] = []
    turn_steps: list[int] = []
    for i, turn in enumerate(prompt.turns):
        messages.append({"role": "user", "content": format_turn(turn, template)})
        ids = encode_turn(pair.tokenizer, messages, chat_template=chat_template)
        where = f"prompt {prompt.id!r} of dataset {prompt.dataset} (turn {i + 1})"
        ids, cut = fit_context(
            ids, max_new_tokens=max_new_tokens, limits=limits, truncate=truncate, where=where
        )
        dropped += cut
        _sync(devices)
        start = time.perf_counter()
        try:
            out = generate(
                ids,
                method.target,
                method.drafter,
                method.verifier,
                sampling=method.sampling,
                coins=turn_coins(coins, i),
                max_new_tokens=max_new_tokens,
                stop_ids=stop_ids,
            )
        except BackgroundError as err:  # a drafter's worker failed: say which prompt it was on
            raise err.at(where) from err.__cause__
        _sync(devices)
        turn_seconds.append(time.perf_counter() - start)
        seconds += turn_seconds[-1]
        turn_steps.append(out.stats.target_forwards)
        answer = pair.tokenizer.decode(out.tokens, skip_special_tokens=True)
        messages.append({"role": "assistant", "content": answer})
        answers.append(answer)
        output_ids.append([int(t) for t in out.tokens])
        prompt_tokens.append(len(ids))
        total.merge(out.stats)
    return Answer(
        answers, total, seconds, dropped, output_ids, prompt_tokens, turn_seconds, turn_steps
    )
