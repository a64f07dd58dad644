"""Bad input ends with one ``error: ...`` line and status 2, no traceback (specdec/errors.py).

The target is no raw traceback for a bad config value: before errors.py every check raised a
plain ValueError, which Hydra printed under a traceback of the checking code. In a multirun (the
eval's default mode) a failed job's error line shows once.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from hydra.errors import InstantiationException

from specdec.errors import (
    EXIT_STATUS,
    BadInput,
    InputError,
    MissingInput,
    exit_on_input_error,
    input_error,
)
from specdec.testing.paths import REPO

ROOT = REPO


def test_input_errors_keep_the_builtin_types_callers_catch():
    assert isinstance(BadInput("x"), ValueError) and isinstance(BadInput("x"), InputError)
    assert isinstance(MissingInput("x"), FileNotFoundError)
    assert isinstance(MissingInput("x"), InputError)


def test_an_input_error_prints_its_message_and_exits_2(capsys, monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit) as exit_info, exit_on_input_error():
        raise BadInput("limit='abc' is not valid")
    assert exit_info.value.code == EXIT_STATUS
    assert capsys.readouterr().err == "error: limit='abc' is not valid\n"


def test_an_input_error_wrapped_by_hydra_instantiate_is_found(capsys, monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit), exit_on_input_error():
        try:
            raise BadInput("learner.ttt_steps must be >= 1, got 0")
        except BadInput as err:
            raise InstantiationException("Error in call to target 'X'") from err
    assert capsys.readouterr().err == "error: learner.ttt_steps must be >= 1, got 0\n"


def test_other_errors_and_hydra_full_error_keep_the_traceback(monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(ValueError, match="a bug"), exit_on_input_error():
        raise ValueError("a bug")  # not an input error: its traceback is the information
    with pytest.raises(RuntimeError), exit_on_input_error():
        raise RuntimeError("wrapped bug") from KeyError("k")
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    with pytest.raises(BadInput), exit_on_input_error():
        raise BadInput("shown with its traceback")


def test_input_error_walks_the_cause_chain_once():
    a = RuntimeError("outer")
    a.__cause__ = a  # a cycle must not hang
    assert input_error(a) is None
    inner = MissingInput("asset missing")
    outer = RuntimeError("outer")
    outer.__cause__ = inner
    assert input_error(outer) is inner


CASES = [  # (entry point, overrides, words the message must contain)
    ("specdec.eval", ["limit=abc"], "limit='abc' is not valid"),
    ("specdec.eval", ["sampling.temperature=hot"], "sampling.temperature='hot' is not valid"),
    ("specdec.eval", ["max_new_tokens=-1"], "max_new_tokens=-1 is not valid"),
    ("specdec.eval", ["method=eagle3", "drafter.topk=0"], "drafter.topk"),  # inside instantiate
    ("specdec.train", ["stage=bogus"], "unknown stage 'bogus'"),
]
NO_CUDA = pytest.mark.skipif(
    torch.cuda.is_available(), reason="device=cuda is refused only where CUDA is absent"
)
CASES.append(
    pytest.param(
        "specdec.eval", ["device=cuda"], "run with device=cpu", marks=NO_CUDA, id="device=cuda"
    )
)


@pytest.mark.parametrize(
    "module, overrides, words", CASES, ids=[getattr(c, "id", None) or " ".join(c[1]) for c in CASES]
)
def test_entry_points_report_bad_input_without_a_traceback(tmp_path, module, overrides, words):
    base = ["method=ar", "model=tiny", "benchmark=tiny"] if module == "specdec.eval" else []
    if module == "specdec.eval" and any(o.startswith("method=") for o in overrides):
        base = base[1:]
    cmd = [
        sys.executable,
        "-m",
        module,
        *base,
        *overrides,
        "hydra.mode=RUN",
        f"hydra.run.dir={tmp_path}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert proc.returncode == EXIT_STATUS, proc.stderr[-3000:]
    assert "error: " in proc.stderr and words in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]


def test_a_failed_sweep_job_prints_its_error_once_in_one_run_folder(tmp_path):
    """A missing asset in a one-job multirun: its line once (not again in the board's list and the
    sweep's summary), exit 2, and the job's folder one level deep although the override holds a
    path."""
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "-m",
        "method=eagle3",
        "model=tiny",
        "benchmark=tiny",
        f"drafter.path={tmp_path / 'absent'}",
        "limit=1",
        "warmup=0",
        "progress=false",
        f"paths.log_dir={tmp_path / 'logs'}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_STATUS, out[-3000:]
    assert out.count("the trained asset is missing") == 1, out[-3000:]
    assert "Traceback" not in out
    (summary,) = (tmp_path / "logs" / "eval" / "tiny" / "tiny" / "eagle3").glob("*/summary.json")
    assert "drafter.path=" in summary.parent.name
