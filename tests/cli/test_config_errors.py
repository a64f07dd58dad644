"""Every class of bad config value ends in one ``error:`` line and exit 2 naming the input and the
fix, and every tree size knob is refused before allocation.

Table-driven, one row per case, in process where the check runs (``check_command_line`` for what
Hydra would reject, the eval runner for the rest); a few subprocess rows check the wiring of the
entry points. Before this change each row ended in a traceback, Hydra's option dump or exit 1.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

import specdec.bench.run.method as method_module
import specdec.bench.run.runner as ev
from specdec.cli_check import check_command_line, check_flag_order, check_overrides
from specdec.drafters.ahead import machine_cores
from specdec.drafters.limits import ENV, MAX_TREE_NODES, max_tree_nodes
from specdec.errors import EXIT_STATUS, BadInput, input_error
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO

ROOT = REPO
ASSETS = ROOT / "specdec" / "assets"
EAGLE3 = [f"drafter.path={ASSETS / 'eagle3' / 'tiny'}", "drafter.experiment=eagle3_tiny"]
SPECBLOCK = [f"drafter.path={ASSETS / 'specblock' / 'tiny'}", "drafter.experiment=specblock_tiny"]

COMMAND_LINE = [  # (config, argv, words of the message) -- Hydra rejected these before main ran
    ("eval", ["method=spss"], "method=spss is not an option of conf/method/; did you mean 'sps'"),
    ("eval", ["benchmark=gsm8kk"], "did you mean 'gsm8k'"),
    ("eval", ["drafter/policy=fxed"], "did you mean 'fixed'"),
    ("eval", ["-m", "method=ar,spss"], "method=spss is not an option"),
    ("eval", ["limt=3"], "limt is not a key of the config; did you mean 'limit'"),
    ("eval", ["sampling.tempreature=1"], "did you mean 'temperature'"),
    ("eval", ["method=eagle3", "drafter.topks=3"], "did you mean 'topk'"),
    ("eval", ["-m", "method=ar,eagle3", "drafter.topk=3"], "(in the sweep's job method=ar)"),
    ("eval", ["limit=[1"], "cannot parse the override 'limit=[1'"),
    ("eval", ["hparams_search=sps_optna"], "did you mean 'sps_optuna'"),
    ("eval", ["method=specblock_bandit", "drafter.arms={}"], "merges an empty mapping"),
    ("train", ["+experiment=eagle3_tny"], "did you mean 'eagle3_tiny'"),
    ("train", ["lerner=x"], "did you mean 'learner'"),
    # a typo in a middle segment: the node where the path leaves the config, its nearest keys
    (
        "eval",
        ["method=pld", "drafter.max_ngarm.x=1"],
        "drafter.max_ngarm is not a key of the config; did you mean 'max_ngram'",
    ),
    (
        "eval",
        ["model=hf", "model.target=x", "model.tagret.path=x"],
        "model.tagret is not a key of the config; did you mean 'target'",
    ),
    # a key only the sweep's other method has: named, not the pair's mandatory model.target
    (
        "eval",
        ["-m", "method=ar,eagle3", "model=hf", "model.target=/tmp", "drafter.path=/x"],
        "drafter.path is not a key of the config (keys of drafter: drafter._target_)",
    ),
    # overrides after a flag: argparse would say only "unrecognized arguments"
    (
        "eval",
        ["model=tiny", "-m", "method=ar,sps", "benchmark=tiny"],
        "put the flags first: python -m specdec.eval -m model=tiny method=ar,sps benchmark=tiny",
    ),
]


@pytest.mark.parametrize(
    "config, argv, words", COMMAND_LINE, ids=[" ".join(c[1]) for c in COMMAND_LINE]
)
def test_hydra_composition_errors_name_the_override_and_the_nearest_names(config, argv, words):
    with pytest.raises(BadInput) as err:
        check_command_line(argv, config)
    assert words in str(err.value)


def test_the_python_api_check_suggests_the_nearest_method():
    """``check_overrides``: the check ``specdec.load`` runs on the overrides it composes."""
    with pytest.raises(
        BadInput, match="method=spss is not an option of conf/method/; did you mean 'sps'"
    ):
        check_overrides(["method=spss", "model=tiny"], "eval")
    check_overrides(["method=sps", "model=tiny", "drafter.policy.gamma=3"], "eval")


def _readme_commands(config: str) -> list[list[str]]:
    """The ``python -m specdec.<config>`` command lines of the code blocks of the README and the
    docs (continuations joined), as argument lists after the module name; lines with shell
    variables are left out."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [b for p in pages for b in p.read_text().split("```")[1::2]]
    out = []
    for line in "\n".join(blocks).replace("\\\n", " ").splitlines():
        start = line.find(f"python -m specdec.{config} ")
        if start < 0 or "$" in line:
            continue
        words = shlex.split(line[start:].split("&&")[0].split("|")[0], comments=True)
        out.append(words[3:])
    return out


def test_documented_eval_commands_put_flags_before_overrides():
    commands = _readme_commands("eval")
    assert len(commands) > 5 and any("-m" in words for words in commands)
    for words in commands:
        check_flag_order([w for w in words if "<" not in w], "eval")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["method=ar"],
        ["-m", "method=eagle3,eagle3_hsd", "drafter.topk=3"],
        ["--help"],
        ["--cfg", "job", "method=spss"],
        ["method=ar", "hydra.mode=RUN", "hydra.run.dir=/tmp/x"],
    ],
)
def test_good_command_lines_and_hydra_flags_pass(argv):
    check_command_line(argv, "eval")


@pytest.fixture
def no_models(monkeypatch):
    """Any instantiate of the runner (the pair, the logger) means the run went past the checks."""
    monkeypatch.setattr(ev, "instantiate", lambda *a, **k: pytest.fail("a model was loaded"))


P = "model.placement"  # the model config's placement node (specdec/models/placement_config.py)
BEFORE_LOADING = [  # (overrides, words) -- checked by schema.validate from the composed config
    ([f"{P}.draft_threads=abc"], f"{P}.draft_threads='abc' is not valid: expected an integer"),
    ([f"{P}.draft_device=meta"], f"{P}.draft_device=meta holds no weights"),
    ([f"{P}.draft_device=gpu"], f"{P}.draft_device='gpu' is not a torch device"),
    ([f"{P}.linear_kernel=bogus"], f"{P}.linear_kernel='bogus' is not a kernel; use one of"),
    ([f"model.placement.draft_threads={machine_cores() + 1}"], "CPU cores this process may use"),
    (["model.placement.dtype=float8"], "model.placement.dtype='float8' is not known"),
    (
        ["method=sps", "drafter.policy.gamma=abc"],
        "drafter.policy.gamma='abc' is not valid: expected an integer",
    ),
    (["method=sps", "drafter.policy.gamma=2.5"], "drafter.policy.gamma=2.5 is not valid"),
    (["method=adaedl", "drafter.policy.max_len=x"], "drafter.policy.max_len='x' is not valid"),
    (["method=ssd", "drafter.prior_accept=abc"], "drafter.prior_accept='abc' is not valid"),
    (["method=hsd_tree", "drafter.branching=[2,x]"], "drafter.branching=[2, 'x'] is not valid"),
    (["method=sps", "+drafter.foo=1"], "takes no argument 'foo'"),
    (["method=sps", "drafter=tree"], "verifies chains only; pick a tree verifier (verifier="),
    (["optimized_metric=bogus"], "optimized_metric='bogus' is not a run metric"),
    # torch accepts cpu:1 and runs on the one CPU device while the records would say cpu:1
    ([f"{P}.draft_device=cpu:1"], f"{P}.draft_device=cpu:1: torch has one CPU device"),
    (["device=cpu:1"], "device=cpu:1: torch has one CPU device"),
]


@pytest.mark.parametrize(
    "overrides, words", BEFORE_LOADING, ids=[" ".join(c[0]) for c in BEFORE_LOADING]
)
def test_component_keys_are_checked_before_any_model_loads(tmp_path, no_models, overrides, words):
    with pytest.raises(BadInput) as err:
        ev.run(eval_cfg(tmp_path, overrides))
    assert words in str(err.value)


@pytest.fixture
def no_generation(monkeypatch):
    """A size knob must fail while the method is built, before the first draft allocates."""
    monkeypatch.setattr(
        method_module, "generate", lambda *a, **k: pytest.fail("generation started")
    )


WHEN_BUILT = [  # (overrides, words) -- ranges and sizes the constructors check (tiny vocab: 259)
    (["method=adaedl", "drafter.policy.threshold=1.5"], "drafter.policy.threshold=1.5 is not"),
    (["method=ssd", "drafter.prior_accept=2"], "0 < drafter.prior_accept < 1"),
    (["method=hsd", "verifier.final_accept=x"], "verifier.final_accept must be one of"),
    (
        ["method=hsd_tree", "drafter.branching=[100000,2]"],
        "drafter.branching=100000 exceeds the draft vocabulary (259 tokens)",
    ),
    (["method=hsd_tree", "drafter.branching=[30,30,2]"], "makes up to 4531 draft nodes"),
    (["method=rrs", "drafter.num_drafts=100000"], "makes up to 400001 draft nodes"),
    (["method=eagle3", "drafter.topk=100000", *EAGLE3], "drafter.topk=100000 exceeds"),
    (["method=eagle3", "drafter.topk=40", *EAGLE3], "drafter.topk=40 (depth 5)"),
    (["method=eagle3", "drafter.total_tokens=5000", *EAGLE3], "makes up to 5001 draft nodes"),
    (["method=specbranch", "drafter.hrad=null", "drafter.k_max=1000"], "makes up to 7001"),
    (["method=specbranch", "drafter.hrad=null", "drafter.k_max=200"], "makes up to 1401"),
    (["method=ssd", "drafter.budget=100000"], "makes up to 500001 draft nodes"),
    (["method=specblock", "drafter.total_tokens=5000", *SPECBLOCK], "makes up to 5001"),
    (
        ["method=specblock", "drafter.widths=[1,2,1000,0]", *SPECBLOCK],
        "drafter.widths=1000 exceeds the draft vocabulary",
    ),
    (
        ["method=specblock_bandit", "drafter.arms.head.total_tokens=5000", *SPECBLOCK],
        "makes up to 5001",
    ),
]


@pytest.mark.parametrize(
    "overrides, words", WHEN_BUILT, ids=[" ".join(c[0][:2]) for c in WHEN_BUILT]
)
def test_ranges_and_tree_sizes_are_refused_before_drafting(
    tmp_path, no_generation, overrides, words, monkeypatch
):
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(Exception) as err:
        ev.run(eval_cfg(tmp_path, overrides))
    cause = input_error(err.value)  # Hydra's instantiate wraps the constructor's error
    assert cause is not None, repr(err.value)
    assert words in str(cause)


def test_the_tree_cap_is_one_documented_number_the_environment_can_raise(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert max_tree_nodes() == MAX_TREE_NODES == 1024
    monkeypatch.setenv(ENV, "5000")
    assert max_tree_nodes() == 5000
    monkeypatch.setenv(ENV, "lots")
    with pytest.raises(BadInput, match=f"{ENV}='lots' is not valid"):
        max_tree_nodes()


def test_an_uncached_hub_model_names_the_download_command(monkeypatch):
    from specdec.models.pair import load_pair

    with pytest.raises(FileNotFoundError) as err:  # MissingInput
        load_pair("x", "specdec-nobody/not-a-model/at-all")
    assert input_error(err.value) is not None
    for words in (
        "model.target='specdec-nobody/not-a-model/at-all'",
        "hf download specdec-nobody/not-a-model/at-all",
        "huggingface-cli download",
        "HF_HUB_OFFLINE",
    ):
        assert words in str(err.value)


SUBPROCESS = [  # the entry points' wiring: (overrides, words)
    (["method=spss"], "did you mean 'sps'"),
    (["method=sps", "drafter.policy.gamma=abc"], "drafter.policy.gamma='abc' is not valid"),
    (["method=ar", "benchmark.datasets.tiny.path={empty}"], "has no prompts"),
]


@pytest.mark.parametrize("overrides, words", SUBPROCESS, ids=[c[1] for c in SUBPROCESS])
def test_the_eval_command_prints_one_error_line_and_exits_2(tmp_path, overrides, words):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "benchmark=tiny",
        *[o.format(empty=empty) for o in overrides],
        "hydra.mode=RUN",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert proc.returncode == EXIT_STATUS, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and words in errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
