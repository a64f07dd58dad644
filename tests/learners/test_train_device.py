"""What a learner puts on the training device: only what a step reads (one copy per rank under
DDP, so the target's decoder layers stay on the CPU unless an online teacher runs them).

The move to the device is simulated with the ``meta`` device: ``learner.to("meta")`` is what
Lightning's ``model_to_device`` does, then the ``on_fit_start`` hook runs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from hydra.utils import instantiate
from safetensors.torch import save_file


def _token_map(folder, vocab: int) -> None:
    ids = torch.arange(min(vocab, 96))
    save_file(
        {"token_map": ids, "counts": torch.ones_like(ids)}, str(folder / "token_map.safetensors")
    )


def _devices(module: torch.nn.Module) -> set[str]:
    return {p.device.type for p in module.parameters()}


def _on_device(learner) -> None:
    learner.to("meta")
    learner.on_fit_start()


@pytest.mark.parametrize("experiment", ["eagle3_tiny", "specblock_tiny"])
def test_a_feature_drafter_moves_only_the_target_embedding(compose, tmp_path, experiment):
    key = experiment.split("_")[0]
    cfg = compose("train", [f"+experiment={experiment}", f"{key}.traces_dir={tmp_path}"])
    _token_map(tmp_path, instantiate(cfg.model).target.config.vocab_size)
    learner = instantiate(cfg.learner)
    _on_device(learner)
    target = learner._target[0]
    assert _devices(target.get_input_embeddings()) == {"meta"}
    assert _devices(target.model.layers) == {"cpu"}  # never read by a step
    assert _devices(learner.net) == {"meta"}


@pytest.mark.parametrize("teacher", [False, True])
def test_the_draft_lm_moves_the_target_only_as_an_online_teacher(tmp_path, teacher):
    from specdec.learners.draft_lm.module import DistillLearner
    from specdec.models.tiny import tiny_pair

    pair = tiny_pair()
    _token_map(tmp_path, pair.target.config.vocab_size)
    learner = DistillLearner(pair, str(tmp_path), layers=[0], teacher=teacher)
    learner._trainer = SimpleNamespace(world_size=2)  # what on_fit_start reads of the trainer
    if teacher:
        with pytest.warns(UserWarning, match="each rank holds the whole frozen target"):
            _on_device(learner)
    else:
        _on_device(learner)
    target = learner._target[0]
    assert _devices(target.get_input_embeddings()) == {"meta"}  # the draft's shared embedding
    assert _devices(target.model.layers) == ({"meta"} if teacher else {"cpu"})
