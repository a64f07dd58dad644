"""Every ``_target_`` under conf/ binds to its callable's signature (torchtune's config._validate).

Static: nothing is built and interpolations stay unresolved, so a misspelled key or a moved class
fails here, naming the file and key path, before any run instantiates it.
"""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from specdec.config import config_errors, target_errors
from specdec.paths import CONF_DIR
from specdec.testing.paths import REPO

ROOT = REPO
SWEEPS = ROOT / "scripts" / "sweeps"
YAMLS = sorted((CONF_DIR).rglob("*.yaml")) + sorted(SWEEPS.glob("*.yaml"))
FILES = [p for p in YAMLS if "_target_" in p.read_text()]
METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


def test_the_walk_reaches_every_group_with_targets():
    groups = {p.relative_to(CONF_DIR).parts[0] for p in FILES if CONF_DIR in p.parents}
    assert {
        "drafter",
        "verifier",
        "model",
        "trainer",
        "learner",
        "experiment",
        "dataset",
        "logger",
        "eval.yaml",
    } <= groups


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_every_target_binds(path):
    assert target_errors(path) == []


def _composed(cfg) -> dict:
    return {k: v for k, v in OmegaConf.to_container(cfg, resolve=False).items() if k != "hydra"}


@pytest.mark.parametrize("method", METHODS)
def test_method_preset_deltas_bind(compose, method):
    assert config_errors(_composed(compose("eval", [f"method={method}"])), method) == []


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_deltas_bind(compose, experiment):
    cfg = compose("train", [f"+experiment={experiment}"])
    assert config_errors(_composed(cfg), experiment) == []


def test_a_misspelled_key_and_a_wrong_target_are_both_reported(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text(
        "# @package _global_\n"
        "drafter:\n"
        "  policy:\n"
        "    _target_: specdec.drafters.policies.Fixed\n"
        "    gama: 4\n"
        "verifier:\n"
        "  _target_: specdec.verifiers.Tokenwize\n"
        "sources:\n"
        "  - {_target_: specdec.drafters.policies.Fixed, gamma: '${oc.env:G,4}', _partial_: true}\n"
    )
    errors = target_errors(path)
    assert len(errors) == 2, errors
    typo, missing = errors
    assert typo.startswith(f"{path}: drafter.policy: ") and "'gama'" in typo and "gamma" in typo
    assert missing.startswith(f"{path}: verifier: ") and "cannot import" in missing
    assert "specdec.verifiers.Tokenwize" in missing


def test_keyword_sinks_positional_args_and_nesting(tmp_path):
    path = tmp_path / "more.yaml"
    path.write_text(
        "a:\n"
        "  _target_: builtins.print\n"  # print(*values, sep=..., ...): no **kwargs
        "  _args_: [1, 2]\n"
        "  sep: ','\n"
        "  nested:\n"
        "    - {_target_: specdec.learners.specdecpp.module.export_head, anything: 1}\n"
        "b: {_target_: specdec.drafters.policies.Fixed, _args_: [1, 2, 3, 4, 5, 6]}\n"
    )
    errors = target_errors(path)
    assert len(errors) == 2, errors  # a.nested[0] takes **meta: no error there
    assert errors[0].startswith(f"{path}: a: ") and "'nested'" in errors[0]
    assert errors[1].startswith(f"{path}: b: ") and "too many positional" in errors[1]


def test_both_smollm2_feature_drafters_make_their_shared_data_the_same_way(compose):
    # eagle3_smollm2 and specblock_smollm2 read one traces folder: stage=data of either must be
    # the same call, or one would regenerate (or mix) the other's prompts there.
    made = [
        OmegaConf.to_container(compose("train", [f"+experiment={name}"]).data_gen, resolve=True)
        for name in ("eagle3_smollm2", "specblock_smollm2")
    ]
    assert made[0] == made[1]
    assert made[0]["limit"] == 2064 and made[0]["self_instruct"]["count"] > 0
