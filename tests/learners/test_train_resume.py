"""Rerunning a killed training command resumes it.

The run folder is ``outputs/train/<task_name>/<config hash>/``: the same command always lands in
the same folder, and ``train`` resumes from its ``checkpoints/last.ckpt``. A run of the tiny
EAGLE-3 experiment is killed (``StopAt`` raises) after its checkpoint at step 6, in the middle of
an epoch, and rerun: it starts at step 6 with the optimizer's 6 steps restored, and the batches of
the killed and the resumed run together are, row for row, those of a run never killed; so are
the final weights. Deterministic (fixed seeds, CPU): no false-failure probability.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import open_dict

KILL, STEPS, EVERY = 6, 10, 3  # checkpoints at steps 3, 6, 9; 4 batches an epoch: 6 is mid-epoch


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    from specdec.config import register_resolvers
    from specdec.data.features import make_eagle3_data
    from specdec.models.tiny import tiny_pair

    register_resolvers()
    out = tmp_path_factory.mktemp("e3") / "data"
    make_eagle3_data(
        tiny_pair(),
        str(out),
        [0, 1, 2],
        synthetic={"prompts": 20, "max_new": 12, "vocab_map_size": 96, "seed": 0},
    )
    return str(out)


def _run(compose, traces: str, run_dir: Path, *extra: str) -> dict:
    from specdec.train import train

    cfg = compose(
        "train",
        [
            "+experiment=eagle3_tiny",
            f"eagle3.traces_dir={traces}",
            "datamodule.batch_size=4",
            f"trainer.max_steps={STEPS}",
            f"trainer.val_check_interval={EVERY}",
            "+trainer.limit_val_batches=1",
            "+trainer.limit_test_batches=1",
            "+trainer.enable_model_summary=false",
            "callbacks.progress_bar.refresh_rate=0",
            "+callbacks.log._target_=specdec.testing.resume_probe.BatchLog",
            f"+callbacks.log.path={run_dir / 'batches.jsonl'}",
            *extra,
        ],
    )
    with open_dict(cfg):
        cfg.paths.output_dir = str(run_dir)
    return train(cfg)


def _log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "batches.jsonl").read_text().splitlines()]


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]


def test_rerunning_a_killed_run_resumes_mid_epoch_without_lost_or_repeated_batches(
    compose, traces, tmp_path
):
    from specdec.testing.resume_probe import Killed

    whole, killed = tmp_path / "whole", tmp_path / "killed"
    _run(compose, traces, whole)
    with pytest.raises(Killed):
        _run(
            compose,
            traces,
            killed,
            "+callbacks.kill._target_=specdec.testing.resume_probe.StopAt",
            f"+callbacks.kill.step={KILL}",
        )
    assert (
        torch.load(killed / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == KILL
    )
    _run(compose, traces, killed)  # the same command again (callbacks are not hashed)

    log = _log(killed)
    starts = [r for r in log if "start" in r]
    assert [(s["start"], s["optimizer_steps"]) for s in starts] == [(0, 0), (KILL, KILL)]
    assert starts[1]["epoch"] == 1  # resumed inside epoch 1 (4 batches an epoch)
    rows = [r["rows"] for r in log if "rows" in r]
    want = [r["rows"] for r in _log(whole) if "rows" in r]
    assert len(want) == STEPS and rows == want  # no batch lost, none repeated, same order
    for name, tensor in _weights(whole).items():
        torch.testing.assert_close(_weights(killed)[name], tensor, rtol=0, atol=0, msg=name)

    # the finished command again, installing: nothing is trained, the run's export is installed
    asset = tmp_path / "asset"
    _run(compose, traces, killed, "export.install=true", f"export.asset={asset}")
    assert [r for r in _log(killed) if "rows" in r] == [r for r in log if "rows" in r]
    assert (asset / "model.safetensors").is_file()


def test_the_same_command_maps_to_the_same_folder_and_training_keys_to_another(compose):
    base = ["+experiment=eagle3_tiny", "trainer=debug"]

    def folder(*extra: str) -> str:
        return str(compose("train", [*base, *extra]).hydra.run.dir)

    first = folder()
    assert Path(first).parent.name == "eagle3_tiny" and first == folder()
    for unhashed in (
        "logger=csv",
        "callbacks=none",
        "export.install=true",
        "stage=data",
        "ckpt_path=x.ckpt",
        "resume=false",
        "paths.cache_dir=/elsewhere",
    ):
        assert folder(unhashed) == first, unhashed
    for hashed in ("learner.lr=0.1", "seed=1", "trainer=cpu", "datamodule.batch_size=2"):
        assert folder(hashed) != first, hashed


def test_resume_false_and_an_explicit_ckpt_path(compose, tmp_path):
    from specdec.learners.resume import resume_checkpoint

    cfg = compose("train", ["+experiment=eagle3_tiny"])
    assert resume_checkpoint(cfg, tmp_path) is None  # nothing to resume: from scratch
    last = tmp_path / "checkpoints" / "last.ckpt"
    last.parent.mkdir()
    torch.save({"state_dict": {}}, last)
    assert resume_checkpoint(cfg, tmp_path) == str(last)
    assert (
        resume_checkpoint(compose("train", ["+experiment=eagle3_tiny", "resume=false"]), tmp_path)
        is None
    )
    good = tmp_path / "a.ckpt"
    torch.save({"state_dict": {}}, good)
    assert resume_checkpoint(
        compose("train", ["+experiment=eagle3_tiny", f"ckpt_path={good}"]), tmp_path
    ) == str(good)


def test_a_truncated_or_missing_checkpoint_is_refused_before_training(compose, tmp_path):
    from specdec.errors import BadInput, MissingInput
    from specdec.learners.resume import resume_checkpoint

    last = tmp_path / "checkpoints" / "last.ckpt"
    last.parent.mkdir()
    last.write_bytes(b"PK\x03\x04 cut short")  # a kill while Lightning wrote it
    with pytest.raises(BadInput, match=r"last\.ckpt is truncated.*resume=false"):
        resume_checkpoint(compose("train", ["+experiment=eagle3_tiny"]), tmp_path)
    with pytest.raises(MissingInput, match="nope.ckpt is missing"):
        resume_checkpoint(
            compose("train", ["+experiment=eagle3_tiny", f"ckpt_path={tmp_path / 'nope.ckpt'}"]),
            tmp_path,
        )


def test_the_loader_state_skips_the_batches_done_in_its_epoch_and_none_of_the_next():
    from torch.utils.data import DataLoader

    from specdec.learners.resumable import ResumableLoader, resumable_copy

    def loader() -> ResumableLoader:
        out = resumable_copy(DataLoader(list(range(10)), batch_size=3, shuffle=True), seed=5)
        assert isinstance(out, ResumableLoader)
        return out

    def epoch(dl: ResumableLoader, e: int, stop: int | None = None) -> list[list[int]]:
        dl.sampler.set_epoch(e)  # what Lightning does before each epoch
        got = []
        for batch in dl:
            got.append(batch.tolist())
            if len(got) == stop:
                break
        return got

    ref = loader()
    want = [epoch(ref, 0), epoch(ref, 1)]
    assert want[0] != want[1] and sorted(sum(want[0], [])) == list(range(10))
    killed = loader()
    head = epoch(killed, 1, stop=2)
    state = killed.state_dict()
    assert state == {"epoch": 1, "batches": 2}
    resumed = loader()
    resumed.load_state_dict(state)
    assert head + epoch(resumed, 1) == want[1]  # the rest of epoch 1, in its order
    assert resumed.state_dict() == {"epoch": 1, "batches": 4}
    ended = loader()
    ended.load_state_dict({"epoch": 0, "batches": 4})  # written at the end of epoch 0
    assert epoch(ended, 1) == want[1]  # the next epoch is whole
    custom = DataLoader(list(range(4)), batch_size=2, sampler=[3, 2, 1, 0])
    assert resumable_copy(custom, seed=0) is custom  # a custom sampler is left alone
