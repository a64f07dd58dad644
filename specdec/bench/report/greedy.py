"""Greedy equality: at temperature 0 a speculative method must emit exactly AR's tokens.

At temperature 0 the target distribution is one-hot on its argmax (``specdec.sampling.warp``), so
a lossless verifier (Leviathan et al. 2023, arXiv:2211.17192, Theorem 1; Chen et al. 2023,
arXiv:2302.01318) keeps a drafted token only when it is the target's argmax and otherwise emits
that argmax: the output is the target's greedy decoding, token for token. The only legitimate
cause of a difference is floating point: the method scores several tokens in one forward where AR
scores one, a different reduction order, so where the two largest logits are within rounding
(likely in bf16, rare in fp32, never seen in fp64) the argmax can flip and the outputs diverge
from there on. Any other mismatch is a bug; the report flags every one.

Compared: each prompt's ``output_ids`` (new token ids, one list per turn, in the records) of the
method run and of a baseline run (``ar``) whose target, prompts and sampling agree
(``specdec.bench.report.runs.OUTPUT_CHECKS``; machine and software may differ). Runs at a
temperature above 0, runs whose records predate ``output_ids``, and the baseline's own row get no
value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specdec.bench.report.runs import OUTPUT_CHECKS, Run, mismatches


@dataclass(frozen=True)
class Greedy:
    """Greedy equality of one method run against a baseline run on one dataset.

    Attributes:
        equal: prompts whose every turn's token ids equal the baseline's.
        prompts: prompts compared.
        mismatched: ids of the prompts that differ, in record order.
        baseline: the baseline run's folder.
    """

    equal: int
    prompts: int
    mismatched: tuple[str, ...]
    baseline: Path

    @property
    def fraction(self) -> float:
        return self.equal / self.prompts


def is_greedy(run: Run) -> bool:
    """Whether the run sampled at temperature 0 (greedy)."""
    return float((run.summary.sampling or {}).get("temperature", -1.0)) == 0.0


def greedy_equality(run: Run, base: Run, dataset: str) -> Greedy | None:
    """The share of prompts whose outputs equal ``base``'s; None where no comparison applies
    (see the module docstring)."""
    if run.path == base.path or not is_greedy(run) or dataset not in base.summary.datasets:
        return None
    if mismatches(run, base, dataset, target_only=True, only=OUTPUT_CHECKS):
        return None
    mine, theirs = run.records(dataset), {r["prompt_id"]: r for r in base.records(dataset)}
    pairs = [(r, theirs.get(r["prompt_id"])) for r in mine]
    if not pairs or any(
        b is None or "output_ids" not in a or "output_ids" not in b for a, b in pairs
    ):
        return None
    differ = tuple(a["prompt_id"] for a, b in pairs if a["output_ids"] != b["output_ids"])
    return Greedy(len(pairs) - len(differ), len(pairs), differ, base.path)


def find_greedy(
    run: Run, candidates: list[Run], dataset: str, preferred: Run | None = None
) -> Greedy | None:
    """Greedy equality against ``preferred`` (the speedup baseline) when it applies, else against
    the first candidate it applies to."""
    ordered = ([preferred] if preferred is not None else []) + candidates
    for base in ordered:
        if (found := greedy_equality(run, base, dataset)) is not None:
            return found
    return None
