"""Opt-in task quality (``quality=true``), reported beside speed: a lossless method keeps quality.

A dataset names its check in ``conf/dataset/<name>.yaml`` as a ``_target_`` config (``quality:
{_target_: specdec.bench.quality.GSM8KAccuracy}``; ``quality: null`` for none); the runner builds
it once per dataset and calls it as ``check(prompt, answers, timeout_s=...)`` on every prompt. A
check is a small callable class (``QualityCheck``) with a ``name``: the record and the summary hold
its score as ``quality_<name>``.

* ``GSM8KAccuracy`` (``gsm8k_accuracy``): the last number in the answer equals the GSM8K final
  answer (``#### n``, kept in the prompt's ``meta.answer``), compared as numbers.
* ``HumanEvalPass1`` (``humaneval_pass1``): the prompt and the completion (cut at HumanEval's
  stop sequences) run in ``specdec.bench.sandbox`` (its own process group, empty environment,
  temporary folder, memory/CPU/process/file limits, no network, no host processes and no
  writes outside its folder where the OS allows); the task's unit tests run apart, in the
  sandbox's supervisor, and call the completed function across a pipe (``sandbox.judge``), so
  the completion cannot reach the verdict. pass@1 with one sample per task (Chen et al. 2021).
  It scores 1.0 only on a clean pass. This executes model-written code, so it runs only with
  ``confirm_run_unsafe_code=true`` (``check_unsafe_code_confirmed``, called before any model
  loads), like lm-evaluation-harness's ``--confirm_run_unsafe_code``.
* ``RougeL`` (``rouge_l``): ROUGE-L F1 against the reference (``rouge-score``, Lin 2004).

Each returns a float in [0, 1] per prompt; the summary reports the mean over prompts. A check
declares ``runs_model_code``; those that do need the confirmation flag.
"""

from __future__ import annotations

import logging
import re
from typing import Protocol

from hydra.utils import get_class
from omegaconf import DictConfig

from specdec.bench.sandbox import Limits, SandboxResult, TaskTests, run_sandboxed
from specdec.data.prompts import Prompt
from specdec.errors import BadInput

log = logging.getLogger(__name__)

HUMANEVAL_STOPS = ("\nclass ", "\ndef ", "\n#", "\nif __name__", "\nprint(", "\nassert ")
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def gsm8k_correct(text: str, answer: str) -> float:
    """1.0 when the last number in ``text`` equals ``answer`` (commas and ``$`` ignored)."""
    found = NUMBER.findall(text.replace("$", ""))
    if not found:
        return 0.0
    try:
        return float(float(found[-1].replace(",", "")) == float(answer.replace(",", "")))
    except ValueError:
        return 0.0


def truncate_completion(completion: str) -> str:
    """Cut a code completion at the first HumanEval stop sequence (end of the function body)."""
    cut = min(
        (i for s in HUMANEVAL_STOPS if (i := completion.find(s)) >= 0), default=len(completion)
    )
    return completion[:cut]


def humaneval_run(
    prompt: str,
    completion: str,
    test: str,
    entry_point: str,
    *,
    timeout_s: float = 10.0,
    limits: Limits | None = None,
) -> SandboxResult:
    """Run ``prompt + completion`` (cut at the stops) sandboxed; ``test``'s ``check`` is judged
    apart, given the program's ``entry_point``."""
    program = f"{prompt}{truncate_completion(completion)}\n"
    return run_sandboxed(
        program,
        timeout_s=timeout_s,
        limits=limits,
        tests=TaskTests(code=test, entry_point=entry_point, context=prompt),
    )


def humaneval_pass(
    prompt: str, completion: str, test: str, entry_point: str, *, timeout_s: float = 10.0
) -> float:
    """1.0 when the completion passes the task's tests cleanly in the sandbox, else 0.0."""
    return float(humaneval_run(prompt, completion, test, entry_point, timeout_s=timeout_s).passed)


def _rouge_scorer():
    try:
        from rouge_score import rouge_scorer
    except ImportError as e:
        raise ValueError(
            "quality check rouge_l needs `pip install rouge-score`; or set quality=false"
        ) from e
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 (stemmed) of a prediction against one reference."""
    return float(_rouge_scorer().score(reference, prediction)["rougeL"].fmeasure)


class QualityCheck(Protocol):
    """What a dataset's ``quality:`` config builds."""

    name: str  # scores are recorded as quality_<name>
    runs_model_code: bool  # True: needs confirm_run_unsafe_code=true

    def __call__(self, prompt: Prompt, answers: list[str], *, timeout_s: float = 10.0) -> float:
        """Score a prompt's answers (one per turn) in [0, 1].

        Raises:
            ValueError: the prompt lacks the data the check needs.
        """
        ...


class GSM8KAccuracy:
    """Final-answer accuracy of the last turn's answer against ``meta.answer``."""

    name = "gsm8k_accuracy"
    runs_model_code = False

    def __call__(self, prompt: Prompt, answers: list[str], *, timeout_s: float = 10.0) -> float:
        if "answer" not in prompt.meta:
            raise ValueError(f"prompt {prompt.id} has no meta.answer; re-run prepare_data.py")
        return gsm8k_correct(answers[-1], prompt.meta["answer"])


class HumanEvalPass1:
    """pass@1 of the completion against the task's ``check(entry_point)`` (runs model code)."""

    name = "humaneval_pass1"
    runs_model_code = True

    def __init__(self) -> None:
        self.warned = False

    def __call__(self, prompt: Prompt, answers: list[str], *, timeout_s: float = 10.0) -> float:
        if not {"test", "entry_point"} <= set(prompt.meta):
            raise ValueError(
                f"prompt {prompt.id} has no meta.test/entry_point; re-run prepare_data.py"
            )
        result = humaneval_run(
            prompt.turns[0],
            answers[-1],
            prompt.meta["test"],
            prompt.meta["entry_point"],
            timeout_s=timeout_s,
        )
        if not result.network_isolated and not self.warned:
            self.warned = True
            log.warning(
                "HumanEval code runs without network isolation on this machine "
                "(sandbox layers: %s)",
                ", ".join(result.layers) or "none",
            )
        return float(result.passed)


class RougeL:
    """ROUGE-L F1 of the last turn's answer against the prompt's reference."""

    name = "rouge_l"
    runs_model_code = False

    def __init__(self) -> None:
        self.scorer = _rouge_scorer()  # fails before generation when rouge-score is missing

    def __call__(self, prompt: Prompt, answers: list[str], *, timeout_s: float = 10.0) -> float:
        if prompt.reference is None:
            raise ValueError(f"prompt {prompt.id} has no reference for ROUGE-L")
        return float(self.scorer.score(prompt.reference, answers[-1])["rougeL"].fmeasure)


def check_unsafe_code_confirmed(cfg: DictConfig) -> None:
    """Refuse a run whose quality checks execute model code unless the config confirms it.

    Raises:
        ValueError: ``quality=true`` on a dataset whose check runs model code (HumanEval)
            without ``confirm_run_unsafe_code=true``.
    """
    if not cfg.quality or cfg.confirm_run_unsafe_code:
        return
    risky = [
        name
        for name, ds in cfg.benchmark.datasets.items()
        if ds.get("quality") is not None and get_class(ds.quality._target_).runs_model_code
    ]
    if risky:
        raise BadInput(
            f"quality=true on {', '.join(risky)} executes model-written code; add "
            "confirm_run_unsafe_code=true to run it in the sandbox (specdec/bench/sandbox/), "
            "or set quality=false"
        )
