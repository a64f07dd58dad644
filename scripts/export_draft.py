"""Export a draft-distillation Lightning checkpoint to the shipped format (no Lightning needed).

    python scripts/export_draft.py outputs/distill_smollm2_cpu/fit/checkpoints/last.ckpt \
        specdec/assets/draft_lm/smollm2 [--dtype bfloat16]
"""

from __future__ import annotations

import argparse

import torch

from specdec.errors import exit_on_input_error
from specdec.models.reduced_draft import draft_from_checkpoint, save_draft
from specdec.models.smollm2 import load_target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("folder")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = parser.parse_args(argv)
    target, tok = load_target()
    draft = draft_from_checkpoint(args.checkpoint, target, tok)
    print("exported to", save_draft(draft, args.folder, dtype=getattr(torch, args.dtype)))


if __name__ == "__main__":
    with exit_on_input_error():  # a bad checkpoint or folder: one error line, exit 2
        main()
