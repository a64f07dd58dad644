"""H-RAD training data on disk (``data.hrad`` writes it, ``learners.hrad`` reads it).

Resumable (a finished chunk is never redone): ``meta.json`` (the settings, checked on resume)
and per ``chunk_size`` prompts ``chunk_<c>.safetensors``: ``features [N, D]`` float32,
``labels``, ``accepted``, ``step``, ``prompt`` (global prompt index), ``split`` (0 train,
1 validation, 2 test), ``prefix_len`` (committed tokens when the step began, root included) and
``draft [N, γ_max]`` per step; ``tokens``/``offsets``/``seq_prompt``: each prompt's committed
sequence (prompt + answer), so a row's context is ``tokens[prompt][:prefix_len]``;
``dropped_short`` ``[1]``: the chunk's steps dropped for a short draft.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specdec.errors import BadInput, MissingInput

SPLITS = ("train", "validation", "test")
DATA_COMMAND = "python -m specdec.train +experiment=hrad_<model> stage=data"


def check_meta(out: Path, meta: dict) -> None:
    """Write ``meta.json``, or check that an existing one describes the same data."""
    path = out / "meta.json"
    if path.exists():
        old = json.loads(path.read_text())
        diff = sorted(k for k in meta if old.get(k) != meta[k])
        if diff:
            raise BadInput(
                f"{out} holds H-RAD data made with other settings ({diff}); delete "
                "the folder or set data_gen.out_dir to a new one"
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta, indent=2))


def write_chunk(
    path: Path,
    rows: list[dict],
    seqs: list[list[int]],
    seq_prompt: list[int],
    gamma_max: int,
    width: int,
    dropped_short: int = 0,
) -> None:
    """One chunk file, written atomically (``rows`` may be empty)."""
    offsets = torch.tensor([0] + [len(s) for s in seqs]).cumsum(0)
    tensors = {
        "features": torch.stack([r["features"] for r in rows])
        if rows
        else torch.zeros(0, width),  # [N, D]
        "draft": torch.stack([r["draft"] for r in rows])
        if rows
        else torch.zeros(0, gamma_max, dtype=torch.long),  # [N, γ]
        "tokens": torch.tensor([t for s in seqs for t in s], dtype=torch.int32),
        "offsets": offsets,
        "seq_prompt": torch.tensor(seq_prompt, dtype=torch.long),
        "dropped_short": torch.tensor([dropped_short]),
    }
    for key in ("label", "accepted", "step", "prefix_len", "prompt", "split"):
        tensors[key] = torch.tensor([r[key] for r in rows], dtype=torch.long)
    tensors["labels"] = tensors.pop("label")
    tmp = path.with_suffix(".tmp")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
    tmp.rename(path)


def load_hrad_data(folder: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """Every chunk's rows concatenated (``features``, ``labels``, ``accepted``, ``split``, ...)
    and ``meta.json``.

    Raises:
        FileNotFoundError: no data in ``folder`` (names the command that writes it).
    """
    folder = Path(folder)
    files = sorted(folder.glob("chunk_*.safetensors"))
    if not files or not (folder / "meta.json").exists():
        raise MissingInput(f"no H-RAD data in {folder}; write it with `{DATA_COMMAND}`")
    parts = [load_file(str(f)) for f in files]
    keys = ("features", "labels", "accepted", "step", "prompt", "split", "prefix_len", "draft")
    rows = {k: torch.cat([p[k] for p in parts]) for k in keys}
    return rows, json.loads((folder / "meta.json").read_text())


def committed_sequences(folder: str | Path) -> dict[int, list[int]]:
    """Each prompt's committed sequence (prompt + answer) by global prompt index."""
    out: dict[int, list[int]] = {}
    for f in sorted(Path(folder).glob("chunk_*.safetensors")):
        d = load_file(str(f))
        off = d["offsets"].tolist()
        for j, i in enumerate(d["seq_prompt"].tolist()):
            out[i] = d["tokens"][off[j] : off[j + 1]].tolist()
    return out
