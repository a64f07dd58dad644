"""``python -m specdec.train ckpt_path=...`` loads checkpoints with ``weights_only=True``.

A Lightning checkpoint is a pickle: loaded with ``weights_only=False`` (Lightning's default for an
``http`` path, torch's when ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is set) it runs whatever code it
carries. The tiny experiment's own checkpoints hold only tensors and plain values, so they resume
under ``weights_only=True``; a checkpoint carrying code is refused.
"""

from __future__ import annotations

import pickle

import pytest
import torch

from specdec.data import specdecpp as acceptance_data
from specdec.errors import BadInput

RAN: list[str] = []


def _payload_ran(tag: str) -> str:
    RAN.append(tag)
    return tag


class Payload:
    """Unpickling it calls ``_payload_ran``: code a tampered checkpoint would run."""

    def __reduce__(self):
        return (_payload_ran, ("payload",))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from specdec.models.tiny import tiny_pair

    out = tmp_path_factory.mktemp("acc") / "data"
    acceptance_data.generate_acceptance_data(
        tiny_pair(),
        str(out),
        [{"name": "synthetic", "limit": 12}],
        sampling={"temperature": 1.0},
        max_new_tokens=8,
        val_fraction=0.25,
        test_fraction=0.25,
    )
    return str(out)


def _cfg(compose, data_dir, tmp_path, epochs: int, *extra: str):
    return compose(
        "train",
        [
            "+experiment=specdecpp_tiny",
            f"data_path={data_dir}",
            f"export.folder={tmp_path / 'head'}",
            f"trainer.max_epochs={epochs}",
            "+trainer.limit_train_batches=2",
            "+trainer.limit_val_batches=1",
            "+trainer.limit_test_batches=1",
            "callbacks.progress_bar.refresh_rate=0",
            "+trainer.enable_model_summary=false",
            *extra,
        ],
    )


def test_ckpt_path_resumes_the_tiny_experiment_with_weights_only(
    compose, data_dir, tmp_path, monkeypatch
):
    from specdec.train import train

    train(_cfg(compose, data_dir, tmp_path, 1))
    last = tmp_path / "checkpoints" / "last.ckpt"
    loads, real = [], torch.load
    monkeypatch.setattr(
        torch, "load", lambda *a, **k: loads.append(k.get("weights_only")) or real(*a, **k)
    )
    metrics = train(_cfg(compose, data_dir, tmp_path, 2, f"ckpt_path={last}"))
    assert "test/loss" in metrics and loads and all(w is True for w in loads), loads
    tampered = tmp_path / "tampered.ckpt"
    ckpt = real(last, weights_only=True)
    ckpt["payload"] = Payload()
    torch.save(ckpt, tampered)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # torch's default is unsafe now
    # refused before the fit by the weights-only read of the checkpoint (one error line)
    with pytest.raises(BadInput, match="not a weights-only pickle") as err:
        train(_cfg(compose, data_dir, tmp_path, 3, f"ckpt_path={tampered}"))
    assert isinstance(err.value.__cause__, pickle.UnpicklingError)
    assert "Weights only load failed" in str(err.value.__cause__)
    assert RAN == []  # the checkpoint's code never ran
