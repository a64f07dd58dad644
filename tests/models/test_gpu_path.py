"""The GPU path, checked on CPU: bfloat16 pairs decode, flash-attention is refused
where it cannot run and swapped for ``sdpa`` under tree drafts (stand-in configs), and the run's
software fingerprint carries the CUDA, driver and flash-attn versions (``specdec.models.gpu``)."""

from __future__ import annotations

import logging
from importlib import metadata
from types import SimpleNamespace

import pytest
import torch

from specdec.bench.run.fingerprint import software_versions
from specdec.bench.run.runner import build_method
from specdec.engine import generate
from specdec.models import gpu
from specdec.models.gpu import check_attention, fit_attention
from specdec.models.tiny import tiny_pair
from specdec.sampling import TorchCoins


@pytest.mark.parametrize("method", ["ar", "sps", "rrs_tree"])
def test_bfloat16_pair_decodes_greedily(compose, method):
    pair = tiny_pair(placement={"dtype": "bfloat16"})
    assert pair.describe()["dtype"] == "bfloat16"
    cfg = compose(
        "eval", [f"method={method}", "sampling.temperature=0", "model.placement.dtype=bfloat16"]
    )
    m = build_method(cfg, pair)
    prompt = pair.tokenizer.encode("bf16 on the way")
    runs = [
        generate(
            prompt,
            m.target,
            m.drafter,
            m.verifier,
            sampling=m.sampling,
            coins=TorchCoins(0),
            max_new_tokens=16,
        ).tokens
        for _ in range(2)
    ]
    assert len(runs[0]) == 16 and all(0 <= t < 259 for t in runs[0])
    assert runs[0] == runs[1]  # the same inputs give the same tokens


def test_flash_attention_is_refused_where_it_cannot_run():
    bf16 = torch.bfloat16
    with pytest.raises(
        ValueError,
        match=r"needs the 'flash_attn' package, which is not installed"
        r".*pip install -e '.\[gpu\]'",
    ):
        check_attention("flash_attention_2", device="cuda", dtype=bf16, installed=lambda _: False)
    have = {"installed": lambda _: True}
    with pytest.raises(ValueError, match=r"runs on CUDA only, but device=cpu"):
        check_attention("flash_attention_2", device="cpu", dtype=bf16, **have)
    with pytest.raises(
        ValueError,
        match=r"needs bfloat16 or float16 weights, got float32; set "
        r"model.placement.dtype=bfloat16",
    ):
        check_attention("flash_attention_2", device="cuda:0", dtype=torch.float32, **have)
    check_attention("flash_attention_2", device="cuda:0", dtype=bf16, **have)
    for other in (None, "sdpa", "eager"):
        check_attention(other, device="cpu", dtype=torch.float32, installed=lambda _: False)


def test_load_pair_refuses_flash_attention_before_loading(tmp_path, monkeypatch):
    from specdec.models import load_pair

    monkeypatch.setattr(gpu, "flash_installed", lambda _: False)  # as on this CPU machine
    with pytest.raises(ValueError, match=r"needs the 'flash_attn' package"):
        load_pair(
            "x",
            str(tmp_path),
            None,
            placement={"attn_implementation": "flash_attention_2", "dtype": "bfloat16"},
        )


class FakeModel:
    """A stand-in with the two attributes ``fit_attention`` touches."""

    def __init__(self, implementation: str):
        self.config = SimpleNamespace(_attn_implementation=implementation)
        self.calls: list[str] = []

    def set_attn_implementation(self, name: str) -> None:
        self.calls.append(name)
        self.config._attn_implementation = name


def test_tree_methods_switch_flash_models_to_sdpa_with_a_log_line(caplog):
    target, draft, plain = (
        FakeModel("flash_attention_2"),
        FakeModel("flash_attention_3"),
        FakeModel("sdpa"),
    )
    assert fit_attention([("target", target), ("draft", draft)], makes_trees=False) == {}
    assert target.calls == draft.calls == []  # chains run on flash-attention
    with caplog.at_level(logging.INFO, logger="specdec.models.gpu"):
        switched = fit_attention(
            [("target", target), ("draft", draft), ("x", plain), ("none", None)], makes_trees=True
        )
    assert switched == {"target": "flash_attention_2", "draft": "flash_attention_3"}
    assert target.calls == draft.calls == ["sdpa"] and plain.calls == []
    assert "the target runs sdpa instead of flash_attention_2" in caplog.text


def test_build_method_records_the_switch_in_the_pair_fingerprint(compose, monkeypatch):
    pair = tiny_pair()
    calls = []
    for model in (pair.target, pair.draft):  # stand in for flash models (no flash-attn here)
        monkeypatch.setattr(
            model.config, "_attn_implementation", "flash_attention_2", raising=False
        )
        monkeypatch.setattr(
            model,
            "set_attn_implementation",
            lambda name, m=model: calls.append(name),
            raising=False,
        )
    build_method(compose("eval", ["method=sps"]), pair)
    assert calls == [] and "attention_requested" not in pair.info
    build_method(compose("eval", ["method=rrs_tree"]), pair)
    assert calls == ["sdpa", "sdpa"]
    info = pair.describe()
    assert (info["attention"], info["attention_requested"], info["draft_attention"]) == (
        "sdpa",
        "flash_attention_2",
        "sdpa",
    )


def test_software_fingerprint_has_the_gpu_versions(monkeypatch):
    versions = software_versions()
    assert {"cuda", "cuda_driver", "flash_attn"} <= set(versions)
    assert versions["cuda"] == torch.version.cuda
    # the driver: None without CUDA, nvidia-smi's answer with it (both checked on any machine)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu.gpu_versions()["cuda_driver"] is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(
        gpu.subprocess,
        "run",
        lambda *a, **k: SimpleNamespace(returncode=0, stdout="550.54.15\n550.54.15\n"),
    )
    assert gpu.gpu_versions()["cuda_driver"] == "550.54.15"
    real = metadata.version

    def fake(name):
        return "2.7.4" if name in ("flash-attn", "flash_attn") else real(name)

    monkeypatch.setattr(metadata, "version", fake)
    assert software_versions()["flash_attn"] == "2.7.4"

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert gpu.gpu_versions()["flash_attn"] is None
