"""The dataset registry: ``conf/dataset/<name>.yaml`` is the only list of datasets.

Each file is the eval config of one dataset (``path``, ``template``, ``quality``, ...; what
``benchmark=...`` composes) and, under ``source``, where its prompts come from:

- ``prepare``: ``file`` (relative to a folder laid out like ``shared/data``) and ``normaliser``
  (a ``_target_`` callable, ``_partial_: true``, from source rows to prepared rows) that
  ``specdec.data.prepare`` uses to write ``<data_dir>/<name>/test.jsonl``; ``packaged`` (optional):
  a dotted ``module.ATTRIBUTE`` holding the path of a copy shipped in a package;
- ``hub`` (optional): ``args`` of ``datasets.load_dataset``, its ``split`` and ``normaliser``;
- ``eval_files``: the raw files (same folder) whose prompts are eval prompts: no training source may
  contain them (``eval_texts``, the union over every registered dataset);
- ``train`` (optional): the ``_target_`` reader of the dataset's training split
  (``specdec.data.sources``), what a learner's ``datasets: [<name>]`` reads.

The folder is read with OmegaConf alone (no Hydra run, nothing resolved); ``SPECDEC_DATASET_CONF``
(or a ``conf_dir`` argument) points at another folder. The ``source`` node only says where the data
comes from, so the eval's config hash leaves it out (``specdec.bench.eval_keys``): the prepared
file's digest is hashed instead.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from specdec.errors import BadInput
from specdec.paths import CONF_DIR

ENV = "SPECDEC_DATASET_CONF"
DEFAULT_DIR = CONF_DIR / "dataset"
SOURCE_KEYS = ("prepare", "hub", "eval_files", "train")
FIX = "see docs/extending.md, 'Adding a dataset'"


@dataclass(frozen=True)
class Entry:
    """One registered dataset: its YAML file and the nodes of its ``source`` (plain containers)."""

    name: str
    file: Path
    prepare: dict | None = None
    hub: dict | None = None
    eval_files: tuple[str, ...] = ()
    train: dict | None = None


def conf_dir(override: str | Path | None = None) -> Path:
    """The registry folder: ``override``, else ``$SPECDEC_DATASET_CONF``, else ``conf/dataset``."""
    return Path(override or os.environ.get(ENV) or DEFAULT_DIR)


def _entry(path: Path) -> Entry:
    try:
        node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as e:  # OmegaConf/YAML parse errors have no common base
        raise BadInput(f"{path}: not a readable YAML mapping ({e}); {FIX}") from e
    if not isinstance(node, dict) or node.get("name") != path.stem:
        raise BadInput(f"{path}: 'name' must be the file's stem {path.stem!r}; {FIX}")
    source = node.get("source") or {}
    unknown = sorted(set(source) - set(SOURCE_KEYS))
    if not isinstance(source, dict) or unknown:
        raise BadInput(
            f"{path}: source has unknown keys {unknown}; it takes {', '.join(SOURCE_KEYS)} ({FIX})"
        )
    for key in ("prepare", "hub"):
        if source.get(key) is not None and "normaliser" not in source[key]:
            raise BadInput(f"{path}: source.{key} needs a 'normaliser' ({{_target_: ...}}); {FIX}")
    train = source.get("train")
    if train is not None and "_target_" not in train:
        raise BadInput(
            f"{path}: source.train needs a '_target_' reader (specdec.data.sources); " + FIX
        )
    return Entry(
        path.stem,
        path,
        source.get("prepare"),
        source.get("hub"),
        tuple(source.get("eval_files") or ()),
        train,
    )


def datasets(conf: str | Path | None = None) -> dict[str, Entry]:
    """Every registered dataset by name (file-name order)."""
    folder = conf_dir(conf)
    if not folder.is_dir():
        raise BadInput(
            f"dataset registry {folder} is not a folder; set {ENV} to conf/dataset "
            "or a folder of dataset YAML files"
        )
    return {p.stem: _entry(p) for p in sorted(folder.glob("*.yaml"))}


def lookup(name: str, conf: str | Path | None = None) -> Entry:
    """One registered dataset; an unknown name names the registry and the registered names."""
    table = datasets(conf)
    if name not in table:
        raise BadInput(
            f"unknown dataset {name!r}: no {conf_dir(conf) / (name + '.yaml')}; "
            f"choose from {sorted(table)} or add that file ({FIX})"
        )
    return table[name]


def instantiate_node(node: dict, where: str) -> object:
    """``hydra.utils.instantiate`` of a registry node; a bad ``_target_`` names ``where``."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        return instantiate(node)
    except InstantiationException as e:
        raise BadInput(
            f"{where}: cannot build {node.get('_target_')!r} ({e}); fix the "
            f"_target_ or its keys ({FIX})"
        ) from e


def norm_text(text: str) -> str:
    """Whitespace-normalised text (the key eval-prompt exclusion compares)."""
    return " ".join(text.split())


def file_turns(path: Path) -> list[str]:
    """The user turns of a raw eval file (``turns``, else ``question``, else ``prompt``)."""
    data = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    out: list[str] = []
    for line in data.splitlines():
        if line.strip():
            row = json.loads(line)
            out += row.get("turns") or [row.get("question") or row.get("prompt", "")]
    return out


def eval_files(conf: str | Path | None = None) -> list[str]:
    """Every registered dataset's raw eval files, each once (registry order)."""
    return list(dict.fromkeys(f for ds in datasets(conf).values() for f in ds.eval_files))


def eval_texts(source_dir: str | Path, conf: str | Path | None = None) -> set[str]:
    """Every eval prompt (normalised) under ``source_dir`` that training data must not contain;
    a registered file the folder lacks holds nothing to leak and is skipped."""
    src, out = Path(source_dir), set()
    for rel in eval_files(conf):
        if (src / rel).exists():
            out |= {norm_text(t) for t in file_turns(src / rel)}
    return out
