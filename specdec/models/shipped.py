"""The shipped-folder format of trained assets, read and written in one place.

Every trained asset (``specdec/assets/<kind>/<model>/``: the EAGLE-3 and SpecBlock drafters, the
H-RAD and SpecDec++ heads, the distilled draft LM) is a folder holding ``config.json`` (a JSON
object) and ``model.safetensors`` (or its shards and their index, ``shards.py``), beside which a
model card may sit. The readers here turn each
way such a file can be broken (missing, empty, truncated, garbage bytes, invalid JSON, NaN/inf
weights, tensors that do not fit the network) into an ``InputError`` naming the file and the
command that re-creates it (``fix_cmd``, already quoted in backticks, e.g.
```python -m specdec.train +experiment=eagle3_tiny```), so the entry points print one ``error:``
line instead of a traceback. ``read_checkpoint`` does the same for the Lightning checkpoints the
learners read back.

``write_asset`` writes an asset atomically (``folder_swap.replace_folder``): the files go into a
temporary sibling folder that then takes the old folder's place by rename, so a kill while
exporting leaves the old asset or the new one, never a half-written one; a kill between the two
renames is completed or undone by the next export (``folder_swap.recover_folder``).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from specdec.errors import BadInput, MissingInput
from specdec.models.folder_swap import replace_folder
from specdec.models.shards import INDEX, write_weights

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
FILE_MODE = 0o644  # an asset's files: rw-r--r-- (served by another user, e.g. an engine's)


def _reason(err: BaseException) -> str:
    """The first line of ``err``'s message, at most 160 characters (torch's run to paragraphs)."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _require(path: Path, kind: str, fix_cmd: str) -> None:
    if not path.is_file():
        raise MissingInput(f"{kind} file {path} is missing; create it with {fix_cmd}")


def read_config(
    folder: str | Path, kind: str, fix_cmd: str, *, keys: Sequence[str] = (), name: str = CONFIG
) -> dict:
    """``folder/<name>`` (``config.json``) as a dict that holds every one of ``keys``.

    Args:
        folder: the asset folder.
        kind: what the asset is, for messages (``"EAGLE-3 drafter"``).
        fix_cmd: the command(s) that re-create the asset, in backticks.
        keys: top-level keys the loader reads.

    Raises:
        MissingInput: no such file.
        BadInput: empty, truncated, not UTF-8, not JSON, not an object, or lacking ``keys``.
    """
    path = Path(folder) / name
    _require(path, kind, fix_cmd)
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError) as err:  # ValueError: UnicodeDecodeError and JSONDecodeError
        what = "the file is empty" if path.stat().st_size == 0 else "not valid JSON"
        raise BadInput(
            f"{kind} config {path} is corrupt: {what} ({_reason(err)}); re-create it with {fix_cmd}"
        ) from err
    if not isinstance(raw, dict):
        raise BadInput(
            f"{kind} config {path} is corrupt: it holds a JSON "
            f"{type(raw).__name__}, not an object; re-create it with {fix_cmd}"
        )
    missing = [k for k in keys if k not in raw]
    if missing:
        raise BadInput(
            f"{kind} config {path} lacks the keys {missing}; re-create it with {fix_cmd}"
        )
    return raw


def check_finite(state: dict[str, torch.Tensor], path: str | Path, kind: str, fix_cmd: str) -> None:
    """Raise ``BadInput`` naming the first floating tensor of ``state`` with a NaN or inf."""
    for name, tensor in state.items():
        if tensor.is_floating_point():
            bad = int((~torch.isfinite(tensor)).sum())
            if bad:
                raise BadInput(
                    f"{kind} weights {path}: tensor {name!r} has {bad} NaN/inf "
                    f"value(s) of {tensor.numel()}; retrain and re-export it with "
                    f"{fix_cmd}"
                )


def has_weights(folder: str | Path) -> bool:
    """Whether ``folder`` holds weights: ``model.safetensors`` or a shard index (``shards.py``)."""
    return (Path(folder) / WEIGHTS).is_file() or (Path(folder) / INDEX).is_file()


