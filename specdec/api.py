"""The one-call Python API: ``specdec.load(target, draft=None, method="sps", **overrides)``.

``load`` composes the same Hydra config as ``python -m specdec.eval`` (``conf/eval.yaml`` with
``method=<preset>``, ``model=<preset>`` or ``model=hf model.target=<id|folder>``, and the
overrides as ``key=value``), runs the eval's checks before anything loads (the config schema,
``specdec.bench.run.preflight``), loads the pair and builds the method with
``specdec.bench.run.method.build_method``. ``Decoder.generate`` answers a prompt through the one
decoding loop (``specdec.engine.generate``) with the eval's coins (``prompt_seed(seed, prompt_id)``,
turn 0), stop token, chat template and context check, so a prompt given the id of a benchmark
prompt reproduces that prompt's eval answer, sampled ones included::

    import specdec
    dec = specdec.load("tiny", method="sps", **{"drafter.policy.gamma": 3})
    out = dec.generate("Hello", max_new_tokens=32)
    out.text, out.tokens, out.stats["tau"]
    for chunk in dec.generate([{"role": "user", "content": "Hi"}], stream=True):
        print(chunk.text, end="")

Bad input (an unknown method, a key the config lacks, a value out of range, a model that cannot
load, a prompt that is not one: ``specdec.api_inputs``) raises ``specdec.errors.BadInput`` /
``MissingInput`` naming the input and the fix. A ``Decoder`` runs one call at a time: a call from
another thread waits for the running one (``specdec.turns``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from omegaconf import DictConfig, open_dict

from specdec.api_inputs import check_call, parse_prompt
from specdec.errors import BadInput, InputError, input_error
from specdec.paths import CONF_DIR
from specdec.streaming import Chunk, Stream, StreamCancelled
from specdec.turns import Turns

if TYPE_CHECKING:
    from specdec.bench.run.method import Method
    from specdec.models import ModelPair
    from specdec.sampling import Sampling

__all__ = ["Chunk", "Decoder", "Output", "StreamCancelled", "load", "overrides_for"]


@dataclass(frozen=True)
class Output:
    """A generation: its text, its new token ids and its stats (``specdec.metrics.summarize`` of
    the one generation, plus ``tau``: tokens per target forward, the block efficiency)."""

    text: str
    tokens: list[int]
    stats: dict


def _value(value: object) -> str:
    """A Python value as a Hydra override value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_value(v) for v in value) + "]"
    text = str(value)
    if re.fullmatch(r"[\w./:@+~-]+", text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def overrides_for(
    target: str, draft: str | None, method: str, overrides: Mapping[str, object]
) -> list[str]:
    """The eval command's overrides for ``load``'s arguments: ``target`` names a pair preset
    (``conf/model/<target>.yaml``: ``tiny``, ``smollm2``) or a hub id / folder (``model=hf``);
    ``draft`` sets ``model.draft``; ``foo__bar=1`` is ``foo.bar=1``."""
    preset = re.fullmatch(r"[\w-]+", target) and (CONF_DIR / "model" / f"{target}.yaml").is_file()
    out = [f"method={method}"]
    if preset:
        out.append(f"model={target}")
    else:
        out += ["model=hf", f"model.target={_value(target)}"]
    if draft is not None:
        out.append(f"model.draft={_value(draft)}")
    out += [f"{key.replace('__', '.')}={_value(value)}" for key, value in overrides.items()]
    return out


def compose_eval(overrides: Sequence[str]) -> DictConfig:
    """``conf/eval.yaml`` composed with ``overrides`` as the CLI would (the ``hydra`` node kept:
    it records the group choices that asset paths name); a composition error is ``BadInput``."""
    from hydra.errors import HydraException

    from specdec.cli_check import check_overrides
    from specdec.config import compose_config

    check_overrides(list(overrides), "eval")  # a typo names the nearest choice (spss -> sps)
    try:
        cfg = compose_config("eval", overrides)
    except HydraException as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise BadInput(
            f"cannot compose the eval config from {list(overrides)}: {first}; see "
            "`python -m specdec.eval --help` for the groups and keys"
        ) from None
    with open_dict(cfg):
        cfg.paths.output_dir = None  # nothing is written: no run folder
    return cfg


def load(
    target: str = "tiny", draft: str | None = None, method: str = "sps", **overrides: object
) -> Decoder:
    """Load a pair and build a method preset on it, as ``python -m specdec.eval`` would.

    Args:
        target: ``tiny`` / ``smollm2`` (a ``conf/model`` preset) or a hub id / local folder.
        draft: the draft's hub id / folder (``None``: the preset's own, none for ``model=hf``;
            ``"none"``: no draft).
        method: a ``conf/method`` preset (``ar``, ``sps``, ``eagle3``, ...).
        overrides: any eval config key, e.g. ``device="cuda"``, ``**{"drafter.policy.gamma":
            3}`` or ``drafter__policy__gamma=3``, ``sampling__temperature=0.7``.

    Raises:
        BadInput, MissingInput: before any weights load, naming the input and the fix.
    """
    from hydra.utils import instantiate

    from specdec.bench.run.checks import check_where_loaded
    from specdec.bench.run.method import build_method
    from specdec.bench.run.preflight import preflight
    from specdec.bench.run.schema import validate

    cfg = compose_eval(overrides_for(str(target), draft, method, overrides))
    validate(cfg)  # the eval's checks, before anything loads
    preflight(cfg)
    if cfg.get("threads"):
        import torch

        torch.set_num_threads(int(cfg.threads))
    with input_errors():  # a loader's BadInput, not Hydra's InstantiationException around it
        pair = instantiate(cfg.model)
        check_where_loaded(pair, str(cfg.device))
        return Decoder(cfg, pair, build_method(cfg, pair))


@contextmanager
def input_errors() -> Iterator[None]:
    """Raise the ``InputError`` that Hydra's ``instantiate`` wrapped, as itself."""
    try:
        yield
    except InputError:
        raise
    except Exception as err:
        cause = input_error(err)
        if cause is None:
            raise
        raise cause from None


class Decoder:
    """A loaded pair with a method built on it; ``generate`` answers prompts.

    One call at a time: the pair's caches and the drafter hold the running generation's state, so
    a call (``generate``; building the method of a new temperature included) takes the decoder's
    turn, and a call from another thread **waits** until the running one ends; threads sharing a
    decoder get the tokens they would get one after the other. A stream holds the turn from its
    first ``next`` until its loop ends: read it to the end or close it (``stream.close()``,
    ``with``, ``break``, an exception or Ctrl-C in the loop reading it) to free the decoder at
    once. If the thread that opened a stream calls the decoder again while that stream is still
    open, the stream is cancelled (reading it raises ``StreamCancelled``) and the new call runs.
    Every call starts from reset caches, so a call after a stream closed early answers as a fresh
    decoder would.
    """

    def __init__(self, cfg: DictConfig, pair: ModelPair, method: Method) -> None:
        """``cfg``: the composed eval config; ``pair``: its ``ModelPair``; ``method``: the
        ``Method`` built from ``cfg`` on ``pair``."""
        self.cfg, self.pair, self.tokenizer, self.method = cfg, pair, pair.tokenizer, method
        self._turns = Turns()
        self._tokenizer_lock = threading.Lock()  # a stream's reader decodes outside the turn

    def _sampling_at(self, temperature: float | None) -> Sampling:
        """The method's sampling with ``temperature`` (None: the config's). The drafter holds no
        sampling (each step reads ``Context.sampling``), so the same method serves it."""

        if temperature is None:
            return self.method.sampling
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise BadInput(f"temperature must be a number >= 0 or None, got {temperature!r}")
        return replace(self.method.sampling, temperature=float(temperature))

    def encode(self, prompt: str | Sequence[Mapping[str, str]] | Sequence[int]) -> list[int]:
        """Prompt ids: a string is one user turn and a list of ``{"role", "content"}`` a
        conversation, both through the chat template as the eval encodes them; ids (a list, or a
        ``[T]`` / ``[1, T]`` integer tensor) pass as they are. Anything else (bytes, an int,
        ``None``, a ``[B, T]`` batch, an empty prompt) raises ``BadInput``."""
        from specdec.data.prompts import encode_turn

        parsed = parse_prompt(prompt, self.method.target.vocab_size)
        if parsed and isinstance(parsed[0], int):
            return parsed  # type: ignore[return-value]
        with self._tokenizer_lock:
            return encode_turn(self.tokenizer, parsed, chat_template=True)

    def generate(
        self,
        prompt: str | Sequence[Mapping[str, str]] | Sequence[int],
        *,
        max_new_tokens: int = 128,
        temperature: float | None = None,
        seed: int = 0,
        stream: bool = False,
        prompt_id: str = "api",
    ) -> Output | Stream[Output]:
        """Answer ``prompt``; with ``stream=True`` a ``Stream`` of per-step ``Chunk``s whose
        ``result`` is the ``Output`` once iterated (the arguments are checked now, the decoding
        starts with the first chunk).

        Args:
            prompt: a string, chat messages (``[{"role": ..., "content": ...}]``) or token ids
                (a list of ints, a ``[T]`` / ``[1, T]`` tensor); one prompt per call.
            max_new_tokens: at most this many new tokens (the tokenizer's EOS stops earlier).
            temperature: ``None``: the config's ``sampling.temperature``; else this one.
            seed, prompt_id: the coins are ``TorchCoins(prompt_seed(seed, prompt_id))``, turn 0,
                as the eval seeds the first turn of prompt ``prompt_id`` under ``seed=``
                (``seed``: an integer >= 0; ``prompt_id``: a non-empty string).
            stream: return a ``Stream`` (see the class docstring for when it frees the decoder).
        """
        check_call(max_new_tokens=max_new_tokens, seed=seed, prompt_id=prompt_id, stream=stream)
        with self._turns.hold():
            run = self._prepare(prompt, max_new_tokens, temperature, seed, prompt_id)
            if not stream:
                return run(None)
        return Stream(run, self._decode, take=self._turns.take, give_back=self._turns.give_back)

    def _prepare(
        self,
        prompt: object,
        max_new_tokens: int,
        temperature: float | None,
        seed: int,
        prompt_id: str,
    ) -> Callable[[Callable[[list[int]], None] | None], Output]:
        """The generation ``generate`` asked for, as a function of its ``on_step`` hook."""
        import torch

        from specdec.bench.run.checks import context_limits, fit_context
        from specdec.drafters.ahead import BackgroundError
        from specdec.engine import generate
        from specdec.metrics import summarize
        from specdec.sampling import TorchCoins, prompt_seed, turn_coins

        method, sampling = self.method, self._sampling_at(temperature)
        where = f"the prompt {prompt_id!r} given to Decoder.generate"
        ids, _ = fit_context(
            self.encode(prompt),
            max_new_tokens=max_new_tokens,
            limits=context_limits(self.pair),
            truncate=self.cfg.get("truncate_prompts"),
            where=where,
        )
        eos = self.tokenizer.eos_token_id
        budget = torch.get_num_threads()  # the caller's; a stream's worker thread runs with it

        def run(on_step: Callable[[list[int]], None] | None) -> Output:
            if torch.get_num_threads() != budget:
                torch.set_num_threads(budget)
            coins = turn_coins(TorchCoins(prompt_seed(seed, prompt_id)), 0)  # fresh per run
            try:
                out = generate(
                    ids,
                    method.target,
                    method.drafter,
                    method.verifier,
                    sampling=sampling,
                    coins=coins,
                    max_new_tokens=max_new_tokens,
                    stop_ids=[eos] if eos is not None else [],
                    on_step=on_step,
                )
            except BackgroundError as err:  # a drafter's worker failed: say on which prompt
                raise err.at(where) from err.__cause__
            stats = summarize([out.stats])
            stats["tau"] = stats["block_efficiency"]
            return Output(self._decode(out.tokens), [int(t) for t in out.tokens], stats)

        return run

    def _decode(self, tokens: list[int]) -> str:
        with self._tokenizer_lock:
            return self.tokenizer.decode(tokens, skip_special_tokens=True)
