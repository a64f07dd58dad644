"""Broken ``model=hf`` folders fail naming the folder and the fix, not with a loader's traceback:
no weights file, a truncated safetensors file, no tokenizer, NaN weights; and a SmolLM2 cache
holding NaN names the cache folder to delete.

Before these checks a folder holding only ``config.json`` ended in a 40-line tokenizer traceback
and a truncated file in a ``SafetensorError`` traceback; NaN weights decoded until the engine
raised a ``NonFiniteLogits`` traceback that named no folder.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from specdec.errors import BadInput
from specdec.models.hf import check_reference, hf_pair
from specdec.models.smollm2 import CACHE_NAME, load_target
from specdec.models.tiny import byte_tokenizer, tiny_lm


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A good tiny model folder and its broken copies, by name."""
    root = tmp_path_factory.mktemp("hf")
    model = tiny_lm(259, hidden=32, layers=2, heads=2, seed=0, dtype=torch.float32)
    good = root / "good"
    model.save_pretrained(good)
    byte_tokenizer().save_pretrained(good)
    out = {"good": good}
    for name in ("truncated", "no_tokenizer", "config_only", "nan"):
        out[name] = root / name
        shutil.copytree(good, out[name])
    weights = out["truncated"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    for file in out["no_tokenizer"].glob("tokenizer*"):
        file.unlink()
    for file in out["config_only"].iterdir():
        if file.name != "config.json":
            file.unlink()
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight[0, 0] = float("nan")
    model.save_pretrained(out["nan"])
    return out


@pytest.mark.parametrize(
    "name, words",
    [
        ("truncated", "model.safetensors is truncated or padded"),
        ("no_tokenizer", "holds no tokenizer"),
        ("config_only", "holds no weights file"),
    ],
)
def test_a_broken_folder_is_refused_before_loading_naming_it(folders, name, words):
    with pytest.raises(BadInput, match=words) as err:
        check_reference(str(folders[name]), "model.target")
    assert str(folders[name]) in str(err.value) and "save_pretrained" in str(err.value)


def test_a_good_folder_passes_and_nan_weights_are_named_when_loaded(folders):
    check_reference(str(folders["good"]), "model.target")
    assert hf_pair(str(folders["good"])).target is not None
    with pytest.raises(BadInput, match="up_proj.weight holds NaN or infinite values") as err:
        hf_pair(str(folders["good"]), str(folders["nan"]))
    assert f"model.draft={folders['nan']}" in str(err.value)


def test_a_smollm2_cache_with_nan_weights_names_the_folder_to_delete(folders, tmp_path):
    cache = tmp_path / CACHE_NAME
    shutil.copytree(folders["nan"], cache)
    with pytest.raises(BadInput, match="holds NaN or infinite values") as err:
        load_target(tmp_path)
    assert f"delete the folder {cache} and rerun" in str(err.value)
