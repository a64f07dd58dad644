"""Online target features (``datamodule.features=online``, ``data/online_features.py``).

For the same batch the training step's online features equal the data stage's cached ones (both
rounded to fp16; the tolerance is one fp16 rounding step, 2^-10 relative: the cache ran the
target on each file's batches of 3 traces, the step on another batch of another padding width,
and fp32 sums over other shapes may differ in the last bits, moving a value across an fp16
rounding boundary); a few training steps from one seed give the same losses; a tiny fit with
online features trains, exports and decodes, for EAGLE-3 and for SpecBlock warm-started from it.
"""

from __future__ import annotations

import pytest
import torch

LAYERS = [0, 1, 2]


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """A tiny data stage with features (cache) and the pair it ran on."""
    from specdec.data.features import make_eagle3_data
    from specdec.models.tiny import tiny_pair

    pair, out = tiny_pair(), tmp_path_factory.mktemp("data")
    make_eagle3_data(
        pair,
        str(out),
        LAYERS,
        feature_batch=3,
        synthetic={"prompts": 12, "max_new": 10, "vocab_map_size": 64},
    )
    return pair, out


def batches(folder, features: bool, size: int = 5):
    from specdec.data.features import load_feature_traces
    from specdec.learners.eagle3.batches import FeatureTraces, collate

    data = FeatureTraces(load_feature_traces(folder, features=features), max_len=20)
    rows = [data[i] for i in range(len(data))]
    return [collate(rows[b : b + size]) for b in range(0, len(rows), size)]


def test_online_features_equal_the_cached_ones(cached):
    from specdec.data.features import frozen_target
    from specdec.data.online_features import target_features

    pair, folder = cached
    target = frozen_target(pair)
    for cache, online in zip(batches(folder, True), batches(folder, False), strict=True):
        assert "feats" not in online and torch.equal(cache["ids"], online["ids"])
        got = target_features(target, online["ids"], online["length"], LAYERS)
        assert got.dtype == cache["feats"].dtype == torch.float16
        torch.testing.assert_close(got.float(), cache["feats"].float(), rtol=2**-10, atol=1e-6)


@pytest.mark.parametrize("kind", ["eagle3", "specblock"])
def test_a_few_steps_give_the_cached_loss_curve(cached, kind):
    from specdec.learners.eagle3.module import Eagle3Learner
    from specdec.learners.specblock.module import SpecBlockLearner

    pair, folder = cached

    def curve(features: bool) -> list[float]:
        torch.manual_seed(0)
        if kind == "eagle3":
            learner = Eagle3Learner(pair, str(folder), LAYERS, lr=3e-3)
            step = lambda b: learner._step(b, "train")  # noqa: E731
        else:
            learner = SpecBlockLearner(
                pair, str(folder), LAYERS, blocks=2, rank_hidden=16, lr=3e-3, seed=0
            )
            step = lambda b: learner._step(b, "train", learner._cuts)  # noqa: E731
        learner.log = lambda *args, **kwargs: None  # not attached to a Trainer
        opt = torch.optim.AdamW([p for p in learner.net.parameters() if p.requires_grad], lr=3e-3)
        out = []
        for b in batches(folder, features) * 2:
            loss = step(b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(float(loss.detach()))
        return out

    want, got = curve(True), curve(False)
    assert len(set(want)) == len(want)  # the steps train (SpecBlock's objective is not monotone)
    # the same inputs up to fp16 rounding steps (above): 6 steps of AdamW stay within 1e-3
    assert got == pytest.approx(want, rel=1e-3), (got, want)


def test_online_fits_export_and_decode_and_specblock_warm_starts(tmp_path, compose):
    from specdec.drafters import EmptyDrafter
    from specdec.drafters.eagle3 import Eagle3Drafter
    from specdec.drafters.policies import Fixed
    from specdec.drafters.specblock import SpecBlockDrafter
    from specdec.engine import generate
    from specdec.lm import CachedLM
    from specdec.models.tiny import tiny_pair
    from specdec.sampling import Sampling, TorchCoins
    from specdec.train import train
    from specdec.verifiers import RecursiveRejection

    data = tmp_path / "data"
    online = [
        "+data_gen.features=none",
        "+datamodule.features=online",
        "data_gen.synthetic.prompts=16",
        "trainer=debug",
    ]
    train(
        compose(
            "train", ["+experiment=eagle3_tiny", f"eagle3.traces_dir={data}", *online, "stage=data"]
        )
    )
    assert not list(data.glob("features*")) and list(data.glob("traces*"))
    metrics = train(
        compose(
            "train",
            [
                "+experiment=eagle3_tiny",
                f"eagle3.traces_dir={data}",
                f"export.folder={tmp_path / 'e3'}",
                *online,
            ],
        )
    )
    assert "test/acc0" in metrics
    metrics = train(
        compose(
            "train",
            [
                "+experiment=specblock_tiny",
                f"specblock.traces_dir={data}",
                f"learner.init_eagle3={tmp_path / 'e3'}",
                f"export.folder={tmp_path / 'sb'}",
                *online,
            ],
        )
    )
    assert "test/acc0" in metrics
    pair, greedy = tiny_pair(), Sampling(temperature=0.0)
    prompt = pair.tokenizer.encode("hello")

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

    ar = run(EmptyDrafter())
    assert run(Eagle3Drafter(Fixed(3), str(tmp_path / "e3"))) == ar
    assert run(SpecBlockDrafter(Fixed(3), str(tmp_path / "sb"))) == ar
