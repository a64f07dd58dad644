"""``--help`` of both entry points lists their own groups, options and keys (conf/hydra/help/)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from specdec.cli_help import describe, group_options, primary_keys
from specdec.paths import CONF_DIR
from specdec.testing.paths import REPO

ROOT = REPO


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = {}
    for app in ("eval", "train"):
        done = subprocess.run(
            [sys.executable, "-m", f"specdec.{app}", "--help"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        out[app] = done.stdout
    return out


def _options(text: str, header: str) -> set[str]:
    """Option names listed under the section whose title starts with ``header``."""
    section = text.split(f"== {header}", 1)[1].split("\n\n", 1)[0]
    return {m[1] for m in re.finditer(r"^  (\S+)  ", section, re.M)}


def test_eval_help_lists_methods_pairs_benchmarks_datasets_and_keys(helps):
    text = helps["eval"]
    methods = {p.stem for p in (CONF_DIR / "method").glob("*.yaml")}
    assert {"ar", "sps", "hsd", "hsd_code", "eagle3"} <= methods == _options(text, "Methods")
    assert {"smollm2", "tiny", "qwen25_05b_14b"} <= _options(text, "Model pairs")
    assert {"default", "all", "tiny"} <= _options(text, "Benchmarks")
    assert {"gsm8k", "humaneval", "mt_bench"} <= _options(text, "Datasets")
    # the description column's width follows the longest name
    assert re.search(r"^  hsd_code +Draft LM chain, HSD as in the public code", text, re.M)
    for key in (
        "limit=null",
        "max_new_tokens=null",
        "quality=false",
        "sampling.temperature=0.0",
        "device=cpu",
    ):
        assert re.search(rf"^  {re.escape(key)}(\s|$)", text, re.M), key


def test_eval_help_lists_no_train_group_and_train_help_no_eval_group(helps):
    ev, tr = helps["eval"], helps["train"]
    for train_only in (
        "== Experiments",
        "== Trainers",
        "== Callbacks",
        "eagle3_tiny ",
        "ckpt_path=",
        "monitor.metric=",
    ):
        assert train_only not in ev, train_only
    for eval_only in (
        "== Methods",
        "== Model pairs",
        "== Datasets",
        "hsd_code",
        "humaneval",
        "max_new_tokens=",
    ):
        assert eval_only not in tr, eval_only


def test_train_help_lists_experiments_learners_trainers_callbacks_and_keys(helps):
    text = helps["train"]
    experiments = {p.stem for p in (CONF_DIR / "experiment").glob("*.yaml")}
    assert {"eagle3_tiny", "specdecpp_smollm2"} <= experiments == _options(text, "Experiments")
    assert _options(text, "Learner configs") == {
        "specdecpp",
        "hrad",
        "eagle3",
        "specblock",
        "draft_lm",
    }
    assert {"cpu", "gpu", "ddp", "ddp_cpu", "fsdp", "debug"} == _options(text, "Trainers")
    assert {"default", "none", "early_stopping", "model_checkpoint"} <= _options(text, "Callbacks")
    for key in ("stage=fit", "ckpt_path=null", "monitor.metric=val/loss", "monitor.mode=min"):
        assert re.search(rf"^  {re.escape(key)}(\s|$)", text, re.M), key
    assert "frozen draft of ${model}" in text  # a `$` of a config file survives Hydra's Template


@pytest.mark.parametrize("name", ["eval", "train"])
def test_every_listed_key_exists_in_the_composed_config(compose, name):
    cfg = compose(name)
    keys = [m[1] for m in re.finditer(r"^  (\S+?)=", primary_keys(name), re.M)]
    assert len(keys) >= 5
    missing = [k for k in keys if OmegaConf.select(cfg, k, default="<missing>") == "<missing>"]
    assert missing == []


def test_description_joins_an_open_sentence_and_stops_at_a_new_one(tmp_path):
    group = tmp_path / "g"
    group.mkdir()
    (group / "a.yaml").write_text(
        "# @package _global_\n# First (open,\n# closed) here.\n# Second statement.\nx: 1\n"
    )
    (group / "b.yaml").write_text("# Costs $5: a line,\n# continued.\n# New one.\n")
    (group / "c.yaml").write_text("x: 1  # no leading comment\n")
    assert describe(group / "a.yaml") == "First (open, closed) here."
    assert group_options("g", conf=tmp_path).splitlines() == [
        "  a  First (open, closed) here.",
        "  b  Costs $$5: a line, continued.",
        "  c",
    ]
    with pytest.raises(ValueError, match="no config group 'nope'"):
        group_options("nope", conf=tmp_path)
