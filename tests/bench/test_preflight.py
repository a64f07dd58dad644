"""The eval's pre-flight on the existing pairs: what the config alone shows fails before loading.

Before ``specdec.bench.run.preflight``, each case below loaded the pair first (the tiny pair, the
SmolLM2 GGUF, a hub tokenizer) and only then failed, or, for an uncached hub id, ended in a raw
``OSError``; each pair factory is replaced by one that fails the test if it is called.
"""

from __future__ import annotations

import pytest

import specdec.bench.run.runner as ev
from specdec.bench.run.preflight import needs_draft_model
from specdec.errors import BadInput, MissingInput

FAST = [
    "benchmark=tiny",
    "limit=1",
    "max_new_tokens=4",
    "warmup=0",
    "progress=false",
    "cost_model=false",
]


def _boom(*args, **kwargs):
    raise AssertionError("the pair loaded before the config's checks")


def _fails(compose, tmp_path, overrides, error, words):
    cfg = compose("eval", [*FAST, *overrides])
    cfg.paths.output_dir = str(tmp_path / "run")
    with pytest.raises(error, match=words) as info:
        ev.run(cfg)
    return str(info.value)


def test_tiny_missing_asset_fails_before_the_pair_loads(compose, tmp_path, monkeypatch):
    import specdec.models.tiny as tiny

    monkeypatch.setattr(tiny, "tiny_pair", _boom)
    for method, key in (
        ("eagle3", "drafter.path"),
        ("specblock", "drafter.path"),
        ("specdecpp", "drafter.policy.head"),
    ):
        msg = _fails(
            compose,
            tmp_path,
            [f"method={method}", f"{key}={tmp_path / 'gone'}"],
            MissingInput,
            f"{key}=.*gone: the trained asset is missing",
        )
        assert f"train it with `python -m specdec.train +experiment={method}_tiny`" in msg


def test_explicit_hrad_head_is_checked_too(compose, tmp_path, monkeypatch):
    import specdec.models.tiny as tiny

    monkeypatch.setattr(tiny, "tiny_pair", _boom)
    _fails(
        compose,
        tmp_path,
        ["method=specbranch", f"drafter.hrad={tmp_path / 'hrad' / 'tiny'}"],
        MissingInput,
        r"drafter\.hrad=.*\+experiment=hrad_tiny",
    )


def test_smollm2_without_draft_refuses_draft_methods_before_loading(compose, tmp_path, monkeypatch):
    import specdec.models.smollm2 as smollm2

    monkeypatch.setattr(smollm2, "smollm2_pair", _boom)
    msg = _fails(
        compose,
        tmp_path,
        ["model=smollm2", "model.draft=none", "method=sps"],
        BadInput,
        "method sps drafts with a draft model",
    )
    assert "conf/model/smollm2.yaml" in msg


def test_paper_pair_uncached_offline_names_the_download(compose, tmp_path, monkeypatch):
    import huggingface_hub.constants
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", _boom)
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", _boom)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _fails(
        compose,
        tmp_path,
        ["model=llama68m_llama2_7b", "method=ar"],
        MissingInput,
        "`hf download meta-llama/Llama-2-7b-hf`",
    )


@pytest.mark.parametrize(
    "target, needs",
    [
        ("specdec.drafters.EmptyDrafter", False),
        ("specdec.drafters.eagle3.Eagle3Drafter", False),
        ("specdec.drafters.specblock.SpecBlockDrafter", False),
        ("specdec.drafters.ModelDrafter", True),
        ("specdec.drafters.TopKTreeDrafter", True),
        ("specdec.drafters.MultiDraftDrafter", True),
        ("specdec.drafters.pearl.PearlDrafter", True),
        ("specdec.drafters.ssd.SsdDrafter", True),
        ("specdec.drafters.specbranch.SpecBranchDrafter", True),
    ],
)
def test_which_drafters_need_a_draft_model(target, needs):
    assert needs_draft_model(target) is needs


def test_ar_and_feature_methods_run_without_a_draft(compose, tmp_path):
    """No refusal where no draft model is needed (the check reads constructors, not names)."""
    from specdec.bench.run.preflight import check_draft_model

    for method in ("ar", "eagle3", "specblock"):
        check_draft_model(
            compose("eval", ["model=smollm2", "model.draft=none", f"method={method}"])
        )
