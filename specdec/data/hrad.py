"""H-RAD training data (``stage=data`` of ``+experiment=hrad_*``): labelled decoding steps.

Labels come from the real decoding loop, so they are what the verifier decides: every training
prompt is decoded by ``engine.generate`` with the pair's default draft (``ModelPair.draft``) as a
chain drafter with a fixed γ_max = 7 (SpecBranch's all-accept length) and the ``Tokenwise``
verifier under the labels' sampling (greedy by default, T = 0). ``HradRecorder`` wraps that
drafter: before each draft it builds ``z_t`` with ``features.StepFeatures`` (the function a serving
drafter calls), and at ``observe`` it stores the step's accepted length n. Class (the public
SpecBranch
code's "0, 1–6, 7+"): 0 if n = 0, 2 if n = γ_max, else 1. Steps whose draft is shorter than γ_max
(the token budget's end, a drafted stop token) cannot be all-accept and are dropped (counted per
chunk as ``dropped_short``).

Prompts: the training splits (``data.training.training_prompts``: GSM8K train and
Alpaca train files, eval prompts excluded) or seeded synthetic prompts (``synthetic``, for the
tiny pair), chat-formatted like the eval. Splits by prompt (a hash of its text), never by step.

Stored per chunk of ``chunk_size`` prompts, resumable (``data.hrad_store``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from specdec.core import Context, Draft, Drafter, TargetView, Verdict
from specdec.data.hrad_store import SPLITS, check_meta, write_chunk
from specdec.data.training import DEFAULT_SETS, split_of
from specdec.errors import BadInput
from specdec.nets.hrad.features import StepFeatures

log = logging.getLogger(__name__)


def hrad_class(accepted: int, gamma_max: int) -> int:
    """SpecBranch's three classes of an accepted length: 0, 1..γ_max−1, γ_max → 0, 1, 2."""
    if not 0 <= accepted <= gamma_max:
        raise ValueError(f"accepted length {accepted} outside 0..gamma_max={gamma_max}")
    return 0 if accepted == 0 else 2 if accepted == gamma_max else 1


class HradRecorder(Drafter):
    """Wraps a chain drafter, records ``z_t`` and the verdict of every full-length draft.

    Args:
        inner: the chain drafter that decodes (its drafts, randomness and caches are untouched).
        layers: ``target_layers`` to read (``features.hrad_layers``).
        gamma_max: drafts of exactly this many tokens are recorded.
    """

    def __init__(self, inner: Drafter, layers: tuple[int, ...], gamma_max: int) -> None:
        self.inner, self.gamma_max = inner, int(gamma_max)
        self.models, self.target_layers = inner.models, tuple(layers)
        self.features = StepFeatures()
        self.view: TargetView | None = None
        self.rows: list[dict] = []
        self.dropped_short = 0
        self._pending: torch.Tensor | None = None  # [D] z of the draft being verified

    def reset(self) -> None:
        self.inner.reset()
        self.rows, self.dropped_short, self._pending = [], 0, None

    def attach(self, target: TargetView) -> None:
        self.view = target
        self.inner.attach(target)

    def prefill(self, prompt: torch.Tensor, features: torch.Tensor | None = None) -> None:
        self.features.prefill(features)
        self.inner.prefill(prompt, None)

    def propose(self, ctx: Context) -> Draft:
        assert self.view is not None, "attach() runs before propose()"
        self._pending = self.features(ctx, self.view)  # [D] or None
        return self.inner.propose(ctx)

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        # 1. A full-length draft with features gets a row; a short one cannot be all-accept.
        if self._pending is not None and draft.num_drafted == self.gamma_max:
            self.rows.append(
                {
                    "features": self._pending.cpu(),
                    "accepted": verdict.num_accepted,
                    "label": hrad_class(verdict.num_accepted, self.gamma_max),
                    "step": ctx.step,
                    "prefix_len": int(ctx.tokens.numel()),
                    "draft": draft.tokens[1:].cpu(),
                }
            )
        elif self._pending is not None:
            self.dropped_short += 1
        self._pending = None
        self.inner.observe(ctx, draft, verdict)

    def counters(self) -> dict[str, int]:
        return dict(self.inner.counters())


def synthetic_prompts(count: int, seed: int = 0, length: int = 12) -> list[str]:
    """Seeded random printable strings (pairs without training data: the tiny pair)."""
    gen, alphabet = torch.Generator().manual_seed(seed), "abcdefghijklmnopqrstuvwxyz ,.?"
    return [
        "".join(alphabet[i] for i in torch.randint(len(alphabet), (length,), generator=gen))
        for _ in range(count)
    ]


