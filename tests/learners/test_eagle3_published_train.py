"""EAGLE-3 interop: training the published architecture here (``learner.arch=eagle3``).

* the training unroll (TTT) of a ``PublishedEagle3Net`` gives, at step ``j`` and position ``t``,
  the logits the decoding path gives a depth-``j`` chain node (fp64, tiny target): the next
  condition is the pre-norm output in both;
* ``+experiment=eagle3_tiny learner.arch=eagle3 export.format=eagle3_hf`` (on the one target
  layer an engine can capture in the 2-layer target) trains, exports the
  ``LlamaForCausalLMEagle3`` layout, and the export decodes greedily exactly like ``ar``;
* the loss falls when the published net fits one batch;
* mismatched ``learner.arch`` / ``export.format`` / ``init_from`` fail naming the fix, and
  ``export.format=eagle3_hf`` with the default architecture or with layers no engine captures is
  refused before anything trains.
Deterministic (fixed seeds, greedy): no false-failure probability.
"""

from __future__ import annotations

import json

import pytest
import torch

from specdec.errors import BadInput
from specdec.learners.eagle3.ttt import unroll
from specdec.lm import CachedLM
from specdec.nets.eagle3.published import PublishedEagle3Net, new_published
from specdec.testing.eagle3_stub import write_stub
from specdec.testing.paths import REPO

LAYERS = (0, 1, 2)
SERVED = (1, 1, 1)  # the 2-layer target's one layer input an engine captures, three times


def test_published_training_unroll_equals_the_decoding_chain(tiny64):
    target = tiny64.target
    net = new_published(target, torch.arange(0, 259, 3), LAYERS, seed=4).double().eval()
    with torch.no_grad():  # away from the target's copy: every weight matters
        for p in net.decoder.midlayer.parameters():
            p.add_(
                torch.randn(
                    p.shape, generator=torch.Generator().manual_seed(p.numel()), dtype=p.dtype
                )
                * 0.2
            )
    ids = torch.tensor([5, 17, 3, 44, 9, 12, 30, 7, 21, 8])  # [T]
    embed = target.get_input_embeddings()
    with torch.inference_mode():
        states = target(input_ids=ids[None], output_hidden_states=True).hidden_states
        feats = torch.stack([states[i][0] for i in LAYERS], 1)  # [T, k, H]
        steps = unroll(net, embed, ids[None], feats[None], torch.tensor([ids.numel()]), 3)
    cols = net.decoder.token_map
    for t in (3, 6, 8):
        for j in range(3):
            lm, n = CachedLM(net.decoder, role="draft", vocab_size=259), t - j + 1
            with torch.inference_mode():
                z = net.inputs(embed(ids[1 : n + 1]), net.condition(feats[:n]))
            out = lm.forward(ids[1 : n + 1], inputs_embeds=z, hidden_layers=(-1,))
            for d in range(1, j + 1):
                tok = ids[n + d : n + d + 1]
                with torch.inference_mode():
                    z = net.inputs(embed(tok), out.hidden[-1:, 0])
                grow = lm.forward if d == 1 else lm.extend
                out = grow(
                    tok,
                    torch.tensor([-1 if d == 1 else d - 2]),
                    inputs_embeds=z,
                    hidden_layers=(-1,),
                )
            torch.testing.assert_close(out.logits[-1, cols], steps[j][0, t], atol=1e-10, rtol=0)


