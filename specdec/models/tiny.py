"""The tiny random pair (``model=tiny``): seeded Llama-style models built from configs, no download.

The tokenizer is byte-level (256 byte symbols + 3 specials, no merges), built in-process, so the
real benchmark prompts encode and the whole eval pipeline runs on it; it carries a ChatML template.
Random weights are drawn under a forked RNG seeded by ``seed`` (the global RNG is left untouched).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from specdec.models.exact import exact_float64
from specdec.models.pair import ModelPair, make_pair, with_static
from specdec.models.placement import Placement
from specdec.models.placement_config import refuse_split
from specdec.static_cache import static_spec

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with no merges: every UTF-8 byte is a token (259 ids)."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    for s in SPECIALS:
        vocab[s] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    out = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIALS,
    )
    out.chat_template = CHATML
    return out


def tiny_lm(
    vocab_size: int, *, hidden: int, layers: int, heads: int, seed: int, dtype: torch.dtype
) -> LlamaForCausalLM:
    """A seeded random Llama-style causal LM."""
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        # a larger init spread makes the random model's conditionals less uniform
        for p in model.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.5 / hidden**0.5 * 4)
    exact_float64(model)  # float64 (the exactness tests) computes in float64 throughout
    return model.to(dtype).eval()


def tiny_pair(
    *,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 2,
    draft_hidden: int = 32,
    draft_layers: int = 1,
    seed: int = 0,
    draft_seed: int = 1,
    draft_vocab_size: int | None = None,
    vocab_size: int | None = None,
    placement: Placement | Mapping | None = None,
    static_cache: bool = False,
    max_cache_len: int | None = None,
    cuda_graphs: bool | None = None,
) -> ModelPair:
    """Build the tiny random target/draft pair.

    Args:
        hidden, layers, heads: target size. draft_hidden, draft_layers: draft size.
        seed, draft_seed: weight seeds (equal seeds and sizes give a draft identical to the target).
        vocab_size, draft_vocab_size: output rows of the target and of the draft (default: the
            tokenizer's 259); rows past 259 are padding rows (``specdec.vocab``), fewer rows than
            259 are refused.
        placement: where both models go and in what dtype (``Placement.from_config``: the model
            config's ``placement:`` node, some of its keys, or a ``Placement``; None: CPU,
            float32): ``dtype`` ``float32`` or ``float64`` (exactness tests), ``device``,
            ``linear_kernel``, ``draft_device`` / ``draft_threads``
            (``specdec.models.pair.make_pair``).
        static_cache, max_cache_len, cuda_graphs: the decoding caches' kind and their replay
            (``specdec.static_cache``, ``specdec.graphs``).
    """
    spec = static_spec(static_cache, max_cache_len, cuda_graphs)
    where = Placement.from_config(placement)
    refuse_split(where, "tiny")
    tok = byte_tokenizer()
    target = tiny_lm(
        vocab_size or len(tok),
        hidden=hidden,
        layers=layers,
        heads=heads,
        seed=seed,
        dtype=where.dtype,
    )
    draft = tiny_lm(
        draft_vocab_size or len(tok),
        hidden=draft_hidden,
        layers=draft_layers,
        heads=heads,
        seed=draft_seed,
        dtype=where.dtype,
    )
    target, draft = target.to(where.device), draft.to(where.device)
    pair = make_pair(
        "tiny",
        target,
        draft,
        tok,
        {"seed": str(seed), "draft_seed": str(draft_seed)},
        placement=where,
    )
    return with_static(pair, spec)