def _read_sharded(index: Path, kind: str, fix_cmd: str) -> dict[str, torch.Tensor]:
    """The tensors the shards of ``index`` hold, exactly those its weight map names."""
    raw = read_config(index.parent, kind, fix_cmd, name=INDEX)
    wmap = raw.get("weight_map")
    if not isinstance(wmap, dict) or not wmap:
        raise BadInput(f"{kind} shard index {index} has no weight_map; re-create it with {fix_cmd}")
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(set(wmap.values())):
        got = read_tensors(index.parent / shard, kind, fix_cmd)  # missing / truncated: named
        wrong = sorted(set(got) ^ {k for k, v in wmap.items() if v == shard})
        if wrong:
            raise BadInput(
                f"{kind} shard {index.parent / shard} does not hold the tensors "
                f"{index} maps to it (differing: {wrong[:5]}); re-create them with "
                f"{fix_cmd}"
            )
        state.update(got)
    return state


def read_tensors(path: str | Path, kind: str, fix_cmd: str) -> dict[str, torch.Tensor]:
    """The tensors of a ``.safetensors`` file, every floating one finite (``check_finite``); for
    a folder's ``model.safetensors`` that a shard index replaces (``shards.py``), its shards'.

    Raises:
        MissingInput: no such file (or shard).
        BadInput: empty, truncated or not a safetensors file, or a NaN/inf weight.
    """
    path = Path(path)
    if path.name == WEIGHTS and not path.exists() and (path.parent / INDEX).is_file():
        return _read_sharded(path.parent / INDEX, kind, fix_cmd)
    _require(path, kind, fix_cmd)
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        what = (
            "the file is empty"
            if path.stat().st_size == 0
            else "truncated or not a safetensors file"
        )
        raise BadInput(
            f"{kind} weights {path} are corrupt: {what} ({_reason(err)}); re-create "
            f"them with {fix_cmd}"
        ) from err
    check_finite(state, path, kind, fix_cmd)
    return state


def load_state(
    net: nn.Module,
    state: dict[str, torch.Tensor],
    path: str | Path,
    kind: str,
    fix_cmd: str,
    *,
    ignore_missing: Sequence[str] = (),
    assign: bool = False,
) -> None:
    """``net.load_state_dict(state)``; keys missing (beyond ``ignore_missing``), unexpected or of
    another shape raise ``BadInput`` naming ``path`` and listing them."""
    try:
        missing, unexpected = net.load_state_dict(state, strict=False, assign=assign)
    except RuntimeError as err:  # tensors of another shape than the network's
        raise BadInput(
            f"{path} does not match the {kind} network ({_reason(err)}); re-create "
            f"it with {fix_cmd}"
        ) from err
    missing = [k for k in missing if k not in ignore_missing]
    if unexpected or missing:
        raise BadInput(
            f"{path} does not match the {kind} network (missing {missing}, "
            f"unexpected {unexpected}); re-create it with {fix_cmd}"
        )


def read_checkpoint(path: str | Path, fix_cmd: str) -> dict:
    """A Lightning checkpoint (``torch.load(weights_only=True)``) that holds a ``state_dict``.

    Raises:
        MissingInput: no such file.
        BadInput: a truncated, empty or foreign file, naming ``path`` and ``fix_cmd``.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingInput(f"training checkpoint {path} is missing; {fix_cmd}")
    try:
        ckpt = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as err:  # unpickling foreign bytes fails in many ways (KeyError, EOFError...)
        # torch's UnpicklingError advises weights_only=False, which is no fix for a foreign file
        reason = (
            "not a weights-only pickle" if isinstance(err, pickle.UnpicklingError) else _reason(err)
        )
        raise BadInput(
            f"training checkpoint {path} is truncated or not a checkpoint "
            f"({type(err).__name__}: {reason}); {fix_cmd}"
        ) from err
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise BadInput(
            f"training checkpoint {path} holds no state_dict (not a Lightning "
            f"checkpoint); {fix_cmd}"
        )
    return ckpt


def write_asset(
    folder: str | Path,
    state: dict[str, torch.Tensor],
    config: dict,
    *,
    max_shard_mib: float | None = None,
) -> Path:
    """Write ``model.safetensors`` (``state``; with ``max_shard_mib``, shards of at most that
    size when larger: ``shards.py``) and ``config.json`` (``config``, indented JSON) into
    ``folder`` atomically (``replace_folder``); returns ``folder``."""
    folder = Path(folder)
    with replace_folder(folder) as tmp:
        write_weights(tmp, state, WEIGHTS, max_shard_mib)
        (tmp / CONFIG).write_text(json.dumps(config, indent=2, default=str))
        for file in tmp.iterdir():  # safetensors writes 0600: an asset is for others to read
            if file.is_file() and not file.is_symlink():
                file.chmod(FILE_MODE)
    return folder
