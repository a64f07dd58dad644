"""``python -m specdec.eval``: benchmark one method preset on a model pair and a prompt set.

Steps: load the pair once → build target ``CachedLM``, drafter, verifier from the config groups →
for each prompt: per-prompt coins seeded from (seed, prompt id) → ``engine.generate`` → append one
JSONL record → ``summary.json`` (metrics of ``specdec.metrics``) and a printed table.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import hydra
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from specdec.core import Drafter, Verifier
from specdec.data.prompts import Prompt, encode_turn, load_jsonl_prompts
from specdec.engine import check_compatible, generate
from specdec.lm import CachedLM
from specdec.metrics import GenerationStats, summarize
from specdec.models import ModelPair
from specdec.sampling import Sampling, TorchCoins, prompt_seed
from specdec.utils import format_table, register_resolvers

log = logging.getLogger(__name__)


def build_method(
    cfg: DictConfig, pair: ModelPair
) -> tuple[CachedLM, Drafter, Verifier, Sampling]:
    """Instantiate the target cache, drafter and verifier that the method preset chose."""
    sampling = Sampling(**OmegaConf.to_container(cfg.sampling, resolve=True))
    target = CachedLM(pair.target, role="target")
    draft = CachedLM(pair.draft, role="draft") if pair.draft is not None else None
    drafter = instantiate(cfg.drafter, lm=draft, sampling=sampling)
    verifier = instantiate(cfg.verifier)
    check_compatible(target, drafter, verifier)
    return target, drafter, verifier, sampling


def run_prompt(
    prompt: Prompt,
    pair: ModelPair,
    parts: tuple[CachedLM, Drafter, Verifier, Sampling],
    *,
    seed: int,
    max_new_tokens: int,
    chat_template: bool,
) -> tuple[str, GenerationStats]:
    """Generate the answer to every turn of a prompt (later turns see the model's own answers)."""
    target, drafter, verifier, sampling = parts
    coins = TorchCoins(prompt_seed(seed, prompt.id))
    stop_ids = [pair.tokenizer.eos_token_id] if pair.tokenizer.eos_token_id is not None else []
    messages: list[dict[str, str]] = []
    total, answers = GenerationStats(), []
    for turn in prompt.turns:
        messages.append({"role": "user", "content": turn})
        ids = encode_turn(pair.tokenizer, messages, chat_template=chat_template)
        out = generate(ids, target, drafter, verifier, sampling=sampling, coins=coins,
                       max_new_tokens=max_new_tokens, stop_ids=stop_ids)
        answer = pair.tokenizer.decode(out.tokens, skip_special_tokens=True)
        messages.append({"role": "assistant", "content": answer})
        answers.append(answer)
        _merge(total, out.stats)
    return "\n\n".join(answers), total


def _merge(total: GenerationStats, s: GenerationStats) -> None:
    for name in ("new_tokens", "target_forwards", "draft_forwards", "drafted", "accepted",
                 "prefill_s", "decode_s", "draft_s"):
        setattr(total, name, getattr(total, name) + getattr(s, name))
    total.accepted_per_step += s.accepted_per_step
    total.drafted_per_step += s.drafted_per_step
    total.forwards += s.forwards


def run(cfg: DictConfig) -> dict:
    """Run the evaluation described by ``cfg``; returns the summary dict."""
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pair: ModelPair = instantiate(cfg.model)
    parts = build_method(cfg, pair)
    ds = cfg.dataset
    limit = cfg.limit if cfg.limit is not None else ds.get("limit")
    prompts = load_jsonl_prompts(ds.path, ds.name, limit)
    max_new = int(ds.get("max_new_tokens") or cfg.max_new_tokens)
    kwargs = dict(seed=cfg.seed, max_new_tokens=max_new, chat_template=ds.get("chat_template", True))
    for prompt in prompts[: cfg.warmup]:
        run_prompt(prompt, pair, parts, **kwargs)  # warm-up: not recorded
    records_dir = out_dir / "records"
    records_dir.mkdir(exist_ok=True)
    stats: list[GenerationStats] = []
    with (records_dir / f"{ds.name}.jsonl").open("a") as f:
        for prompt in prompts:
            text, s = run_prompt(prompt, pair, parts, **kwargs)
            stats.append(s)
            rec = {"prompt_id": prompt.id, "dataset": prompt.dataset, "category": prompt.category,
                   "method": cfg.method_name, "seed": cfg.seed, **s.to_dict(), "text": text}
            f.write(json.dumps(rec) + "\n")
            f.flush()
    summary = {
        "method": cfg.method_name,
        "lossless": bool(getattr(parts[2], "lossless", False)),
        "model": pair.describe(),
        "sampling": OmegaConf.to_container(cfg.sampling, resolve=True),
        "datasets": {ds.name: summarize(stats)},
        "config": OmegaConf.to_container(cfg, resolve=True),
        "torch": torch.__version__,
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(format_table(cfg.method_name, summary["datasets"]))
    log.info("wrote %s", out_dir / "summary.json")
    return summary


@hydra.main(version_base="1.3", config_path="../conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    register_resolvers()
    main()