def prompt_texts(
    *, source_dir: str | None, datasets: list[str], limit: int | None, synthetic: dict | None
) -> list[str]:
    """User turns: ``synthetic`` (``{count, seed}``) or the training splits under ``source_dir``."""
    if synthetic is not None:
        return synthetic_prompts(**synthetic)
    if source_dir is None:
        raise BadInput("set data_gen.source_dir (training prompts) or data_gen.synthetic")
    from specdec.data.training import training_prompts

    return training_prompts(source_dir, datasets, limit)


def generate_hrad_data(
    model,
    out_dir: str,
    *,
    source_dir: str | None = None,
    datasets: tuple[str, ...] = DEFAULT_SETS,
    limit: int | None = None,
    synthetic: dict | None = None,
    gamma_max: int = 7,
    layers: int = 4,
    sampling: dict | None = None,
    max_new_tokens: int = 128,
    seed: int = 0,
    chunk_size: int = 16,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
) -> Path:
    """Decode every prompt with a γ_max chain drafter and write the labelled steps (see module).

    Args:
        model: the ``ModelPair``; its ``draft`` drafts, its ``target`` verifies.
        layers: K, the target's last K hidden states in the features.
        sampling: the labels' sampling (default greedy); draft and target warp alike.
        chunk_size: prompts per chunk file (the unit of resuming).

    Returns:
        ``out_dir``.
    """
    from specdec.compose import compose_method
    from specdec.data.prompts import encode_turn
    from specdec.drafters import ModelDrafter
    from specdec.drafters.policies import Fixed
    from specdec.engine import generate
    from specdec.nets.hrad.features import hrad_layers
    from specdec.sampling import Sampling, TorchCoins, prompt_seed
    from specdec.verifiers import Tokenwise

    if model.draft is None:
        raise BadInput(
            "H-RAD labels need a draft model: pick a pair with a draft (model.draft=none has none)"
        )
    smp = Sampling(**(sampling or {}))
    texts = prompt_texts(
        source_dir=source_dir, datasets=list(datasets), limit=limit, synthetic=synthetic
    )
    cfg = model.target.config
    out, target_layers = Path(out_dir), hrad_layers(int(cfg.num_hidden_layers), layers)
    check_meta(
        out,
        {
            "model": model.describe(),
            "target_hidden_size": int(cfg.hidden_size),
            "target_num_layers": int(cfg.num_hidden_layers),
            "target_vocab_size": int(model.target.get_output_embeddings().weight.shape[0]),
            "layers": layers,
            "gamma_max": gamma_max,
            "max_new_tokens": max_new_tokens,
            "sampling": {"temperature": smp.temperature, "top_k": smp.top_k, "top_p": smp.top_p},
            "seed": seed,
            "chunk_size": chunk_size,
            "prompts": len(texts),
            "val_fraction": val_fraction,
            "test_fraction": test_fraction,
        },
    )
    tok, width = model.tokenizer, (layers + 1) * int(cfg.hidden_size)
    # the eval's composition (specdec.compose): a γ_max chain drafter and the tokenwise verifier
    method = compose_method(model, smp, lambda lm: ModelDrafter(lm, Fixed(gamma_max)), Tokenwise)
    stop_ids = [tok.eos_token_id] if tok.eos_token_id is not None else []

    def decode(text: str) -> tuple[list[int], list[int], HradRecorder]:
        """The prompt's ids, its answer and the recorder that watched the decoding."""
        ids = encode_turn(tok, [{"role": "user", "content": text}], chat_template=True)
        recorder = HradRecorder(method.drafter, target_layers, gamma_max)
        gen = generate(
            ids,
            method.target,
            recorder,
            method.verifier,
            sampling=smp,
            coins=TorchCoins(prompt_seed(seed, text)),
            max_new_tokens=max_new_tokens,
            stop_ids=stop_ids,
        )
        return ids, gen.tokens, recorder

    for c, start in enumerate(range(0, len(texts), chunk_size)):
        path = out / f"chunk_{c:05d}.safetensors"
        if path.exists():
            continue
        rows, seqs, seq_prompt, dropped = [], [], [], 0
        for i in range(start, min(start + chunk_size, len(texts))):
            # 1. Decode the prompt with the recording γ_max chain drafter (the eval's loop).
            ids, answer, recorder = decode(texts[i])
            # 2. Its rows, all in the prompt's split.
            split = SPLITS.index(split_of(texts[i], val_fraction, test_fraction))
            rows += [{**r, "prompt": i, "split": split} for r in recorder.rows]
            seqs.append(ids + answer)
            seq_prompt.append(i)
            dropped += recorder.dropped_short
        write_chunk(path, rows, seqs, seq_prompt, gamma_max, width, dropped)
        log.info(
            "hrad data: chunk %d (%d prompts, %d steps, %d short drafts dropped)",
            c,
            min(start + chunk_size, len(texts)),
            len(rows),
            dropped,
        )
    return out
