"""The run directory's shared files: strict JSON written atomically.

JSON has no NaN or infinity: Python's ``json`` writes the literals ``NaN``/``Infinity`` by default,
which other readers (``jq``, JavaScript, pandas with a strict parser) reject. ``dumps`` writes
``null`` for every non-finite float (an AR run's acceptance rate is 0/0) and refuses anything else
that is not JSON (``allow_nan=False``); readers treat ``null`` as "not defined", as they treated
NaN. ``write_json`` writes a temporary file in the same folder and ``os.replace``-s it over the
target, so a run killed while writing leaves the previous file or the new one, never a 0-byte or
half-written file.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path


def json_safe(obj: object) -> object:
    """``obj`` with every non-finite float (NaN, ±inf) inside dicts, lists and tuples as None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj


def dumps(obj: object, *, indent: int | None = None) -> str:
    """Strict JSON text of ``obj`` (non-finite floats as ``null``)."""
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False)


def write_json(path: str | Path, obj: object) -> None:
    """Write ``obj`` as indented strict JSON to ``path`` atomically (temp file, ``os.replace``)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(dumps(obj, indent=2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # only left when the write or the replace failed
