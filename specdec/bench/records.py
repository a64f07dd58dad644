"""Per-prompt records (one JSONL line each), resumable by configuration hash.

Records live in ``<run dir>/records/<dataset>.jsonl``. Each line is written with one ``write`` and
flushed, so a run killed at any moment (SIGKILL included) leaves whole lines plus at most one
partial last line. ``RecordFile.open`` drops that partial line, keeps every whole line, and reports
the prompt ids already recorded under the current ``config_hash``; the run then skips them, so a
killed run restarted with the same command ends with every prompt recorded exactly once.

The configuration hash covers what changes a prompt's record (model pair, method parts, sampling,
seed, generation length, datasets' formatting, cost model; the runner adds the digests of the
learned weights, ``specdec.bench.fingerprint``, so a retrained draft or head never resumes the old
records) and not what only selects or reports (``limit``, ``warmup``, ``resume``, ``quality``,
``logger``, ``paths``): raising ``limit`` resumes the same run. ``threads`` and ``device`` are
hashed: timings of one record set share them. A record's stats fields are
``GenerationStats.to_record()`` (``specdec.metrics``: one schema).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# keys of the eval config that do not change what a prompt's record contains
UNHASHED_KEYS = ("hydra", "paths", "logger", "limit", "warmup", "resume", "quality", "progress",
                 "confirm_run_unsafe_code")
UNHASHED_DATASET_KEYS = ("path", "limit", "quality")


def config_hash(cfg: dict) -> str:
    """A short stable hash of the record-relevant part of a resolved eval config (a plain dict)."""
    keep = {k: v for k, v in cfg.items() if k not in UNHASHED_KEYS}
    bench = keep.get("benchmark")
    if isinstance(bench, dict):
        datasets = {name: {k: v for k, v in ds.items() if k not in UNHASHED_DATASET_KEYS}
                    for name, ds in (bench.get("datasets") or {}).items()}
        keep["benchmark"] = {"datasets": datasets}
    blob = json.dumps(keep, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass
class RecordFile:
    """The records of one dataset in one run directory, opened for appending.

    Attributes:
        path: the JSONL file.
        config_hash: hash of the current configuration; only matching records count.
        records: the current configuration's records, in file order, one per prompt id.
    """

    path: Path
    config_hash: str
    records: list[dict] = field(default_factory=list)

    @classmethod
    def open(cls, path: str | Path, config_hash: str, *, resume: bool = True) -> RecordFile:
        """Read existing records (dropping a partial last line); ``resume=False`` starts over.

        With ``resume=False`` records of this configuration are removed from the file (records of
        other configurations stay), so the run records every prompt afresh.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = _whole_lines(path)
        mine, others, seen = [], [], set()
        for line in lines:
            rec = json.loads(line)
            if rec.get("config_hash") != config_hash:
                others.append(line)
            elif rec["prompt_id"] not in seen:  # defensive: never count a prompt twice
                seen.add(rec["prompt_id"])
                mine.append(rec)
        if not resume:
            mine = []
        kept = others + [json.dumps(r) for r in mine]
        if len(kept) != len(lines) or not _ends_cleanly(path):
            _rewrite(path, kept)
        return cls(path, config_hash, mine)

    @property
    def done(self) -> set[str]:
        """Prompt ids already recorded under this configuration."""
        return {r["prompt_id"] for r in self.records}

    def append(self, record: dict) -> None:
        """Append one record as one line, flushed before returning."""
        record = {**record, "config_hash": self.config_hash}
        assert record["prompt_id"] not in self.done, f"prompt {record['prompt_id']} recorded twice"
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
        self.records.append(record)


def _whole_lines(path: Path) -> list[str]:
    """Every complete, parseable line; a trailing partial line (killed mid-write) is dropped."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    tail = lines.pop()  # "" when the file ends with a newline, else the partial line
    out = [ln for ln in lines if ln.strip()]
    if tail.strip():
        try:
            json.loads(tail)
            out.append(tail)
        except json.JSONDecodeError:
            pass
    for ln in out:
        json.loads(ln)  # a corrupt line in the middle is not something a kill can produce
    return out


def _ends_cleanly(path: Path) -> bool:
    if not path.exists() or path.stat().st_size == 0:
        return True
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def _rewrite(path: Path, lines: list[str]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
    tmp.replace(path)


def iter_records(run_dir: str | Path) -> Iterator[dict]:
    """All records of a run directory (every dataset, every configuration)."""
    for path in sorted((Path(run_dir) / "records").glob("*.jsonl")):
        for line in _whole_lines(path):
            yield json.loads(line)
