"""The README's runnable commands run.

A fenced block right after a ``<!-- runnable -->`` line holds commands a reader can paste: each
line is a ``python -m specdec.<entry> ...`` command on the tiny pair. By default each command is
only checked the way its entry point checks a command line before any work (groups, keys,
experiment names: ``specdec.cli_check``), which takes a second; under ``-m slow`` each one runs,
in order, as a subprocess from the repository root with ``paths.log_dir`` and
``paths.cache_dir`` pointed at a scratch folder (nothing lands in the checkout), and must exit 0.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from specdec.paths import ROOT

MARKER = "<!-- runnable -->"
FENCE = re.compile(r"<!-- runnable -->\s*\n```(?:bash|sh)?\n(.*?)\n```", re.S)


def runnable_commands(text: str) -> list[list[str]]:
    """The commands of every block marked runnable, as argument lists (comments dropped)."""
    out = []
    for block in FENCE.findall(text):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words:
                out.append(words)
    assert text.count(MARKER) == len(FENCE.findall(text)), "a marker not followed by a fence"
    return out


def _entry(words: list[str]) -> str:
    assert words[:3] in (["python", "-m", "specdec.eval"], ["python", "-m", "specdec.train"]), (
        f"a runnable command must be python -m specdec.eval|train: {shlex.join(words)}"
    )
    return words[2].split(".")[1]


def test_markers_are_found_and_bad_blocks_refused():
    text = f"x\n{MARKER}\n```bash\npython -m specdec.eval model=tiny  # a comment\n\n```\n"
    assert runnable_commands(text) == [["python", "-m", "specdec.eval", "model=tiny"]]
    with pytest.raises(AssertionError, match="marker"):
        runnable_commands(f"{MARKER}\nno fence here\n")
    with pytest.raises(AssertionError, match="python -m specdec"):
        _entry(["make", "eval"])


def test_the_readme_has_runnable_commands_that_pass_the_command_line_checks():
    from specdec.cli_check import check_command_line

    commands = runnable_commands((ROOT / "README.md").read_text())
    assert len(commands) >= 2 and {_entry(c) for c in commands} == {"eval", "train"}
    for words in commands:
        assert "-m" not in words[4:], f"Hydra's flags come before the overrides: {words}"
        argv = [w for w in words[3:] if w != "-m"]
        check_command_line(argv, _entry(words))  # an unknown +experiment= fails to compose


@pytest.mark.slow
def test_the_readme_runnable_commands_run(tmp_path):
    """About a minute on 2 busy cores: a tiny eval sweep and a tiny EAGLE-3 data stage + fit."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}
    scratch = [f"paths.log_dir={tmp_path / 'outputs'}", f"paths.cache_dir={tmp_path / 'cache'}"]
    for words in runnable_commands((ROOT / "README.md").read_text()):
        _entry(words)
        cmd = [sys.executable, *words[1:], *scratch]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{shlex.join(words)}\n{proc.stderr[-3000:]}"
