"""Big targets: ``model.placement.device_map`` / ``model.placement.max_memory`` through
``load_pair``, the errors before generation, timing that syncs every CUDA device, and the Qwen2.5
0.5B/14B pair's real output-row counts loaded from config-only stubs (no download)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from hydra.utils import instantiate
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from specdec.bench.run.runner import build_method
from specdec.engine import generate
from specdec.errors import BadInput
from specdec.lm import CachedLM
from specdec.models import load_pair
from specdec.models.devices import cuda_devices
from specdec.models.placement import Placement, check_before_loading
from specdec.models.tiny import byte_tokenizer, tiny_lm
from specdec.sampling import TorchCoins

# Qwen/Qwen2.5-14B-Instruct and Qwen2.5-0.5B-Instruct config.json: output rows and head tying
QWEN = {
    "14b": {"vocab_size": 152064, "tie_word_embeddings": False},
    "05b": {"vocab_size": 151936, "tie_word_embeddings": True},
}


def _save(model, folder, tokenizer=None):
    model.save_pretrained(folder)
    (tokenizer or byte_tokenizer()).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny target (320 rows: 61 padding rows) and draft (259 rows) saved as local folders."""
    root = tmp_path_factory.mktemp("pair")
    target = tiny_lm(320, hidden=32, layers=2, heads=2, seed=0, dtype=torch.float32)
    draft = tiny_lm(259, hidden=32, layers=1, heads=2, seed=1, dtype=torch.float32)
    return _save(target, root / "target"), _save(draft, root / "draft")


def test_device_map_cpu_loads_the_pair_and_decodes_like_ar(compose, folders):
    target, draft = folders
    pair = load_pair("local", target, draft, placement={"device_map": "cpu"})
    assert pair.devices() == [torch.device("cpu")]
    info = pair.describe()
    assert info["device_map"] == "cpu" and info["draft_rows"] == "259 (target 320)"
    prompt = pair.tokenizer.encode("hello big target")
    outs = {}
    for method in ("ar", "sps"):
        m = build_method(compose("eval", [f"method={method}", "sampling.temperature=0"]), pair)
        outs[method] = generate(
            prompt,
            m.target,
            m.drafter,
            m.verifier,
            sampling=m.sampling,
            coins=TorchCoins(0),
            max_new_tokens=12,
        ).tokens
    assert outs["ar"] == outs["sps"] and len(outs["ar"]) == 12


def test_a_device_map_that_leaves_the_target_on_no_device_is_refused(folders):
    target, draft = folders
    with pytest.raises(
        ValueError,
        match=r"the target was left on no device: \d+ parameters are "
        r"on 'meta'.*raise max_memory",
    ):
        load_pair(
            "local", target, draft, placement={"device_map": "auto", "max_memory": {"cpu": "1KB"}}
        )
    # a disk map the entry point's check refuses (below) is refused by the loader too, once loaded
    with pytest.raises(ValueError, match=r"the target was left on no device"):
        load_pair("local", target, draft, placement={"device_map": {"": "disk"}})


def test_bad_placements_are_refused_by_the_check_before_loading(monkeypatch):
    # the refusals of a machine without CUDA, on every machine (a GPU one included)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    key = "model.placement"
    cases = [
        (
            {"draft_device": "cuda:0"},
            rf"{key}.draft_device=cuda:0 was requested but CUDA "
            rf"is not available.*run with {key}.draft_device=cpu",
        ),
        ({"device_map": "cuda:1"}, rf"{key}.device_map=cuda:1 was requested but CUDA"),
        ({"device_map": {}}, rf"{key}.device_map=\{{\}} leaves the target on no device"),
        (
            {"device_map": {"model.layers.0": 3}},
            rf"{key}.device_map\['model.layers.0'\]"
            r"=cuda:3 was requested",
        ),
        (
            {"max_memory": {"cpu": "1GiB"}},
            rf"{key}.max_memory is set but {key}.device_map "
            rf"is null.*set {key}.device_map=auto",
        ),
        (
            {"device_map": "auto", "max_memory": {0: "70GiB"}},
            rf"{key}.max_memory\[0\]=cuda:0 was requested but CUDA is not available",
        ),
    ]
    for keys, message in cases:
        with pytest.raises(BadInput, match=message):
            check_before_loading(Placement.from_config(keys))
    with pytest.raises(BadInput, match=rf"{key}.draft_device='gpu0' is not a torch device"):
        Placement.from_config({"draft_device": "gpu0"})  # not even a device name
    # with one GPU, a second one is refused by its index
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    for keys in (
        {"device_map": "cuda:1"},
        {"draft_device": "cuda:1"},
        {"device_map": "auto", "max_memory": {1: "70GiB"}},
    ):
        with pytest.raises(BadInput, match=r"=cuda:1: this machine has 1 CUDA device\(s\)"):
            check_before_loading(Placement.from_config(keys))


