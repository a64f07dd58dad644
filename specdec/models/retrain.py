"""The command that re-creates a learned asset: what a loader's error names when a drafter's or a
head's folder is missing or broken.

``retrain_command(experiment, folder)`` is ``python -m specdec.train +experiment=<experiment>``
plus the ``export.*`` overrides that make the run write exactly ``folder`` (a run exports to
``<run dir>/export/`` without them). It sits with the models, below the networks and the drafters
that raise those errors, so neither imports the training package.
"""

from __future__ import annotations

from pathlib import Path

from specdec.paths import CONF_DIR, ROOT

ASSETS = ROOT / "specdec" / "assets"  # shipped folders: assets/<kind>/<pair name>
EXPERIMENTS = CONF_DIR / "experiment"
GENERIC_PAIR = "model=hf model.target=<hub id|folder> model.draft=<hub id|folder>"


def experiment_of(kind: str, folder: str | Path) -> str:
    """What follows ``+experiment=`` to train the ``kind`` asset at ``folder``: the preset
    ``<kind>_<folder name>`` when one exists (shipped folders are named after their pair), else
    the generic experiment with the pair left to fill in."""
    name = Path(folder).name
    if (EXPERIMENTS / f"{kind}_{name}.yaml").is_file():
        return f"{kind}_{name}"
    return f"{kind} {GENERIC_PAIR}"


def export_args(folder: str | Path) -> str:
    """The ``export.*`` overrides that make a training run write ``folder`` (it exports to
    ``<run dir>/export/`` without them): ``export.install=true`` for a shipped asset folder, else
    ``export.folder=<folder>``; with ``export.force=true`` when files are there. Empty for a hub
    id (``org/name``), which no run writes."""
    from specdec.models.hf import looks_like_hub_id

    if looks_like_hub_id(str(folder)):
        return ""
    path = Path(folder).expanduser().resolve()
    args = "export.install=true" if path.parent.parent == ASSETS else f"export.folder={path}"
    has_files = path.is_dir() and any(not p.name.startswith(".") for p in path.iterdir())
    return f"{args} export.force=true" if has_files else args


def retrain_command(experiment: str, folder: str | Path | None) -> str:
    """``python -m specdec.train +experiment=<experiment>`` with ``export_args(folder)``: the
    command that re-creates the asset a loader found missing or broken at ``folder``."""
    extra = export_args(folder) if folder is not None else ""
    return f"python -m specdec.train +experiment={experiment}" + (f" {extra}" if extra else "")
