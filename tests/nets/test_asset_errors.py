"""Damaged shipped assets and training checkpoints end in one ``InputError`` naming the file and
the command that re-creates it; exports are atomic.

Each asset kind (the EAGLE-3 and SpecBlock drafters, the H-RAD and SpecDec++ heads, the draft
LM) is copied from its tiny shipped folder (the draft LM: saved from the tiny pair) into
``tmp_path`` and damaged one way per case. Before ``learners/shipped.py`` these ended in
``SafetensorError``, ``JSONDecodeError``, ``UnicodeDecodeError`` or ``KeyError`` tracebacks, and
NaN weights loaded silently.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from specdec.errors import EXIT_STATUS, BadInput, InputError
from specdec.learners.scale import exportable
from specdec.models.reduced_draft import (
    draft_from_checkpoint,
    init_from_target,
    load_draft,
    save_draft,
)
from specdec.models.tiny import tiny_pair
from specdec.nets.eagle3.net import load_eagle3, save_eagle3
from specdec.nets.hrad.head import load_hrad, save_hrad
from specdec.nets.specblock.store import load_specblock, save_specblock
from specdec.nets.specdecpp.head import head_from_checkpoint, load_head, save_head
from specdec.testing.paths import REPO

ROOT = REPO
ASSETS = ROOT / "specdec" / "assets"
SHIPPED = {
    "eagle3": "eagle3/tiny",
    "specblock": "specblock/tiny",
    "hrad": "hrad/tiny",
    "specdecpp": "specdecpp/tiny",
}
KINDS = [*SHIPPED, "draft"]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def make_asset(kind: str, folder: Path, pair) -> Path:
    """A loadable ``kind`` asset at ``folder``."""
    if kind in SHIPPED:
        shutil.copytree(ASSETS / SHIPPED[kind], folder)
    else:
        save_draft(init_from_target(pair.target, torch.arange(50), layers=[0]), folder)
    return folder


def load(kind: str, folder: Path, pair):
    """Load ``kind`` from ``folder`` the way eval (or a warm start) does."""
    if kind == "draft":
        return load_draft(folder, pair.target)
    loader = {
        "eagle3": load_eagle3,
        "specblock": load_specblock,
        "hrad": load_hrad,
        "specdecpp": load_head,
    }[kind]
    return loader(folder)


def nan_weight(path: Path) -> str:
    """Put a NaN into the first floating tensor of the file; returns its name."""
    state = load_file(str(path))
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name] = state[name].clone()
    state[name].view(-1)[0] = float("nan")
    save_file(state, str(path))
    return name


def garbage(n: int) -> bytes:
    return random.Random(0).randbytes(n)


DAMAGES: dict[str, tuple[str, Callable[[bytes], bytes]]] = {  # id: (file, new bytes from old)
    "weights truncated": ("model.safetensors", lambda b: b[: len(b) // 2]),
    "weights cut in the header": ("model.safetensors", lambda b: b[:20]),
    "weights empty": ("model.safetensors", lambda b: b""),
    "weights garbage": ("model.safetensors", lambda b: garbage(len(b))),
    "config truncated": ("config.json", lambda b: b[: len(b) // 2]),
    "config empty": ("config.json", lambda b: b""),
    "config garbage": ("config.json", lambda b: garbage(200)),
    "config not an object": ("config.json", lambda b: b"[1, 2, 3]"),
    "config without its keys": ("config.json", lambda b: b'{"note": "half written"}'),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_asset_file_names_the_file_and_the_command(kind, damage, pair, tmp_path):
    folder = make_asset(kind, tmp_path / kind, pair)
    file, damaged = DAMAGES[damage]
    path = folder / file
    path.write_bytes(damaged(path.read_bytes()))
    with pytest.raises(InputError) as info:
        load(kind, folder, pair)
    message = str(info.value)
    assert str(path) in message, message
    assert "python -m specdec.train +experiment=" in message, message


@pytest.mark.parametrize("kind", KINDS)
def test_a_nan_weight_names_the_file_the_tensor_and_the_fix(kind, pair, tmp_path):
    folder = make_asset(kind, tmp_path / kind, pair)
    name = nan_weight(folder / "model.safetensors")
    with pytest.raises(BadInput, match="NaN/inf") as info:
        load(kind, folder, pair)
    message = str(info.value)
    assert str(folder / "model.safetensors") in message and repr(name) in message, message
    assert "retrain and re-export" in message and "specdec.train" in message, message


@pytest.mark.parametrize("kind", KINDS)
def test_the_undamaged_assets_load(kind, pair, tmp_path):
    assert load(kind, make_asset(kind, tmp_path / kind, pair), pair) is not None


def save_again(kind: str, folder: Path, pair) -> None:
    """Load ``kind`` from ``folder``, change every weight, and save it back there."""
    net = load(kind, folder, pair)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.5)
    if kind == "eagle3":
        save_eagle3(net, folder, target_vocab=net.meta["target_vocab"])
    elif kind == "specblock":
        save_specblock(net, folder)
    elif kind == "hrad":
        save_hrad(net, folder, **net.meta)
    elif kind == "specdecpp":
        save_head(net, folder, **net.meta)
    else:
        save_draft(net, folder)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("kind", KINDS)
def test_an_export_that_fails_after_its_first_file_leaves_the_old_asset(
    kind, pair, tmp_path, monkeypatch
):
    folder = make_asset(kind, tmp_path / "assets" / kind, pair)
    (folder / "MODEL_CARD.md").write_text("# card\n")
    before = snapshot(folder)

    def disk_full(self, *args, **kwargs):
        raise OSError("No space left on device (simulated)")

    with monkeypatch.context() as patch:  # the weights are written, then config.json fails
        patch.setattr(Path, "write_text", disk_full)
        with pytest.raises(OSError, match="simulated"):
            save_again(kind, folder, pair)
    assert snapshot(folder) == before
    assert [p.name for p in folder.parent.iterdir()] == [kind]  # no temporary folder left
    save_again(kind, folder, pair)  # a clean export replaces both files, keeps the card
    after = snapshot(folder)
    assert after["MODEL_CARD.md"] == before["MODEL_CARD.md"]
    assert after["model.safetensors"] != before["model.safetensors"]
    assert [p.name for p in folder.parent.iterdir()] == [kind]


def test_a_failed_swap_puts_the_old_folder_back(pair, tmp_path, monkeypatch):
    folder = make_asset("specdecpp", tmp_path / "assets" / "head", pair)
    before, renames = snapshot(folder), []
    real_rename = os.rename

    def second_rename_fails(src, dst):  # old folder aside (1st), new one into place (2nd)
        renames.append(Path(src).name)
        if len(renames) == 2:
            raise OSError("rename failed (simulated)")
        real_rename(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(os, "rename", second_rename_fails)
        with pytest.raises(OSError, match="simulated"):
            save_again("specdecpp", folder, pair)
    assert renames[0] == "head" and snapshot(folder) == before
    assert [p.name for p in folder.parent.iterdir()] == ["head"]


def test_an_export_sweeps_the_temporary_folders_of_killed_exports(pair, tmp_path):
    folder = make_asset("specdecpp", tmp_path / "assets" / "head", pair)
    dead = folder.parent / ".head.999999999.0badc0de.tmp"  # above any pid_max: no such process
    live = folder.parent / f".head.{os.getpid()}.0badc0de.tmp"
    for half in (dead, live):
        half.mkdir()
        (half / "model.safetensors").write_bytes(b"half")
    save_again("specdecpp", folder, pair)
    assert sorted(p.name for p in folder.parent.iterdir()) == sorted(["head", live.name])


def test_an_export_onto_a_file_is_refused(pair, tmp_path):
    (tmp_path / "x").write_text("not a folder")
    with pytest.raises(BadInput, match=r"it is a file, not a folder"):
        save_draft(init_from_target(pair.target, torch.arange(50), layers=[0]), tmp_path / "x")


CHECKPOINTS: dict[str, Callable[[bytes], bytes]] = {  # id: new bytes from a good checkpoint
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "garbage": lambda b: garbage(len(b)),
    "text": lambda b: b"hello, not a checkpoint\n",
}
READERS = {
    "draft_from_checkpoint": lambda p, pair: draft_from_checkpoint(p, pair.target),
    "head_from_checkpoint": lambda p, pair: head_from_checkpoint(p),
    "exportable (FSDP)": lambda p, pair: exportable(
        None, str(p), sharded=True, build=lambda: torch.nn.Linear(1, 1)
    ),
}


@pytest.mark.parametrize("damage", list(CHECKPOINTS))
@pytest.mark.parametrize("reader", list(READERS))
def test_a_damaged_training_checkpoint_names_its_path(reader, damage, pair, tmp_path):
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": {"head.out.weight": torch.zeros(2, 4)}}, path)
    path.write_bytes(CHECKPOINTS[damage](path.read_bytes()))
    with pytest.raises(BadInput, match="truncated or not a checkpoint") as info:
        READERS[reader](path, pair)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("reader", ["draft_from_checkpoint", "head_from_checkpoint"])
def test_a_checkpoint_of_something_else_names_its_path(reader, pair, tmp_path):
    path = tmp_path / "other.ckpt"
    torch.save({"epoch": 3}, path)
    with pytest.raises(BadInput, match="holds no state_dict") as info:
        READERS[reader](path, pair)
    assert str(path) in str(info.value)
    torch.save({"state_dict": {"other.weight": torch.zeros(2)}}, path)
    with pytest.raises(BadInput, match="holds no"):
        READERS[reader](path, pair)


CLI_CASES = [  # (overrides with {asset} for the damaged folder, kind, damage); ~12 s each
    pytest.param(
        ["method=eagle3", "drafter.path={asset}"],
        "eagle3",
        "weights truncated",
        id="eagle3 truncated weights",
    ),
    pytest.param(
        ["method=specdecpp", "drafter.policy.head={asset}"],
        "specdecpp",
        "nan",
        id="specdecpp nan head",
        marks=pytest.mark.slow,
    ),
]


@pytest.mark.parametrize("overrides, kind, damage", CLI_CASES)
def test_eval_with_a_damaged_asset_prints_one_error_line_and_exits_2(
    overrides, kind, damage, pair, tmp_path
):
    folder = make_asset(kind, tmp_path / kind, pair)
    if damage == "nan":
        nan_weight(folder / "model.safetensors")
    else:
        file, damaged = DAMAGES[damage]
        (folder / file).write_bytes(damaged((folder / file).read_bytes()))
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "benchmark=tiny",
        *[o.format(asset=folder) for o in overrides],
        "hydra.mode=RUN",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert proc.returncode == EXIT_STATUS, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(folder / "model.safetensors") in errors[0], proc.stderr
    assert "specdec.train +experiment=" in errors[0], errors[0]
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