def test_the_eval_refuses_a_bad_device_map_before_any_weights_load(compose, folders, monkeypatch):
    from specdec.bench.run import runner

    monkeypatch.setattr(
        AutoModelForCausalLM,
        "from_pretrained",
        lambda *a, **k: pytest.fail("weights were loaded before the check"),
    )
    target, draft = folders
    cfg = compose(
        "eval",
        [
            "model=hf",
            f"model.target={target}",
            f"model.draft={draft}",
            "method=sps",
            "model.placement.device_map=disk",
        ],
    )
    with pytest.raises(BadInput, match=r"model.placement.device_map puts the target on 'disk'"):
        runner.run(cfg)


def test_placement_checks_accept_what_accelerate_takes():
    for device_map in (None, "auto", "balanced", "sequential", "cpu", {"": "cpu"}):
        check_before_loading(Placement.from_config({"device_map": device_map}))
    check_before_loading(
        Placement.from_config({"device_map": "auto", "max_memory": {"cpu": "1GiB", "disk": "0GiB"}})
    )
    check_before_loading(Placement.from_config(None))


def test_timing_syncs_every_cuda_device_the_weights_live_on(monkeypatch):
    fake = SimpleNamespace(
        parameters=lambda: iter(
            [SimpleNamespace(device=torch.device(d)) for d in ("cuda:1", "cpu", "cuda:0", "cuda:1")]
        )
    )
    assert cuda_devices(fake) == [torch.device("cuda:0"), torch.device("cuda:1")]
    lm = CachedLM(
        tiny_lm(259, hidden=16, layers=1, heads=2, seed=0, dtype=torch.float32), synchronize=True
    )
    assert lm.cuda_devices == []  # a CPU model syncs nothing
    synced: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "synchronize", synced.append)
    lm.cuda_devices = [torch.device("cuda:0"), torch.device("cuda:1")]  # a split target
    lm.forward(torch.tensor([1, 2, 3]))
    assert synced == lm.cuda_devices * 2  # before and after the forward, each device
    lm.synchronize, synced[:] = False, []
    lm.forward(torch.tensor([4]))
    assert synced == []


def _qwen(which: str) -> Qwen2ForCausalLM:
    """A Qwen2.5 model with the real output rows and tiny everything else."""
    config = Qwen2Config(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        **QWEN[which],
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(len(which) + QWEN[which]["vocab_size"])
        return Qwen2ForCausalLM(config).eval()


def test_qwen25_config_stub_loads_through_the_pair_config_and_runs(compose, tmp_path):
    target = _save(_qwen("14b"), tmp_path / "Qwen2.5-14B-Instruct")
    draft = _save(_qwen("05b"), tmp_path / "Qwen2.5-0.5B-Instruct")
    overrides = [
        "model=qwen25_05b_14b",
        f"model.target={target}",
        f"model.draft={draft}",
        "model.placement.dtype=float32",
        "model.placement.device_map=cpu",
        "sampling.temperature=0",
    ]
    pair = instantiate(compose("eval", [*overrides, "method=ar"]).model)
    info = pair.describe()
    assert info["draft_rows"] == "151936 (target 152064)"
    prompt = pair.tokenizer.encode("Qwen pair")
    outs = {}
    for method in ("ar", "sps"):
        m = build_method(compose("eval", [*overrides, f"method={method}"]), pair)
        assert m.target.vocab_size == 152064
        out = generate(
            prompt,
            m.target,
            m.drafter,
            m.verifier,
            sampling=m.sampling,
            coins=TorchCoins(0),
            max_new_tokens=8,
        )
        outs[method] = (out.tokens, out.stats.draft_forwards)
    assert outs["sps"][0] == outs["ar"][0] and outs["sps"][1] > 0


def test_runner_placement_check_names_device_map(folders):
    from specdec.bench.run.checks import check_where_loaded

    pair = load_pair("local", *folders, placement={"device_map": "cpu"})
    check_where_loaded(pair, "cpu")
    with pytest.raises(
        ValueError,
        match=r"model.placement.device_map=cpu put the target's first "
        r"layers on cpu but device=cuda: set device=cpu",
    ):
        check_where_loaded(pair, "cuda")
