"""EAGLE-3 heads as each serving engine reads them: the target-layer ids' meaning, both layouts.

The meaning of ``eagle_aux_hidden_state_layer_ids`` is pinned here from each engine's source
(read, not copied), by emulating its capture on a 6-layer HF Llama target with hooks:

* vLLM -- ``vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``
  ``get_eagle3_aux_layers_from_config`` reads the draft config's *top-level* key;
  ``vllm/model_executor/models/llama.py`` ``LlamaModel.forward`` appends ``hidden_states +
  residual`` for ``idx in aux_hidden_state_layers`` *before* calling layer ``idx`` (emulated: a
  forward pre-hook on layer ``id``); ``get_eagle3_aux_hidden_state_layers`` defaults to ``(2,
  L // 2, L - 3)``.
* SGLang -- ``python/sglang/srt/model_executor/model_runner.py`` reads only
  ``eagle_config["eagle_aux_hidden_state_layer_ids"]`` and passes it to
  ``python/sglang/srt/models/llama.py`` ``LlamaForCausalLM.set_eagle3_layers_to_capture``, which
  sets ``layers_to_capture = [id + 1 ...]``; ``LlamaModel.forward`` captures before layer ``i``
  for ``i in layers_to_capture`` (emulated: a pre-hook on layer ``id + 1``).
* SpecForge -- ``specforge/modeling/target/eagle3_target_model.py``
  ``HFEagle3TargetModel.generate_eagle3_data`` registers ``register_forward_hook`` on
  ``layers[id]`` (the layer's *output*; emulated so), its SGLang backend calls
  ``set_eagle3_layers_to_capture``; ``Eagle3TargetModel.set_aux_hidden_states_layers`` defaults
  to ``[1, L // 2 - 1, L - 4]``; ``specforge/algorithms/model_providers.py``
  ``resolve_eagle_capture_layers`` reads ``eagle_config``'s key.

The head writers below follow each engine's convention (``vllm_config`` / ``sglang_config``),
independently of ``specdec.nets.eagle3``. Deterministic (fixed seeds, greedy): no
false-failure probability.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from specdec.drafters import EmptyDrafter
from specdec.drafters.eagle3 import Eagle3Drafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.errors import BadInput
from specdec.lm import CachedLM
from specdec.models.tiny import tiny_lm
from specdec.nets.eagle3.interop import save_eagle3_hf
from specdec.nets.eagle3.net import load_eagle3
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.eagle3_stub import stub_config, stub_tensors
from specdec.verifiers import RecursiveRejection

KEY = "eagle_aux_hidden_state_layer_ids"
WEIGHTS = "model.safetensors"
FEEDS = [2, 3, 5]  # hidden_states of a 6-layer target the heads are meant to read


def vllm_config(hidden: int, vocab: int, ids: list[int]) -> dict:
    """A head config as vLLM reads it: the ids at the top level, captured before layer id."""
    return stub_config(hidden, vocab, None) | {KEY: ids}


def sglang_config(hidden: int, vocab: int, ids: list[int]) -> dict:
    """A head config as SGLang / SpecForge write it: the ids in ``eagle_config``, each the
    output of target layer id."""
    return stub_config(hidden, vocab, None) | {
        "eagle_config": {KEY: ids, "use_aux_hidden_state": True}
    }


def write(folder: Path, cfg: dict, tensors: dict[str, torch.Tensor]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def engine_capture(target, ids: list[int], engine: str, input_ids: torch.Tensor) -> torch.Tensor:
    """``[T, k, H]`` features ``engine`` feeds a head pinning ``ids`` (hooks as in its source)."""
    layers, got = target.model.layers, {}

    def before(slot):
        def hook(module, args, kwargs):
            got[slot] = (args[0] if args else kwargs["hidden_states"])[0]

        return hook

    def after(slot):
        def hook(module, args, kwargs, output):
            got[slot] = (output[0] if isinstance(output, tuple) else output)[0]

        return hook

    handles = []
    for slot, i in enumerate(ids):
        if engine == "vllm":
            handles.append(layers[i].register_forward_pre_hook(before(slot), with_kwargs=True))
        elif engine == "sglang":
            handles.append(layers[i + 1].register_forward_pre_hook(before(slot), with_kwargs=True))
        else:  # specforge's HF backend: the layer's output
            handles.append(layers[i].register_forward_hook(after(slot), with_kwargs=True))
    with torch.inference_mode():
        target(input_ids=input_ids[None])
    for h in handles:
        h.remove()
    return torch.stack([got[s] for s in range(len(ids))], 1)


def specdec_features(target, net, input_ids: torch.Tensor) -> torch.Tensor:
    """``[T, k, H]`` features specdec feeds ``net``: ``hidden_states[i]`` for its layers."""
    with torch.inference_mode():
        states = target(input_ids=input_ids[None], output_hidden_states=True).hidden_states
    return torch.stack([states[i][0] for i in net.target_layers], 1)


@pytest.fixture(scope="module")
def six():
    """A 6-layer float64 Llama target (hidden 32, vocabulary 259)."""
    return tiny_lm(259, hidden=32, layers=6, heads=2, seed=3, dtype=torch.float64)


IDS = {
    "vllm": (vllm_config, [2, 3, 5]),
    "sglang": (sglang_config, [1, 2, 4]),
    "specforge": (sglang_config, [1, 2, 4]),
}


@pytest.mark.parametrize("engine", list(IDS))
def test_each_engines_layer_ids_load_as_the_layers_that_engine_feeds(six, tmp_path, engine):
    make, ids = IDS[engine]
    head = write(tmp_path / engine, make(32, 259, ids), stub_tensors(32, 259))
    net = load_eagle3(head, six)
    assert list(net.target_layers) == FEEDS
    ids_in = torch.tensor([5, 17, 3, 44, 9, 12, 30])
    want = engine_capture(six, ids, engine, ids_in)
    assert torch.equal(specdec_features(six, net, ids_in), want)


def test_an_export_is_read_alike_by_every_engine(six, tmp_path):
    net = load_eagle3(write(tmp_path / "in", vllm_config(32, 259, FEEDS), stub_tensors(32, 259)))
    out = save_eagle3_hf(net, tmp_path / "out", dtype=torch.float64, target_layers_count=6)
    cfg = json.loads((out / "config.json").read_text())
    ids_in = torch.tensor([7, 3, 9, 100, 4, 250])
    want = specdec_features(six, net, ids_in)
    assert torch.equal(engine_capture(six, cfg[KEY], "vllm", ids_in), want)
    for engine in ("sglang", "specforge"):
        got = engine_capture(six, cfg["eagle_config"][KEY], engine, ids_in)
        assert torch.equal(got, want), engine
    # transformers-4 stacks (SGLang) read rope_theta / rope_scaling, transformers 5 the other
    assert cfg["rope_theta"] == cfg["rope_parameters"]["rope_theta"] == 10000.0
    assert cfg["rope_scaling"] is None and cfg["tie_word_embeddings"] is False
    # served by another user: readable files
    for file in out.iterdir():
        assert file.stat().st_mode & 0o777 == 0o644, file.name


def test_an_export_round_trips_through_each_layout(six, tmp_path):
    tensors = stub_tensors(32, 259, seed=5)
    net = load_eagle3(write(tmp_path / "in", sglang_config(32, 259, [1, 2, 4]), tensors))
    out = save_eagle3_hf(net, tmp_path / "out", dtype=torch.float64, target_layers_count=6)
    cfg, state = json.loads((out / "config.json").read_text()), load_file(str(out / WEIGHTS))
    base = {k: v for k, v in cfg.items() if k not in (KEY, "eagle_config")}
    layouts = {
        "vllm": base | {KEY: cfg[KEY]},
        "sglang": base | {"eagle_config": cfg["eagle_config"]},
        "both": cfg,
    }
    want = {k: v for k, v in net.state_dict().items() if "rotary" not in k}
    for name, layout_cfg in layouts.items():
        again = load_eagle3(write(tmp_path / name, layout_cfg, state), six)
        assert list(again.target_layers) == FEEDS, name
        got = again.state_dict()
        assert all(torch.equal(got[k], v) for k, v in want.items()), name
    speculators = {
        "speculators_model_type": "eagle3",
        "architectures": ["Eagle3Speculator"],
        "transformer_layer_config": base,
        "draft_vocab_size": cfg["draft_vocab_size"],
        KEY: cfg[KEY],
        "speculators_config": {"algorithm": "eagle3"},
    }
    spec = {k.replace("midlayer.", "layers.0."): v for k, v in state.items()}
    assert list(load_eagle3(write(tmp_path / "spec", speculators, spec)).target_layers) == FEEDS
    assert {k: v for k, v in tensors.items() if k != "embed_tokens.weight"}.keys() == state.keys()


def test_keys_pinning_different_layers_for_two_engines_are_refused(tmp_path):
    cfg = vllm_config(32, 259, [2, 3, 5]) | {"eagle_config": {KEY: [2, 3, 5]}}
    head = write(tmp_path / "head", cfg, stub_tensors(32, 259))
    with pytest.raises(BadInput, match=r"name different target layers; .*target_layers=\[2, 3"):
        load_eagle3(head)
    assert list(load_eagle3(head, target_layers=[3, 4, 6]).target_layers) == [3, 4, 6]


def test_an_unservable_head_is_not_exported(tmp_path):
    net = load_eagle3(
        write(tmp_path / "in", vllm_config(32, 259, [0, 3, 5]), stub_tensors(32, 259))
    )
    with pytest.raises(BadInput, match=r"include \[0\]: vLLM and SGLang capture only"):
        save_eagle3_hf(net, tmp_path / "out")
    net = load_eagle3(
        write(tmp_path / "in2", vllm_config(32, 259, [2, 3, 6]), stub_tensors(32, 259))
    )
    with pytest.raises(BadInput, match=r"include \[6\]: .* hidden_states 1\.\.5"):
        save_eagle3_hf(net, tmp_path / "out", target_layers_count=6)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make, ids", [(vllm_config, [1, 1, 1]), (sglang_config, [0, 0, 0])])
def test_engine_written_heads_decode_greedy_like_ar(tiny64, tmp_path, make, ids):
    head = write(tmp_path / "head", make(32, 259, ids), stub_tensors(32, 259, seed=7))
    greedy, prompt = Sampling(temperature=0.0), [5, 17, 3, 44, 9, 12]
    drafter = Eagle3Drafter(Fixed(3), str(head), topk=2, total_tokens=4)
    assert drafter.target_layers == (1, 1, 1)

    def run(d):
        return generate(
            prompt,
            CachedLM(tiny64.target),
            d,
            RecursiveRejection(),
            sampling=greedy,
            coins=TorchCoins(0),
            max_new_tokens=12,
        ).tokens

    assert run(drafter) == run(EmptyDrafter())
