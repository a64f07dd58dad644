"""The training command a missing or broken asset names writes that asset, under a real preset.

A drafter whose asset is missing names the command that trains it. Before, an EAGLE-3 or
SpecBlock drafter at ``DIR`` said "``python -m specdec.train +experiment=...`` (it exports to
DIR)", but that command exports to ``<run>/export/``; an H-RAD head at ``.../myhead`` named
``+experiment=hrad_myhead``, which does not exist. The hints now carry the ``export.*`` overrides
that write ``DIR`` (``models/retrain.retrain_command``), and each command's destination is
checked with the training entry point's own ``check_export``. Deterministic.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from specdec.drafters.policies import Fixed
from specdec.errors import MissingInput
from specdec.models.retrain import ASSETS, experiment_of, retrain_command


def _destination(compose, command: str, run: Path) -> Path:
    """Where ``command`` (``python -m specdec.train ...``) exports, per ``train.check_export``."""
    from specdec.train import check_export

    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "specdec.train"], command
    return check_export(compose("train", words[3:]), run)


def test_a_missing_feature_drafter_names_a_command_that_exports_to_its_folder(compose, tmp_path):
    from specdec.drafters.eagle3 import Eagle3Drafter

    mine = tmp_path / "mine"
    with pytest.raises(MissingInput) as err:
        Eagle3Drafter(Fixed(3), str(mine), experiment="eagle3_tiny")
    command = re.search(
        r"`(python -m specdec\.train [^`]*)` \(it exports to ([^)]*)\)", str(err.value)
    )
    assert command is not None, str(err.value)
    assert command[2] == str(mine) and f"export.folder={mine}" in command[1]
    assert _destination(compose, command[1], tmp_path / "run") == mine


def test_the_command_for_a_shipped_asset_installs_it(compose, tmp_path):
    shipped = ASSETS / "eagle3" / "tiny"
    command = retrain_command("eagle3_tiny", shipped)
    assert command.endswith("export.install=true export.force=true")  # files are there
    assert _destination(compose, command, tmp_path / "run") == shipped


def test_a_missing_hrad_head_names_an_experiment_that_exists(compose, tmp_path):
    from specdec.drafters.specbranch import SpecBranchDrafter
    from specdec.lm import CachedLM
    from specdec.models.tiny import tiny_pair

    head = tmp_path / "myhead"
    with pytest.raises(MissingInput) as err:
        SpecBranchDrafter(
            CachedLM(tiny_pair().draft, role="draft"), Fixed(2), mode="inline", hrad=str(head)
        )
    message = str(err.value)
    assert "hrad_myhead" not in message
    assert experiment_of("hrad", head) == (
        "hrad model=hf model.target=<hub id|folder> model.draft=<hub id|folder>"
    )
    commands = re.findall(r"`(python -m specdec\.train [^`]*)`", message)
    assert len(commands) == 2 and commands[0].endswith(f"export.folder={head} stage=data")
    assert commands[1] == (
        f"python -m specdec.train +experiment={experiment_of('hrad', head)} export.folder={head}"
    )
    # the same head for the tiny pair: its preset, filled in, exports to the folder
    tiny = tmp_path / "tiny"
    with pytest.raises(
        MissingInput,
        match=rf"`python -m specdec\.train \+experiment=hrad_tiny "
        rf"export\.folder={re.escape(str(tiny))}`",
    ):
        SpecBranchDrafter(
            CachedLM(tiny_pair().draft, role="draft"), Fixed(2), mode="inline", hrad=str(tiny)
        )
    cmd = retrain_command("hrad_tiny", tiny)
    assert _destination(compose, cmd, tmp_path / "run") == tiny
