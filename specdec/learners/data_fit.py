"""Whether a run's training data was written for the target its learner was built on.

``stage=data`` writes the target's features (EAGLE-3, SpecBlock: ``[n, k, H]`` per trace, beside
a ``token_map.safetensors`` whose ``counts`` has one entry per target token) or, for H-RAD, rows
whose ``meta.json`` records the target's sizes. A fit on data of another target (another
``model=``, ``model.target=`` or a changed model config over the same cache folder) otherwise
ends deep in the first training step with a shape traceback. ``check_data_fits`` compares the
sizes the files record (headers only: no tensor is read) with the learner's target before the fit
and raises ``BadInput`` naming the folder, both sizes and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from safetensors import safe_open

from specdec.errors import BadInput

TOKEN_MAP = "token_map.safetensors"


def _shape(path: Path, key: str) -> list[int] | None:
    """The shape of tensor ``key`` in a safetensors file, from its header; None when absent."""
    with safe_open(str(path), "pt") as handle:
        return list(handle.get_slice(key).get_shape()) if key in handle.keys() else None


def learner_target(learner: Any) -> dict[str, int] | None:
    """``hidden_size``, ``vocab_size`` and ``num_layers`` of the target ``learner`` was built on
    (None for a learner that keeps no target)."""
    dims = getattr(learner, "target_dims", None)  # H-RAD keeps the sizes only
    if isinstance(dims, dict) and "target_hidden_size" in dims:
        return {
            k: int(dims[f"target_{k}"])
            for k in ("hidden_size", "vocab_size", "num_layers")
            if f"target_{k}" in dims
        }
    held = getattr(learner, "_target", None)  # the feature learners keep the frozen target
    if not held:
        return None
    cfg = held[0].config
    return {
        "hidden_size": int(cfg.hidden_size),
        "vocab_size": int(cfg.vocab_size),
        "num_layers": int(cfg.num_hidden_layers),
    }


def data_target(learner: Any, datamodule: Any) -> tuple[Path, dict[str, int]] | None:
    """The data folder and the target sizes its files record (``vocab_size``, ``hidden_size``,
    ``layers_read``: features per position); None when the format records none."""
    hparams = getattr(learner, "hparams", {})
    folder = hparams.get("traces_dir") if hasattr(hparams, "get") else None
    if folder:
        folder, sizes = Path(folder), {}
        if (folder / TOKEN_MAP).is_file():
            counts = _shape(folder / TOKEN_MAP, "counts")  # [V]: one count per target token
            if counts:
                sizes["vocab_size"] = counts[0]
        features = sorted(folder.glob("features_*.safetensors"))
        shape = _shape(features[0], "features") if features else None  # [n, k, H]
        if shape and len(shape) == 3:
            sizes["layers_read"], sizes["hidden_size"] = shape[1], shape[2]
        return folder, sizes
    path = getattr(datamodule, "path", None)
    meta = Path(path) / "meta.json" if path else None
    if meta is not None and meta.is_file():  # H-RAD
        raw = json.loads(meta.read_text())
        return meta.parent, {
            k: int(raw[f"target_{k}"])
            for k in ("hidden_size", "vocab_size")
            if isinstance(raw.get(f"target_{k}"), int)
        }
    return None


def data_key(cfg: DictConfig) -> str:
    """The config key that names the data folder (``eagle3.traces_dir``, ``data_path``): the
    one the datamodule's ``traces_dir`` / ``path`` interpolates, else that key itself."""
    node = OmegaConf.to_container(cfg.datamodule, resolve=False) if cfg.datamodule else {}
    for key in ("traces_dir", "path"):
        raw = node.get(key) if isinstance(node, dict) else None
        if isinstance(raw, str) and raw.startswith("${") and raw.endswith("}") and ":" not in raw:
            return raw[2:-1]
        if raw is not None:
            return f"datamodule.{key}"
    return "the data folder"


def check_data_fits(learner: Any, datamodule: Any, *, data_key: str) -> None:
    """Refuse (``BadInput``) training data written for another target than ``learner``'s.

    Args:
        learner: the instantiated learner (its target's sizes: ``learner_target``).
        datamodule: the instantiated datamodule.
        data_key: the config key that names the data folder, for the fix.
    """
    target, data = learner_target(learner), data_target(learner, datamodule)
    if target is None or data is None:
        return
    folder, sizes = data
    wrong = [
        f"{what} {sizes[key]} (this target's: {target[key]})"
        for key, what in (("hidden_size", "hidden size"), ("vocab_size", "vocabulary"))
        if key in sizes and key in target and sizes[key] != target[key]
    ]
    layers = getattr(learner, "hparams", {}).get("target_layers")
    if layers is not None and "layers_read" in sizes and sizes["layers_read"] != len(layers):
        wrong.append(
            f"features of {sizes['layers_read']} target layers (learner.target_layers "
            f"reads {len(layers)})"
        )
    if wrong:
        raise BadInput(
            f"the training data in {folder} does not fit this run: "
            f"{', '.join(wrong)}; write data for this target (delete that folder and "
            f"rerun this command with stage=data) or pass {data_key}=<a folder of "
            "data for it>"
        )
