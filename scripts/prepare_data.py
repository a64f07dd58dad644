"""Fill the data directory with the benchmark prompts (thin wrapper over specdec.data.prepare).

    python scripts/prepare_data.py                       # from <repo>/../shared/data if it exists
    python scripts/prepare_data.py --source DIR --out DIR --datasets gsm8k humaneval
    python scripts/prepare_data.py --hub                 # from the HF hub (needs network)

The output folder defaults to $SPECDEC_DATA_DIR, else <repo>/data (the eval's paths.data_dir).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from specdec.data.prepare import prepare, recipes
from specdec.errors import exit_on_input_error

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    default_source = ROOT.parent / "shared" / "data"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source",
        type=Path,
        default=default_source if default_source.is_dir() else None,
        help=f"local folder laid out like shared/data (default {default_source})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ.get("SPECDEC_DATA_DIR", ROOT / "data")),
        help="data directory (default $SPECDEC_DATA_DIR or <repo>/data)",
    )
    names = sorted(set(recipes()) | set(recipes(hub=True)))
    parser.add_argument(
        "--datasets",
        nargs="+",
        choices=names,
        help="datasets to prepare (default: every one conf/dataset/ can prepare)",
    )
    parser.add_argument("--hub", action="store_true", help="fetch from the HF hub instead")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    written = prepare(args.out, source=args.source, names=args.datasets, hub=args.hub)
    print(f"prepared {len(written)} datasets in {args.out}")


if __name__ == "__main__":
    with exit_on_input_error():  # a bad registry entry or source: one `error:` line, status 2
        main()
