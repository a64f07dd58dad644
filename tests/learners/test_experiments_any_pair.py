"""Every learned method's generic experiment trains for any Hugging Face pair (``model=hf``).

Config-only stubs of two families (Llama, Qwen2; ``specdec.testing.hf_stubs``) stand in for a
user's pair. For EAGLE-3 and SpecBlock the full route runs in-process on each: ``stage=data``
(synthetic prompts: the tests have no shared data) -> one batch of fit with ``trainer=debug`` ->
export into tmp, then the eval loads the exported drafter on the same pair and must answer
greedily what ``ar`` answers (tree verification keeps the target's argmax whatever the head).
Model-specific keys come from the model config: the target layers from the stub's config.json,
the asset, traces and run names from the target folder's name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specdec.bench.run.runner as ev
from specdec.config import ROOT, feature_layers
from specdec.testing.hf_stubs import FAMILIES, save_stub
from specdec.train import train

EVAL = [
    "benchmark=tiny",
    "limit=1",
    "max_new_tokens=8",
    "warmup=0",
    "progress=false",
    "cost_model=false",
]


@pytest.fixture(scope="module")
def targets(tmp_path_factory) -> dict[str, str]:
    """``{family: target folder}``: 4-layer stubs, so the target layers are not the tiny ones."""
    root = tmp_path_factory.mktemp("pairs")
    return {
        family: save_stub(root / f"my-{family}", family, layers=4, seed=30 + i)
        for i, family in enumerate(FAMILIES)
    }


def _pair(target: str) -> list[str]:
    return ["model=hf", f"model.target={target}"]


def test_the_generic_experiments_read_the_pair_from_the_model_config(compose, targets):
    target = targets["llama"]
    cfg = compose("train", ["+experiment=eagle3", *_pair(target)])
    assert cfg.task_name == "eagle3_my-llama"
    assert list(cfg.learner.target_layers) == list(cfg.data_gen.target_layers) == [1, 2, 4]
    assert cfg.export.asset == str(ROOT / "specdec" / "assets" / "eagle3" / "my-llama")
    assert cfg.datamodule.traces_dir.endswith("/eagle3/my-llama")
    block = compose("train", ["+experiment=specblock", *_pair(target)])
    assert block.datamodule.traces_dir == cfg.datamodule.traces_dir  # EAGLE-3's data, shared
    assert block.data_gen == cfg.data_gen  # stage=data of either is the same resumable call
    for kind in ("hrad", "specdecpp", "draft_lm"):
        other = compose("train", [f"+experiment={kind}", *_pair(target), "model.draft=/d"])
        assert other.task_name == f"{kind}_my-llama"
        assert other.export.asset == str(ROOT / "specdec" / "assets" / kind / "my-llama")
        assert other.learner.model.target == target
    head = compose("train", ["+experiment=hrad", *_pair(target), "model.draft=/d"])
    assert head.export.experiment == f"hrad model=hf model.target={target} model.draft=/d"
    # a preset's name stays its experiment's name
    assert compose("train", ["+experiment=hrad_tiny"]).export.experiment == "hrad_tiny"


def test_the_eval_looks_for_the_pairs_drafter_where_the_experiment_installs_it(compose, targets):
    target = targets["qwen2"]
    trained = compose("train", ["+experiment=eagle3", *_pair(target)]).export.asset
    served = compose("eval", ["method=eagle3", *_pair(target)]).drafter
    assert served.path == trained
    assert served.experiment == f"eagle3 model=hf model.target={target}"
    block = compose("eval", ["method=specblock", *_pair(target)]).drafter
    assert block.path == compose("train", ["+experiment=specblock", *_pair(target)]).export.asset


def test_feature_layers_are_low_middle_high():
    assert feature_layers(30) == [2, 15, 27]  # the SmolLM2 preset's list
    assert feature_layers(2) == [0, 1, 2]  # the tiny preset's list
    assert feature_layers(4) == [1, 2, 4]
    assert feature_layers(32) == [2, 16, 29]  # EAGLE-3's [2, L/2, L-3] on an 8B Llama


def _decode(compose, out: Path, overrides: list[str]) -> list:
    cfg = compose("eval", [*EVAL, *overrides])
    cfg.paths.output_dir = str(out)
    ev.run(cfg)
    lines = (out / "records" / "tiny.jsonl").read_text().splitlines()
    return [json.loads(x)["output_ids"] for x in lines]


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("kind", ["eagle3", "specblock"])
def test_data_fit_export_then_eval_on_a_users_pair(compose, targets, tmp_path, family, kind):
    target = targets[family]
    small = [
        f"+experiment={kind}",
        *_pair(target),
        "data_gen=synthetic_features",
        "data_gen.synthetic.prompts=8",
        "data_gen.synthetic.max_new=8",
        f"paths.cache_dir={tmp_path / 'cache'}",
        "datamodule.batch_size=4",
        "datamodule.max_len=32",
        "datamodule.val_fraction=0.25",
    ]
    if kind == "specblock":
        small += ["learner.rank_hidden=16", "learner.blocks=2", "export.int8=[]"]
    train(compose("train", [*small, "stage=data"]))
    train(
        compose(
            "train",
            [*small, "trainer=debug", f"export.folder={tmp_path / 'head'}", "export.dtype=float32"],
        )
    )
    assert (tmp_path / "head" / "model.safetensors").is_file()
    ar = _decode(compose, tmp_path / "ar", ["method=ar", *_pair(target)])
    drafted = _decode(
        compose,
        tmp_path / kind,
        [f"method={kind}", *_pair(target), f"drafter.path={tmp_path / 'head'}"],
    )
    assert len(ar) == 1 and len(ar[0][0]) == 8
    assert drafted == ar


def test_an_unknown_experiment_is_one_error_line_naming_the_generic_form(capsys):
    from specdec.errors import BadInput, exit_on_input_error
    from specdec.train import check_experiment

    check_experiment(["+experiment=eagle3_tiny", "model=hf", "stage=data"])  # known: no error
    with pytest.raises(SystemExit) as stop, exit_on_input_error():
        check_experiment(["+experiment=eagle3_mypair", "stage=data"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: +experiment=eagle3_mypair: ")
    assert "python -m specdec.train +experiment=eagle3 model=hf model.target=<hub id|folder>" in err
    with pytest.raises(BadInput, match=r"draft_lm model=hf model.target="):
        check_experiment(["experiment=draft_lm_mine"])
    with pytest.raises(BadInput, match=r"pick one of: draft_lm, draft_lm_smollm2, eagle3,"):
        check_experiment(["+experiment=eagle"])


@pytest.fixture(scope="module")
def llama_pair(targets, tmp_path_factory) -> list[str]:
    """The Llama stub with a draft near it (``save_stub(like=...)``): some drafts accepted."""
    target = targets["llama"]
    draft = save_stub(
        tmp_path_factory.mktemp("draft") / "my-draft", "llama", layers=2, seed=40, like=target
    )
    return [*_pair(target), f"model.draft={draft}"]


def test_specdecpp_head_trains_and_serves_on_a_users_pair(compose, llama_pair, tmp_path):
    small = [
        "+experiment=specdecpp",
        *llama_pair,
        f"paths.cache_dir={tmp_path / 'cache'}",
        "data_gen.sources=[{name: synthetic, limit: 8}]",
        "data_gen.max_new_tokens=8",
        "data_gen.val_fraction=0.25",
        "data_gen.test_fraction=0.25",
        "datamodule.batch_size=4",
    ]
    train(compose("train", [*small, "stage=data"]))
    train(compose("train", [*small, "trainer=debug", f"export.folder={tmp_path / 'head'}"]))
    meta = json.loads((tmp_path / "head" / "config.json").read_text())
    assert meta["experiment"].startswith("specdecpp model=hf model.target=")
    ar = _decode(compose, tmp_path / "ar", ["method=ar", *llama_pair])
    served = _decode(
        compose,
        tmp_path / "pp",
        ["method=specdecpp", *llama_pair, f"drafter.policy.head={tmp_path / 'head'}"],
    )
    assert served == ar and len(ar[0][0]) == 8
