"""Eval inputs that used to end in a traceback or a misleading hint, each now one ``InputError``
naming the input and the fix: a drafter or head trained for another pair (vocabulary, hidden
size), a target whose output is NaN, the run folder's lock, an empty asset folder.

The trained assets of the SmolLM2 pair (576 hidden, 49152 tokens) stand in for "another pair" on
the tiny pair (32 hidden, 259 tokens). Each case fails before the first draft: ``generate`` is
replaced by a failing stub.
"""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate

import specdec.bench.run.method as method_module
import specdec.bench.run.runner as ev
from specdec.bench.run.checks import check_target_output
from specdec.bench.rundir import RunDirInUse, RunLock
from specdec.errors import InputError, input_error
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO

SMOLLM2 = REPO / "specdec" / "assets"


@pytest.fixture
def no_generation(monkeypatch):
    monkeypatch.setattr(
        method_module, "generate", lambda *a, **k: pytest.fail("generation started")
    )


MISMATCHES = [  # (overrides, words): the key, both sizes, this pair's training command
    (
        [
            "method=eagle3",
            f"drafter.path={SMOLLM2 / 'eagle3' / 'smollm2'}",
            "drafter.experiment=eagle3_tiny",
        ],
        [
            "drafter.path=",
            "hidden size 576, but this target has 32",
            "python -m specdec.train +experiment=eagle3_tiny",
        ],
    ),
    (
        [
            "method=specblock",
            f"drafter.path={SMOLLM2 / 'specblock' / 'smollm2'}",
            "drafter.experiment=specblock_tiny",
        ],
        [
            "drafter.path=",
            "hidden size 576, but this target has 32",
            "python -m specdec.train +experiment=specblock_tiny",
        ],
    ),
    (
        [
            "method=specdecpp",
            f"drafter.policy.head={SMOLLM2 / 'specdecpp' / 'smollm2'}",
            "drafter.policy.experiment=specdecpp_tiny",
        ],
        [
            "drafter.policy.head=",
            "hidden states of size 576, but this pair's draft has hidden size 32",
            "python -m specdec.train +experiment=specdecpp_tiny",
        ],
    ),
    (
        ["method=specbranch", f"drafter.hrad={SMOLLM2 / 'hrad' / 'smollm2'}"],
        ["drafter.hrad=", "vocab_size 49152 (this target: 259)", "+experiment=hrad_tiny"],
    ),
]


@pytest.mark.parametrize("overrides, words", MISMATCHES, ids=[c[0][0] for c in MISMATCHES])
def test_an_asset_of_another_pair_is_refused_naming_key_and_this_pairs_experiment(
    tmp_path, no_generation, overrides, words
):
    with pytest.raises(Exception) as err:
        ev.run(eval_cfg(tmp_path, overrides))
    cause = input_error(err.value)  # Hydra's instantiate may wrap the drafter's error
    assert cause is not None, repr(err.value)
    for word in words:
        assert word in str(cause)
    assert "smollm2" not in str(cause).split("+experiment=")[-1]  # not the asset's own pair


def test_an_empty_asset_folder_names_this_pairs_experiment_not_the_folder(tmp_path, no_generation):
    empty = tmp_path / "empty"
    empty.mkdir()
    cfg = eval_cfg(
        tmp_path / "run",
        ["method=eagle3", f"drafter.path={empty}", "drafter.experiment=eagle3_tiny"],
    )
    with pytest.raises(InputError, match=f"drafter.path={empty} holds no config.json") as err:
        ev.run(cfg)
    assert "+experiment=eagle3_tiny" in str(err.value)


def test_a_target_with_nan_output_is_named_before_decoding(tmp_path):
    pair = instantiate(eval_cfg(tmp_path, ["method=ar"]).model)
    check_target_output(pair)  # the tiny pair's output is finite
    with torch.no_grad():
        pair.target.model.layers[0].mlp.up_proj.weight[0, 0] = float("nan")
    with pytest.raises(InputError, match="the target model produced NaN or \\+inf logits") as err:
        check_target_output(pair)
    assert "the target tiny" in str(err.value) and "model.placement.dtype=float16" in str(err.value)


def test_a_run_folder_in_use_is_an_input_error_naming_the_folder(tmp_path):
    with RunLock(tmp_path), pytest.raises(RunDirInUse) as err:
        ev.run(eval_cfg(tmp_path, ["method=ar"]))
    assert isinstance(err.value, RuntimeError)  # callers catching the old type still do
    assert f"run directory {tmp_path} is in use by another eval" in str(err.value)
    assert "hydra.run.dir=" in str(err.value)
