"""EAGLE-3 interop: heads in the published layouts load, decode, round-trip, fail well.

* a random-weight stub head in the ``LlamaForCausalLMEagle3`` layout (and in vLLM speculators'
  layout) for the tiny target, with ``V_d < V`` and ``d2t``/``t2d``, decodes greedily exactly like
  ``ar`` through the engine (``RecursiveRejection``);
* published files -> loaded net -> ``save_eagle3_hf`` -> loaded again: identical tensors,
  target layers (under both engines' keys: ``test_eagle3_engines.py``) and drafted trees;
* an independent float64 reference of the published forward, written here from the format
  description with plain torch ops (RMSNorm, RoPE, causal GQA attention, SiLU MLP), gives the
  loaded module's logits and next conditions;
* bad input (hidden size, vocabulary, layers, unknown format, missing file, broken token map,
  uncached hub id) ends in one ``InputError`` naming the mismatch and the fix (export format:
  ``test_eagle3_published_train.py``).
Deterministic (fixed seeds, no sampling): no false-failure probability.
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
from specdec.errors import BadInput, InputError, MissingInput
from specdec.lm import CachedLM
from specdec.nets.eagle3.interop import default_layers, save_eagle3_hf
from specdec.nets.eagle3.net import load_eagle3
from specdec.nets.eagle3.published import PublishedEagle3Net
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.eagle3_stub import (
    EPS,
    HEAD_DIM,
    HEADS,
    KV,
    LAYERS,
    THETA,
    V_D,
    stub_tensors,
    write_stub,
)
from specdec.verifiers import RecursiveRejection

# transformers computes RoPE's cos/sin in float32 even for a float64 model (~1e-7 apart from the
# float64 reference here); any error in the forward itself is orders of magnitude larger
ATOL = 1e-5


def drafts_and_tokens(folder: Path, pair, prompt: list[int], n: int = 12):
    """``(tokens, [(draft tokens, parents)...])`` of greedy eagle3 decoding with ``folder``."""
    greedy = Sampling(temperature=0.0)
    drafter = Eagle3Drafter(Fixed(3), str(folder), topk=2, total_tokens=4)
    seen, propose = [], drafter.propose

    def record(ctx):
        draft = propose(ctx)
        seen.append((draft.tokens.tolist(), draft.parent.tolist()))
        return draft

    drafter.propose = record
    out = generate(
        prompt,
        CachedLM(pair.target),
        drafter,
        RecursiveRejection(),
        sampling=greedy,
        coins=TorchCoins(0),
        max_new_tokens=n,
    )
    return out.tokens, seen


@pytest.mark.parametrize("fmt", ["eagle3_hf", "speculators"])
def test_stub_head_decodes_greedy_identically_to_ar(tiny64, tmp_path, fmt):
    folder = write_stub(tmp_path / "head", fmt=fmt)
    net = load_eagle3(folder, tiny64.target)
    assert isinstance(net, PublishedEagle3Net) and net.target_layers == tuple(LAYERS)
    d2t = stub_tensors(32, 259)["d2t"]
    assert torch.equal(net.decoder.token_map, torch.arange(V_D) + d2t)
    prompt = [5, 17, 3, 44, 9, 12]
    tokens, drafts = drafts_and_tokens(folder, tiny64, prompt)
    ar = generate(
        prompt,
        CachedLM(tiny64.target),
        EmptyDrafter(),
        RecursiveRejection(),
        sampling=Sampling(temperature=0.0),
        coins=TorchCoins(0),
        max_new_tokens=12,
    )
    assert tokens == ar.tokens
    drafted = [t for toks, _ in drafts for t in toks[1:]]
    assert drafted and set(drafted) <= set(net.decoder.token_map.tolist())


def test_round_trip_keeps_tensors_and_drafts(tiny64, tmp_path):
    first = write_stub(tmp_path / "speculators", fmt="speculators", seed=1, layers=[1, 1, 1])
    again = save_eagle3_hf(load_eagle3(first), tmp_path / "hf", dtype=torch.float64)
    third = save_eagle3_hf(load_eagle3(again), tmp_path / "hf2", dtype=torch.float64)
    want = {k: v for k, v in stub_tensors(32, 259, seed=1).items() if k != "embed_tokens.weight"}
    for folder in (again, third):
        got = load_file(str(folder / "model.safetensors"))
        assert set(got) == set(want)
        for key, value in want.items():
            assert got[key].dtype == value.dtype and torch.equal(got[key], value), key
        cfg = json.loads((folder / "config.json").read_text())
        assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
        assert cfg["eagle_aux_hidden_state_layer_ids"] == [1, 1, 1]  # vLLM: hidden_states[i]
        assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 0, 0]  # SGLang
        assert cfg["draft_vocab_size"] == V_D and cfg["vocab_size"] == 259
    prompt = [7, 3, 9, 100, 4]
    assert drafts_and_tokens(first, tiny64, prompt) == drafts_and_tokens(third, tiny64, prompt)


def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """``[N, heads, d]`` rotated by position (the Llama half-split pairing: ``i`` with
    ``i + d/2``)."""
    half = x.shape[-1] // 2
    freq = THETA ** (-torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])  # [d/2]
    ang = pos[:, None, None].double() * freq  # [N, 1, d/2]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * ang.cos() - b * ang.sin(), b * ang.cos() + a * ang.sin()], -1)


def reference(
    w: dict[str, torch.Tensor],
    e: torch.Tensor,
    g: torch.Tensor,
    keys: list | None,
    pos: torch.Tensor,
    norm_first: bool = False,
):
    """The published forward of new positions: ``e, g [N, H]`` -> (``[N, V_d]`` logits, ``[N, H]``
    pre-norm output, this call's ``(k, v)``); ``keys``: earlier ``(k, v)`` seen by every row,
    rows causal among themselves; ``norm_first``: the residual is ``hidden_norm(g)``."""
    m = "midlayer."
    x = torch.cat(
        [rms(e, w[m + "input_layernorm.weight"]), rms(g, w[m + "hidden_norm.weight"])], -1
    )  # [N, 2H]
    n = x.shape[0]
    q = rope((x @ w[m + "self_attn.q_proj.weight"].T).view(n, HEADS, HEAD_DIM), pos)
    k = rope((x @ w[m + "self_attn.k_proj.weight"].T).view(n, KV, HEAD_DIM), pos)
    v = (x @ w[m + "self_attn.v_proj.weight"].T).view(n, KV, HEAD_DIM)
    k_all = torch.cat([keys[0], k]) if keys else k  # [S, KV, d]
    v_all = torch.cat([keys[1], v]) if keys else v
    past = k_all.shape[0] - n
    rep = HEADS // KV  # head i reads kv head i // rep
    k_h, v_h = k_all.repeat_interleave(rep, 1), v_all.repeat_interleave(rep, 1)  # [S, heads, d]
    score = torch.einsum("nhd,shd->hns", q, k_h) / HEAD_DIM**0.5  # [heads, N, S]
    allowed = torch.arange(k_all.shape[0])[None] <= past + torch.arange(n)[:, None]  # [N, S]
    att = score.masked_fill(~allowed, float("-inf")).softmax(-1)
    a = torch.einsum("hns,shd->nhd", att, v_h).reshape(n, HEADS * HEAD_DIM)
    residual = rms(g, w[m + "hidden_norm.weight"]) if norm_first else g  # norm_before_residual
    r = residual + a @ w[m + "self_attn.o_proj.weight"].T
    y = rms(r, w[m + "post_attention_layernorm.weight"])
    gate = torch.nn.functional.silu(y @ w[m + "mlp.gate_proj.weight"].T)
    h = r + (gate * (y @ w[m + "mlp.up_proj.weight"].T)) @ w[m + "mlp.down_proj.weight"].T
    return rms(h, w["norm.weight"]) @ w["lm_head.weight"].T, h, (k_all, v_all)


@pytest.mark.parametrize("norm_first", [False, True])
def test_loaded_module_matches_an_independent_reference(tiny64, tmp_path, norm_first):
    target, w = tiny64.target, stub_tensors(32, 259, seed=2)
    head = write_stub(tmp_path / "head", seed=2, norm_before_residual=norm_first)
    net = load_eagle3(head, target)
    ids = torch.tensor([5, 17, 3, 44, 9, 12, 30])  # [T]
    embed = target.get_input_embeddings()
    with torch.inference_mode():
        states = target(input_ids=ids[None], output_hidden_states=True).hidden_states
    feats = torch.stack([states[i][0] for i in LAYERS], 1)[:-1]  # [T-1, 3, H]
    e, n = embed(ids[1:]).detach(), ids.numel() - 1  # [T-1, H]
    g = feats.flatten(1) @ w["fc.weight"].T  # [T-1, H]
    want, h, kv = reference(w, e, g, None, torch.arange(n), norm_first)
    lm = CachedLM(net.decoder, role="draft", vocab_size=259)
    with torch.inference_mode():
        z = net.inputs(e, net.condition(feats))
    out = lm.forward(ids[1:], inputs_embeds=z, hidden_layers=(-1,))
    cols = torch.arange(V_D) + w["d2t"]
    torch.testing.assert_close(out.logits[:, cols], want, atol=ATOL, rtol=0)
    torch.testing.assert_close(out.hidden[:, 0], h, atol=ATOL, rtol=0)
    # a drafted node below the last position: its condition is that position's pre-norm output
    tok = torch.tensor([21])
    with torch.inference_mode():
        z = net.inputs(embed(tok), out.hidden[-1:, 0])
    nxt = lm.forward(tok, inputs_embeds=z, hidden_layers=(-1,))
    want2, _, _ = reference(w, embed(tok).detach(), h[-1:], kv, torch.tensor([n]), norm_first)
    torch.testing.assert_close(nxt.logits[:, cols], want2, atol=ATOL, rtol=0)
    assert torch.isinf(nxt.logits).sum() == 259 - V_D


def _hub_cache(root: Path, repo: str, head: Path) -> None:
    """A local Hugging Face cache entry for ``repo`` holding ``head``'s files."""
    base = root / f"models--{repo.replace('/', '--')}"
    snap = base / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    for f in head.iterdir():
        (snap / f.name).write_bytes(f.read_bytes())
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text("0" * 40)


def test_a_cached_hub_id_loads(tiny64, tmp_path, monkeypatch):
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path / "hub"))
    _hub_cache(tmp_path / "hub", "someorg/eagle3-tiny", write_stub(tmp_path / "head"))
    net = load_eagle3("someorg/eagle3-tiny", tiny64.target)
    assert isinstance(net, PublishedEagle3Net)
    with pytest.raises(BadInput, match="run `hf download someorg/not-cached`"):
        load_eagle3("someorg/not-cached")


