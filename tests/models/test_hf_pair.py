"""``model=hf``: any pair by folder or hub id, on config-only stubs of two families (Llama, Qwen2).

The stubs are tiny random models saved with ``save_pretrained`` beside the tiny pair's byte-level
tokenizer (``specdec.models.tiny.byte_tokenizer``); the Qwen2 draft has padding rows past the
tokenizer (as the real Qwen2.5 pairs do), which the pair machinery reconciles. Each family runs
``method=sps`` through the eval runner in-process and must answer greedily what ``ar`` answers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

import specdec.bench.run.runner as ev
from specdec.errors import BadInput, MissingInput
from specdec.testing.hf_stubs import FAMILIES, save_stub
from specdec.testing.paths import REPO

FAST = [
    "benchmark=tiny",
    "limit=1",
    "max_new_tokens=8",
    "warmup=0",
    "progress=false",
    "cost_model=false",
]


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    """``{family: (target folder, draft folder)}``."""
    root = tmp_path_factory.mktemp("stubs")
    out = {}
    for i, family in enumerate(FAMILIES):
        draft_rows = 264 if family == "qwen2" else 259
        target = save_stub(root / f"{family}-target", family, layers=2, seed=10 + i)
        out[family] = (
            target,
            save_stub(
                root / f"{family}-draft",
                family,
                layers=2,
                seed=20 + i,
                vocab=draft_rows,
                like=target,
            ),
        )
    return out


def _run(compose, out: Path, overrides: list[str]) -> list[dict]:
    cfg = compose("eval", [*FAST, *overrides])
    cfg.paths.output_dir = str(out)
    summary = ev.run(cfg)
    records = [json.loads(x) for x in (out / "records" / "tiny.jsonl").read_text().splitlines()]
    return [summary, records]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_hf_pair_sps_is_greedy_identical_to_ar(compose, stubs, tmp_path, family):
    target, draft = stubs[family]
    pair = [f"model.target={target}", f"model.draft={draft}"]
    ar_sum, ar = _run(compose, tmp_path / "ar", ["model=hf", "method=ar", *pair])
    sps_sum, sps = _run(compose, tmp_path / "sps", ["model=hf", "method=sps", *pair])
    assert len(ar) == len(sps) == 1 and len(ar[0]["output_ids"][0]) == 8
    assert sps[0]["output_ids"] == ar[0]["output_ids"]
    # both verification outcomes happened: the identity covers accepted and rejected drafts
    assert 0 < sps[0]["accepted"] < sps[0]["drafted"], (sps[0]["accepted"], sps[0]["drafted"])
    assert sps_sum["model"]["name"] == f"{family}-target"
    assert sps_sum["model"]["target"] == target and sps_sum["model"]["draft"] == draft
    if family == "qwen2":  # padding rows of the draft, reconciled to the target's
        assert sps_sum["model"]["draft_rows"] == "264 (target 259)"


def test_draft_none_means_no_draft(stubs):
    from specdec.models.hf import hf_pair

    target, _ = stubs["llama"]
    for draft in (None, "none", "None"):
        pair = hf_pair(target, draft)
        assert pair.draft is None and pair.name == "llama-target"
        assert pair.info["target"] == target


@pytest.fixture
def no_loading(monkeypatch, tmp_path):
    """Any weight or tokenizer load fails the test; an empty Hugging Face cache; offline."""

    def boom(*args, **kwargs):
        raise AssertionError(f"loaded {args[:1]} before the config's checks")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", boom)
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", boom)
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _fails(compose, tmp_path, overrides: list[str], error: type, words: str) -> str:
    cfg = compose("eval", [*FAST, *overrides])
    cfg.paths.output_dir = str(tmp_path / "run")
    with pytest.raises(error, match=words) as info:
        ev.run(cfg)
    return str(info.value)


def test_missing_draft_fails_before_loading(compose, stubs, tmp_path, no_loading):
    target, _ = stubs["qwen2"]
    for method in ("sps", "pearl", "ssd"):
        msg = _fails(
            compose,
            tmp_path,
            ["model=hf", f"model.target={target}", f"method={method}"],
            BadInput,
            "model.draft=<hub id",
        )
        assert f"method {method}" in msg and "method=ar" in msg


def test_missing_asset_names_the_experiment_before_loading(compose, stubs, tmp_path, no_loading):
    target, draft = stubs["llama"]
    pair = ["model=hf", f"model.target={target}", f"model.draft={draft}"]
    for method in ("eagle3", "specblock", "specdecpp"):  # the generic experiment, this pair
        experiment = f"{method} model=hf model.target={target} model.draft={draft}"
        msg = _fails(
            compose,
            tmp_path,
            [*pair, f"method={method}"],
            MissingInput,
            re.escape(f"`python -m specdec.train +experiment={experiment}`"),
        )
        assert "train it with" in msg and "no experiment trains it yet" not in msg


def test_uncached_hub_id_offline_names_the_download(compose, tmp_path, no_loading):
    msg = _fails(
        compose,
        tmp_path,
        ["model=hf", "model.target=specdec-test/uncached-target", "method=ar"],
        MissingInput,
        "`hf download specdec-test/uncached-target`",
    )
    assert "HF_HUB_OFFLINE=1" in msg
    _fails(
        compose,
        tmp_path,
        [
            "model=hf",
            "model.target=specdec-test/uncached-target",
            "model.draft=specdec-test/uncached-draft",
            "method=ar",
        ],
        MissingInput,
        "model.target=specdec-test/uncached-target",
    )


def test_bad_references_fail_before_loading(compose, stubs, tmp_path, no_loading):
    (tmp_path / "empty").mkdir()
    cases = [
        (["model.target=" + str(tmp_path / "empty")], "folder without config.json"),
        (["model.target=" + str(tmp_path / "absent")], "no model folder there"),
        (
            [f"model.target={stubs['llama'][0]}", "model.draft=" + str(tmp_path / "absent")],
            r"model\.draft=.*no model folder there",
        ),
        ([], r"model=hf needs the target model: add model\.target="),
    ]
    for overrides, words in cases:
        _fails(compose, tmp_path, ["model=hf", "method=ar", *overrides], BadInput, words)


@pytest.mark.slow
def test_cli_uncached_hub_id_is_one_error_line(tmp_path):
    """The command line: one ``error:`` line naming the download, exit 2, no traceback (~6-12 s
    for the interpreter and Hydra; the in-process tests above cover the checks themselves)."""
    import os
    import subprocess
    import sys

    from specdec.errors import EXIT_STATUS

    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=hf",
        "model.target=specdec-test/uncached",
        "method=sps",
        "benchmark=tiny",
        "hydra.mode=RUN",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == EXIT_STATUS and len(errors) == 1, proc.stderr[-2000:]
    assert "`hf download specdec-test/uncached`" in errors[0]
    assert "Traceback" not in proc.stderr
