"""An export killed between the two renames of its folder swap is finished at the next start.

``models/folder_swap.py`` replaces an asset folder by two renames: the old folder aside to a
``.old`` sibling, the complete new one (a ``.tmp`` sibling) into its place. A process killed
between them (here: a child process that kills itself with SIGKILL in place of the second rename)
leaves no folder at all. The next export, or ``python -m specdec.train`` before it trains, must
complete the swap (or restore the old folder) with the model card and the user's own files the
swap carries over; before, the folder stayed missing, the ``.old`` an orphan, and the rerun wrote
a folder without them. Impossible destinations are refused before any training. Deterministic.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from specdec.errors import BadInput
from specdec.learners.install import export_folder
from specdec.models.shipped import replace_folder
from specdec.testing.paths import REPO

# the child loads folder_swap.py alone (no torch: fast) and dies at the swap's second rename
KILL_BETWEEN_RENAMES = textwrap.dedent("""
    import importlib.util, os, signal, sys
    spec = importlib.util.spec_from_file_location("folder_swap", sys.argv[1])
    swap = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(swap)
    real, calls = os.rename, []
    def rename(src, dst):
        calls.append(src)
        if len(calls) == 2:  # the old folder is aside, the new one not yet in place
            os.kill(os.getpid(), signal.SIGKILL)
        real(src, dst)
    os.rename = rename
    with swap.replace_folder(sys.argv[2]) as tmp:
        (tmp / "model.safetensors").write_text("new weights")
        (tmp / "config.json").write_text('{"new": true}')
""")


def _asset(folder: Path) -> Path:
    """An exported folder with a model card and a folder of the user's own notes."""
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_text("old weights")
    (folder / "config.json").write_text('{"new": false}')
    (folder / "MODEL_CARD.md").write_text("# card\n")
    (folder / "notes").mkdir()
    (folder / "notes" / "eval.txt").write_text("mine\n")
    return folder


def _files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _killed_export(folder: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            KILL_BETWEEN_RENAMES,
            str(REPO / "specdec" / "models" / "folder_swap.py"),
            str(folder),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not folder.exists()  # the state the kill left: no folder, a .old and a full .tmp
    assert sorted(p.suffix for p in folder.parent.iterdir()) == [".old", ".tmp"]


NEW = {
    "model.safetensors": "new weights",
    "config.json": '{"new": true}',
    "MODEL_CARD.md": "# card\n",
    "notes/eval.txt": "mine\n",
}


def test_a_kill_between_the_renames_is_completed_before_the_training_reruns(tmp_path):
    folder = _asset(tmp_path / "assets" / "head")
    _killed_export(folder)
    # the rerun's check before training: the swap completed, so the check sees the files
    with pytest.raises(BadInput, match="would overwrite .*export.force=true"):
        export_folder(tmp_path / "run", folder=folder)
    assert _files(folder) == NEW
    assert [p.name for p in folder.parent.iterdir()] == ["head"]
    with replace_folder(folder) as tmp:  # the rerun's export carries the card and notes over
        (tmp / "model.safetensors").write_text("newer weights")
    assert _files(folder) == {**NEW, "model.safetensors": "newer weights"}
    assert [p.name for p in folder.parent.iterdir()] == ["head"]


def test_without_its_new_folder_the_old_one_is_restored(tmp_path):
    folder = _asset(tmp_path / "assets" / "head")
    before = _files(folder)
    dead = "999999999.0badc0de"  # above any pid_max: a process that is gone
    os.rename(folder, folder.with_name(f".head.{dead}.old"))  # its .tmp is gone
    with replace_folder(folder) as tmp:
        (tmp / "model.safetensors").write_text("new weights")
    # restored (card, notes and config.json back), then its weights rewritten
    assert _files(folder) == {**before, "model.safetensors": "new weights"}
    assert [p.name for p in folder.parent.iterdir()] == ["head"]


def test_an_orphan_old_folder_hands_its_files_to_the_folder_a_rerun_wrote(tmp_path):
    folder = _asset(tmp_path / "assets" / "head")
    os.rename(folder, folder.with_name(".head.999999999.0badc0de.old"))
    folder.mkdir()  # what a rerun wrote before: the weights, but no card
    (folder / "model.safetensors").write_text("rerun weights")
    export_folder(tmp_path / "run", folder=folder, force=True)
    assert _files(folder) == {
        "model.safetensors": "rerun weights",
        "config.json": '{"new": false}',
        "MODEL_CARD.md": "# card\n",
        "notes/eval.txt": "mine\n",
    }
    assert [p.name for p in folder.parent.iterdir()] == ["head"]


def test_an_interrupt_between_the_renames_puts_the_old_folder_back(tmp_path, monkeypatch):
    folder = _asset(tmp_path / "assets" / "head")
    before, real, calls = _files(folder), os.rename, []

    def rename(src, dst):
        calls.append(Path(src).name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C between the renames
        real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(KeyboardInterrupt), replace_folder(folder) as tmp:
        (tmp / "model.safetensors").write_text("new weights")
    assert calls[0] == "head" and _files(folder) == before
    assert [p.name for p in folder.parent.iterdir()] == ["head"]


def test_an_export_folder_that_is_a_file_is_refused_before_training(compose, tmp_path):
    from specdec.train import train

    (tmp_path / "x").write_text("not a folder")
    for folder, says in (
        (tmp_path / "x", "is a file, not a folder"),
        (tmp_path / "x" / "sub", "cannot be created: .* is a file"),
        (Path("/proc/specdec-export"), "cannot be written: /proc refuses"),
    ):
        cfg = compose(
            "train",
            [
                "+experiment=eagle3_tiny",
                f"export.folder={folder}",
                "eagle3.traces_dir=/nonexistent",
            ],
        )  # refused before any data
        with pytest.raises(BadInput, match=rf"export folder .*\(export\.folder\) {says}"):
            train(cfg)
    with pytest.raises(BadInput, match=r"\(export\.asset\) is a file"):
        export_folder(tmp_path / "run", install=True, asset=tmp_path / "x")