def _edit(folder: Path, cfg: dict | None = None, tensors: dict | None = None) -> Path:
    if cfg is not None:
        (folder / "config.json").write_text(json.dumps(cfg))
    if tensors is not None:
        save_file(tensors, str(folder / "model.safetensors"))
    return folder


BAD = {
    "hidden": (
        lambda f: write_stub(f, hidden=16),
        BadInput,
        "hidden size 16, but this target has 32; retrain it",
    ),
    "vocab": (
        lambda f: write_stub(f, vocab=300),
        BadInput,
        "vocabulary 300, but this target has 259",
    ),
    "layers": (
        lambda f: write_stub(f, layers=[0, 1, 7]),
        BadInput,
        r"reads target layers \[7\], but this target has 2 layers",
    ),
    "unpinned layers": (lambda f: write_stub(f, layers=None), None, None),
    "unknown format": (
        lambda f: _edit(
            write_stub(f), cfg={"architectures": ["LlamaForCausalLM"], "hidden_size": 32}
        ),
        BadInput,
        "unknown format: it has none of 'eagle3'",
    ),
    "missing weights": (
        lambda f: (write_stub(f) / "model.safetensors").unlink() or f,
        MissingInput,
        "model.safetensors is missing",
    ),
    "missing folder": (lambda f: f / "nothing", MissingInput, "config.json is missing"),
    "broken d2t": (
        lambda f: _edit(
            write_stub(f), tensors={**stub_tensors(32, 259), "d2t": torch.full((V_D,), 400)}
        ),
        BadInput,
        "d2t/t2d do not map 96 distinct draft tokens into a 259-token vocabulary",
    ),
    "uncached hub id": (
        lambda f: "nobody-here/no-such-eagle3-head",
        BadInput,
        "run `hf download nobody-here/no-such-eagle3-head`",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_heads_fail_with_one_error_naming_the_fix(tiny64, tmp_path, case):
    make, error, message = BAD[case]
    where = make(tmp_path / "head")
    if error is None:  # a head pinning no layers takes vLLM's default for the target, or asks
        assert default_layers(30) == [2, 15, 27]
        assert load_eagle3(where, tiny64.target).target_layers == (2, 1, -1)
        with pytest.raises(BadInput, match=r"drafter.target_layers=\[2,<L/2>,<L-3>\]"):
            load_eagle3(where)
        assert load_eagle3(where, target_layers=[0, 1, 2]).target_layers == (0, 1, 2)
        return
    with pytest.raises(error, match=message) as info:
        load_eagle3(where, tiny64.target)
    assert isinstance(info.value, InputError) and "\n" not in str(info.value)


def test_the_cost_model_calibrates_a_published_head(tiny64, tmp_path):
    from specdec.bench.run.calibration import calibrate
    from specdec.core import TargetView

    drafter = Eagle3Drafter(Fixed(3), str(write_stub(tmp_path / "head")))
    drafter.attach(TargetView(CachedLM(tiny64.target)))
    table = calibrate(
        CachedLM(tiny64.target), drafter.lm, max_new=2, repeats=2, ref_context=8, far_context=16
    )
    assert all(t > 0 for t in table.times["draft"].values())
