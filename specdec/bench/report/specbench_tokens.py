"""The baseline's token count as Spec-Bench's ``evaluation/speed.py`` takes it: re-tokenised text.

Spec-Bench (Xia et al. 2024, arXiv:2401.07851; repository ``hemingkx/Spec-Bench``) counts the
method's tokens from its answer rows (Σ ``new_tokens``) but the baseline's from its answer *text*:
per turn, the number of ids the tokenizer given as ``--tokenizer-path`` makes of the turn's text
(special tokens added, as a plain ``tokenizer(text)`` call adds them) less one (the BOS of the
Llama-family tokenizers it was written for). That count is not the number of generated ids: text
decoded without special tokens loses the stop id, a byte-level tokenizer's invalid UTF-8 bytes
decode to U+FFFD (three bytes back), BPE merges the decoded text its own way, and a tokenizer
without a BOS (SmolLM2's, the tiny pair's) loses one real token per turn. The speed table follows
that convention so that its numbers are speed.py's on the same files.

``retokenizer(run)`` loads the tokenizer of the run's target offline, from what its summary's
config names (``model=tiny``: the byte-level tokenizer built in-process; ``model=smollm2``: the
target's cache folder; ``model=hf``: the target's hub id or folder). Where it cannot (another
pair, an uncached hub id), the count falls back to the generated ids and ``why_not`` says so; the
export notes it, as speed.py would then give another baseline number. ``save`` writes the
tokenizer into the export folder, so speed.py's ``--tokenizer-path`` can be given that folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdec.bench.report.runs import Run

TINY = "specdec.models.tiny.tiny_pair"
SMOLLM2 = "specdec.models.smollm2.smollm2_pair"
HF = "specdec.models.hf.hf_pair"


@dataclass
class Retokenizer:
    """A baseline run's tokenizer, or why there is none.

    Attributes:
        tokenizer: the target's tokenizer (None: not loadable).
        name: what it is (where it came from).
        pair: the baseline run's pair name.
        why_not: why it could not be loaded (None: loaded).
    """

    tokenizer: Any | None
    name: str
    pair: str
    why_not: str | None = None

    def tokens(self, choice: dict) -> int:
        """Spec-Bench's baseline tokens of one answer choice: Σ over its turns of
        len(tokenizer(text).input_ids) - 1; without a tokenizer, Σ ``new_tokens``."""
        if self.tokenizer is None:
            return sum(int(n) for n in choice["new_tokens"])
        return sum(len(self.tokenizer(text).input_ids) - 1 for text in choice["turns"])

    def save(self, folder: Path) -> Path | None:
        """Write the tokenizer (``save_pretrained``) into ``folder``; None without one."""
        if self.tokenizer is None:
            return None
        self.tokenizer.save_pretrained(str(folder))
        return folder


def _load(model: dict) -> tuple[Any, str]:
    """The tokenizer a model config names and its description (raises when it cannot)."""
    target = str(model.get("_target_", ""))
    if target == TINY:
        from specdec.models.tiny import byte_tokenizer

        return byte_tokenizer(), "the tiny pair's byte-level tokenizer"
    if target == SMOLLM2:
        from transformers import AutoTokenizer

        from specdec.models.smollm2 import CACHE_NAME, default_cache_dir

        folder = Path(model.get("cache_dir") or default_cache_dir()) / CACHE_NAME
        if not (folder / "tokenizer_config.json").is_file():
            raise FileNotFoundError(f"no SmolLM2 cache at {folder} (its eval makes it)")
        return AutoTokenizer.from_pretrained(str(folder)), f"SmolLM2's tokenizer from {folder}"
    if target == HF and model.get("target"):
        from transformers import AutoTokenizer

        ref = str(model["target"])
        return AutoTokenizer.from_pretrained(ref, trust_remote_code=False), f"{ref}'s tokenizer"
    raise LookupError(f"no tokenizer known for model {target or '(no _target_)'}")


def retokenizer(run: Run) -> Retokenizer:
    """The tokenizer of the run's target (see the module docstring), loaded offline."""
    model = (run.summary.config or {}).get("model")
    pair = (run.summary.model or {}).get("name", "pair")
    if not isinstance(model, dict):
        return Retokenizer(None, pair, pair, "the summary holds no model config")
    try:
        tokenizer, name = _load(model)
    except Exception as err:  # noqa: BLE001 - any loading failure falls back, named
        why = " ".join(str(err).split())[:200]
        return Retokenizer(None, pair, pair, f"cannot load the tokenizer of {pair} ({why})")
    return Retokenizer(tokenizer, name, pair)
