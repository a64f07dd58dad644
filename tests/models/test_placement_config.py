"""``Placement.from_config``: the one way from a model config's ``placement:`` node to a
``Placement``, the one argument every pair loader takes for where its models go."""

from __future__ import annotations

import inspect

import pytest
import torch
from omegaconf import OmegaConf

from specdec.errors import BadInput
from specdec.models.placement import Placement
from specdec.models.placement_config import KEYS, flat_model, moved

LOADERS = (
    "specdec.models.tiny.tiny_pair",
    "specdec.models.smollm2.smollm2_pair",
    "specdec.models.pair.load_pair",
    "specdec.models.hf.hf_pair",
    "specdec.models.pair.make_pair",
)


def test_a_model_config_its_node_or_some_keys_give_the_same_placement():
    node = {"device": "cpu", "dtype": "float64", "linear_kernel": "stock", "draft_threads": 2}
    model = OmegaConf.create({"_target_": "specdec.models.tiny.tiny_pair", "placement": node})
    want = Placement.from_config(model)
    assert Placement.from_config(model.placement) == Placement.from_config(node) == want
    assert want.dtype == torch.float64 and want.linear_kernel == "stock"
    assert want.draft_threads == 2 and want.draft_device == want.device == torch.device("cpu")
    assert want.draft_follows_target and Placement.from_config(want) is want
    default = Placement.from_config(None)
    assert (default.dtype, default.linear_kernel, default.attention) == (
        torch.float32,
        "auto",
        None,
    )
    split = Placement.from_config(
        {"device": "meta", "draft_device": "cpu", "device_map": {"": 0}, "max_memory": {0: "1GiB"}}
    )
    assert not split.draft_follows_target and split.device_for("draft").type == "cpu"
    assert split.device_map == {"": 0} and split.max_memory == {0: "1GiB"}


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"_target_": "x", "dtype": "float32"}, r"model.dtype is now model.placement.dtype"),
        (
            {"_target_": "x", "placement": {}, "draft_device": "cpu"},
            r"model.draft_device is now model.placement.draft_device",
        ),
        (
            {"dtype": "float32", "device_mapp": "auto"},
            r"model.placement.device_mapp is not a placement",
        ),
        ({"dtype": "float8"}, r"model.placement.dtype='float8' is not known"),
        ({"linear_kernel": "fast"}, r"model.placement.linear_kernel='fast' is not a kernel"),
        ({"draft_threads": 0}, r"model.placement.draft_threads must be an integer >= 1"),
        ({"device": "gpu0"}, r"device='gpu0' is not a torch device"),
        ({"draft_device": "gpu0"}, r"model.placement.draft_device='gpu0' is not a torch device"),
    ],
)
def test_bad_placements_name_the_key(config, words):
    with pytest.raises(BadInput, match=words):
        Placement.from_config(config)


def test_every_loader_takes_one_placement_and_no_placement_key():
    from hydra.utils import get_method

    for loader in LOADERS:
        params = inspect.signature(get_method(loader)).parameters
        assert "placement" in params, loader
        assert [k for k in KEYS if k in params] == [], loader


def test_a_pair_built_here_refuses_what_only_from_pretrained_honours():
    from specdec.models.tiny import tiny_pair

    for key, value in (
        ("device_map", "auto"),
        ("attn_implementation", "eager"),
        ("max_memory", {"cpu": "1GiB"}),
    ):
        with pytest.raises(
            BadInput,
            match=rf"model.placement.{key}=.*model=tiny builds its "
            r"models in this process",
        ):
            tiny_pair(placement={key: value})


def test_the_pair_records_what_was_placed():
    from specdec.models.tiny import tiny_pair

    pair = tiny_pair(placement={"dtype": "float64", "linear_kernel": "auto"})
    built = pair.placement
    assert built.linear_kernel in ("stock", "packed", "weight_stationary")  # auto resolved
    assert built.dtype == torch.float64 and built.attention is not None
    assert built.threads == torch.get_num_threads() and built.draft_device == built.device


def test_the_flat_view_and_the_moved_names():
    model = {"_target_": "t", "seed": 0, "placement": {"device": "cpu", "dtype": "float32"}}
    assert flat_model(model) == {"_target_": "t", "seed": 0, "device": "cpu", "dtype": "float32"}
    assert flat_model({"_target_": "t", "dtype": "float32"}) == {
        "_target_": "t",
        "dtype": "float32",
    }
    assert flat_model(None) is None
    assert moved("model.dtype") == "model.placement.dtype" == moved("+model.dtype")
    assert moved("model.draft") is None and moved("model.placement.dtype") is None
    assert moved("dtype") is None
