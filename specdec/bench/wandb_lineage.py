"""W&B lineage of an eval run: the trained weights it read, declared as its input artifacts.

An eval run that reads a trained drafter (an EAGLE-3 or SpecBlock drafter, an H-RAD or SpecDec++
head, a distilled draft LM) names the asset folder in its config: ``drafter.path``,
``drafter.hrad``, ``drafter.policy.head``, ``model.draft_path``, ... (``conf/drafter/``,
``conf/method/``). ``learned_folders`` finds every such folder: a string of the config's
``drafter``, ``verifier`` or ``model.draft_path`` that names an existing folder in the shipped
format (``config.json`` beside ``model.safetensors`` or its shard index,
``specdec.models.shipped``), or a file inside one. The target model is never searched (it is
named by the pair and can be many gigabytes).

``use_models`` declares each folder as a ``model`` artifact the run used (``run.use_artifact``):
W&B's lineage graph then links the folder's weights to every eval run that read them. The
artifact is named after the folder (``<kind>-<pair>``, e.g. ``eagle3-tiny`` for
``specdec/assets/eagle3/tiny``) and W&B versions it by content: runs that read the same weights
share one version, and a retrained folder becomes the next version.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from specdec.bench.wandb_artifacts import artifact_name
from specdec.models.shipped import CONFIG, has_weights

SEARCHED = ("drafter", "verifier")  # config nodes whose paths may name trained weights
DRAFT_PATH = ("model", "draft_path")  # the pair's own trained draft, when given by path


def _strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list | tuple):
        for value in node:
            yield from _strings(value)


def _asset_folder(text: str) -> Path | None:
    """The shipped folder ``text`` names (itself, or the folder of a file in it), else None."""
    if "/" not in text and "\\" not in text:
        return None  # a preset name or a hub id's single word, not a path
    try:
        path = Path(text).expanduser()
        folder = path if path.is_dir() else path.parent if path.is_file() else None
    except OSError:
        return None
    if folder is None or not (folder / CONFIG).is_file() or not has_weights(folder):
        return None
    return folder.resolve()


def learned_folders(config: dict) -> list[Path]:
    """The trained-asset folders a resolved eval config names (module docstring), each once, in
    the config's order."""
    found: dict[Path, None] = {}
    nodes = [config.get(key) for key in SEARCHED]
    nodes.append((config.get(DRAFT_PATH[0]) or {}).get(DRAFT_PATH[1]))
    for text in (t for node in nodes for t in _strings(node)):
        folder = _asset_folder(text)
        if folder is not None:
            found.setdefault(folder, None)
    return list(found)


def model_artifact_name(folder: Path) -> str:
    """``<kind>-<pair>`` of an asset folder ``.../<kind>/<pair>`` (a W&B artifact name)."""
    return artifact_name(f"{folder.parent.name}-{folder.name}")


def use_models(run: Any, wandb: Any, folders: Sequence[Path]) -> list[Any]:
    """Declare each folder's files as a ``model`` artifact ``run`` used; returns the artifacts."""
    used = []
    for folder in folders:
        artifact = wandb.Artifact(
            model_artifact_name(folder), type="model", metadata={"folder": str(folder)}
        )
        artifact.add_dir(str(folder))
        used.append(run.use_artifact(artifact))
    return used
