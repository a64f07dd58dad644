"""Every pair config in conf/model/ composes and its arguments bind to its factory (no download)."""

from __future__ import annotations

import inspect

import pytest
from hydra.utils import get_method

PAPER_PAIRS = {
    "llama68m_llama2_7b": ("meta-llama/Llama-2-7b-hf", "JackFram/llama-68m"),
    "vicuna68m_vicuna13b": ("lmsys/vicuna-13b-v1.3", "double7/vicuna-68m"),
    "qwen25_05b_14b": ("Qwen/Qwen2.5-14B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    "llama32_1b_llama31_70b": (
        "meta-llama/Llama-3.1-70B-Instruct",
        "meta-llama/Llama-3.2-1B-Instruct",
    ),
    "llama2chat_7b_70b": ("meta-llama/Llama-2-70b-chat-hf", "meta-llama/Llama-2-7b-chat-hf"),
    "deepseek_coder_1b_33b": (
        "deepseek-ai/deepseek-coder-33b-instruct",
        "deepseek-ai/deepseek-coder-1.3b-instruct",
    ),
}


def _bind(model_cfg) -> inspect.BoundArguments:
    from omegaconf import OmegaConf

    kwargs = OmegaConf.to_container(model_cfg, resolve=True)
    factory = get_method(kwargs.pop("_target_"))
    return inspect.signature(factory).bind(**kwargs)


@pytest.mark.parametrize("name", sorted(PAPER_PAIRS))
def test_paper_pair_configs_bind_to_load_pair(compose, name):
    from specdec.models import load_pair

    cfg = compose("eval", [f"model={name}", "device=cuda"])
    assert get_method(cfg.model._target_) is load_pair
    bound = _bind(cfg.model)
    target, draft = PAPER_PAIRS[name]
    assert bound.arguments["target"] == target and bound.arguments["draft"] == draft
    assert bound.arguments["placement"]["device"] == "cuda"  # the eval's device=cuda reaches it
    assert bound.arguments["trust_remote_code"] is False
    assert bound.arguments["name"] == name


@pytest.mark.parametrize("name", ["smollm2", "tiny"])
def test_offline_pair_configs_bind(compose, name):
    bound = _bind(compose("eval", [f"model={name}"]).model)
    if name == "smollm2":
        assert bound.arguments["draft"] == "trained"
        assert (
            bound.arguments["cache_dir"].endswith("cache")
            or "SPECDEC_CACHE_DIR" in __import__("os").environ
        )