def test_tiny_experiment_trains_and_exports_the_published_layout(tmp_path, compose):
    from specdec.data.features import load_feature_traces
    from specdec.drafters import EmptyDrafter
    from specdec.drafters.eagle3 import Eagle3Drafter
    from specdec.drafters.policies import Fixed
    from specdec.engine import generate
    from specdec.learners.eagle3.module import Eagle3Learner, collate
    from specdec.models.tiny import tiny_pair
    from specdec.nets.eagle3.net import load_eagle3
    from specdec.sampling import Sampling, TorchCoins
    from specdec.train import train
    from specdec.verifiers import RecursiveRejection

    overrides = [
        "+experiment=eagle3_tiny",
        f"eagle3.traces_dir={tmp_path / 'data'}",
        f"export.folder={tmp_path / 'e3'}",
        "data_gen.synthetic.prompts=8",
        "learner.arch=eagle3",
        "export.format=eagle3_hf",
        f"eagle3.target_layers={list(SERVED)}",
    ]
    train(compose("train", [*overrides, "stage=data"]))
    metrics = train(compose("train", [*overrides, "trainer=debug"]))
    assert "test/acc0" in metrics
    cfg = json.loads((tmp_path / "e3" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["eagle_aux_hidden_state_layer_ids"] == list(SERVED)  # vLLM's key and meaning
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 0, 0]  # SGLang's
    pair = tiny_pair()
    assert isinstance(load_eagle3(tmp_path / "e3", pair.target), PublishedEagle3Net)
    greedy, prompt = Sampling(temperature=0.0), pair.tokenizer.encode("hello")

    def run(drafter):
        return generate(
            prompt,
            CachedLM(pair.target),
            drafter,
            RecursiveRejection(),
            sampling=greedy,
            coins=TorchCoins(0),
            max_new_tokens=12,
        ).tokens

    assert run(Eagle3Drafter(Fixed(3), str(tmp_path / "e3"))) == run(EmptyDrafter())
    # a warm start from the export needs the same arch; unknown arch / wrong format refused
    data = str(tmp_path / "data")
    learner = Eagle3Learner(pair, data, list(SERVED), lr=3e-3, arch="eagle3")
    rows = load_feature_traces(data)
    batch = collate(
        [
            {
                "ids": t.ids,
                "feats": f,
                "plen": t.prompt_len,
                "topk_ids": t.topk_ids,
                "topk_logp": t.topk_logp,
            }
            for t, f in rows
        ]
    )
    opt = torch.optim.AdamW([p for p in learner.net.parameters() if p.requires_grad], lr=3e-3)
    losses = []
    for _ in range(20):
        loss = learner._step(batch, "train")
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.7 * losses[0], losses
    warm = Eagle3Learner(pair, data, list(SERVED), init_from=str(tmp_path / "e3"), arch="eagle3")
    assert isinstance(warm.net, PublishedEagle3Net)
    with pytest.raises(BadInput, match="set learner.arch to match"):
        Eagle3Learner(pair, data, list(SERVED), init_from=str(tmp_path / "e3"))
    with pytest.raises(BadInput, match="learner.arch='gpt' is unknown"):
        Eagle3Learner(pair, data, list(SERVED), arch="gpt")
    from specdec.learners.eagle3.module import export_eagle3

    with pytest.raises(BadInput, match="set export.format=eagle3_hf"):
        export_eagle3(warm, str(tmp_path), format="specdec")


def test_export_format_switch(tiny64, tmp_path):
    from types import SimpleNamespace

    from specdec.learners.eagle3.module import export_eagle3
    from specdec.nets.eagle3.net import new_eagle3

    ours = new_eagle3(tiny64.target, torch.arange(259), LAYERS)
    learner = SimpleNamespace(net=ours, _target=[tiny64.target])
    assert (export_eagle3(learner, str(tmp_path), format="specdec") / "config.json").exists()
    with pytest.raises(BadInput, match="learner.arch=eagle3.*use export.format=specdec"):
        export_eagle3(learner, str(tmp_path), folder=str(tmp_path / "x"), format="eagle3_hf")
    with pytest.raises(BadInput, match=r"export.format='onnx' is unknown; use one of"):
        export_eagle3(learner, str(tmp_path), format="onnx")


@pytest.mark.parametrize(
    "overrides, fix",
    [
        (
            [],
            r"export.format=eagle3_hf writes .* learner.arch=specdec does not train; set "
            r"learner.arch=eagle3",
        ),
        (
            ["learner.arch=eagle3"],
            r"target layers \[0, 1, 2\] include \[0, 2\]: .* set "
            r"eagle3.target_layers to layers inside 1..1",
        ),
    ],
)
def test_eagle3_hf_export_that_cannot_be_written_is_refused_before_training(
    tmp_path, compose, overrides, fix
):
    import re

    from specdec.errors import input_error
    from specdec.train import train

    cfg = compose(
        "train",
        [
            "+experiment=eagle3_tiny",
            f"eagle3.traces_dir={tmp_path / 'none'}",
            "export.format=eagle3_hf",
            *overrides,
        ],
    )
    with pytest.raises(Exception) as info:  # Hydra wraps it; the entry point prints its cause
        train(cfg)  # no training data exists: the refusal comes before anything reads or trains
    err = input_error(info.value)
    assert isinstance(err, BadInput) and re.search(fix, str(err)), info.value
    assert not list(tmp_path.rglob("*.ckpt")) and not (tmp_path / "none").exists()


def test_eval_config_runs_a_released_head_greedy_like_ar(compose, tiny64, tmp_path):
    from specdec.bench.run.runner import build_method
    from specdec.engine import generate
    from specdec.sampling import TorchCoins

    pinned, unpinned = write_stub(tmp_path / "pinned"), write_stub(tmp_path / "free", layers=None)
    greedy = ["sampling.temperature=0", "model.placement.dtype=float64"]
    prompt = tiny64.tokenizer.encode("The quick brown fox")

    def tokens(overrides: list[str]) -> list[int]:
        m = build_method(compose("eval", [*overrides, *greedy]), tiny64)
        return generate(
            prompt,
            m.target,
            m.drafter,
            m.verifier,
            sampling=m.sampling,
            coins=TorchCoins(1),
            max_new_tokens=16,
        ).tokens

    want = tokens(["method=ar"])
    assert tokens(["method=eagle3", f"drafter.path={pinned}"]) == want
    assert (
        tokens(["method=eagle3", f"drafter.path={unpinned}", "drafter.target_layers=[0,1,2]"])
        == want
    )


@pytest.mark.slow  # one eval process, ~12 s
def test_eval_with_an_uncached_hub_id_prints_one_error_line_and_exits_2(tmp_path):
    import os
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "benchmark=tiny",
        "method=eagle3",
        "drafter.path=nobody-here/no-such-eagle3-head",
        "hydra.mode=RUN",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "hf download nobody-here/no-such-eagle3-head" in errors[0]
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
