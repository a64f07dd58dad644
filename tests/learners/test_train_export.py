"""Training never overwrites shipped files unasked.

An export goes to ``<run dir>/export/``; ``export.install=true`` writes the shipped folder the
method reads, and a destination outside the run folder that holds files is refused, naming the
file and ``export.force=true``, before any training. The help's own examples, run, leave the
shipped assets and ``git status`` as they were (before, ``trainer=debug`` replaced the tracked
``specdec/assets/eagle3/tiny`` with one-batch weights).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from specdec.errors import BadInput
from specdec.learners.install import export_folder
from specdec.paths import CONF_DIR
from specdec.testing.paths import REPO

ROOT = REPO
ASSETS = ROOT / "specdec" / "assets"
HELP = CONF_DIR / "hydra" / "help" / "train.yaml"


def test_the_default_destination_is_the_run_folder_and_install_needs_consent(tmp_path):
    run, asset = tmp_path / "run", tmp_path / "asset"
    assert export_folder(run) == run.resolve() / "export"
    (run / "export").mkdir(parents=True)
    (run / "export" / "config.json").write_text("{}")
    assert export_folder(run) == run.resolve() / "export"  # a rerun replaces its own export
    assert export_folder(run, install=True, asset=asset) == asset.resolve()  # nothing there yet
    asset.mkdir()
    (asset / "config.json").write_text("{}")
    (asset / "model.safetensors").write_bytes(b"")
    for kwargs in ({"install": True, "asset": asset}, {"folder": asset}):
        with pytest.raises(
            BadInput,
            match=rf"overwrite {re.escape(str(asset.resolve()))}/"
            r"config\.json \(and 1 more\).*export\.force=true",
        ):
            export_folder(run, **kwargs)
        assert export_folder(run, force=True, **kwargs) == asset.resolve()
    with pytest.raises(BadInput, match="no export.asset"):
        export_folder(run, install=True)
    with pytest.raises(BadInput, match="two destinations"):
        export_folder(run, install=True, asset=asset, folder=tmp_path / "x")


def test_install_over_a_shipped_asset_is_refused_before_training(compose):
    from specdec.train import train

    cfg = compose(
        "train",
        ["+experiment=eagle3_tiny", "export.install=true", "eagle3.traces_dir=/nonexistent"],
    )  # refused before any data is read
    shipped = ASSETS / "eagle3" / "tiny" / "config.json"
    with pytest.raises(
        BadInput,
        match=rf"overwrite {re.escape(str(shipped))}.*"
        r"export\.force=true",
    ):
        train(cfg)


def _examples() -> list[list[str]]:
    """The overrides of each ``python -m specdec.train`` line under the help's Examples."""
    text = HELP.read_text().split("== Examples ==", 1)[1]
    lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    return [shlex.split(ln)[3:] for ln in lines if ln.startswith("python -m specdec.train")]


def _assets_digest() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(ASSETS.rglob("*"))
        if p.is_file()
    }


def _git_status() -> str | None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_the_help_examples_export_under_their_run_folder(compose, tmp_path):
    from specdec.train import check_export

    examples = _examples()
    assert len(examples) >= 4 and ["+experiment=eagle3_tiny", "trainer=debug"] in examples
    for overrides in examples:
        dest = check_export(compose("train", overrides), tmp_path)
        assert dest == tmp_path.resolve() / "export", overrides


def test_the_help_tiny_examples_leave_the_shipped_files_and_git_status_alone(compose, tmp_path):
    """Runs the help's eagle3_tiny examples (data, then one batch of fit/test and the export)
    with the cache under tmp_path."""
    from specdec.train import train

    before, status = _assets_digest(), _git_status()
    tiny = [ex for ex in _examples() if "+experiment=eagle3_tiny" in ex]
    assert [ex[1:] for ex in tiny] == [["stage=data"], ["trainer=debug"]]
    for overrides in tiny:
        train(compose("train", [*overrides, f"paths.cache_dir={tmp_path / 'cache'}"]))
    assert _assets_digest() == before
    assert _git_status() == status
    assert (tmp_path / "export" / "model.safetensors").is_file()


@pytest.mark.slow  # a Python process with torch and Hydra: ~15 s on a busy 2-core machine
def test_the_cli_refusal_is_one_error_line_and_status_2(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specdec.train",
            "+experiment=eagle3_tiny",
            "export.install=true",
            f"hydra.run.dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the export would overwrite ")
    assert "specdec/assets/eagle3/tiny/" in lines[0] and "export.force=true" in lines[0]
