"""Per-prompt records (one JSONL line each), resumable by configuration hash.

Records live in ``<run dir>/records/<dataset>.jsonl``. Each line is written with one ``write`` and
flushed, so a run killed at any moment (SIGKILL included) leaves whole lines plus at most one
partial last line. ``RecordFile.open`` drops that partial line, keeps every whole line, and reports
the prompt ids already recorded under the current ``config_hash``; the run then skips them, so a
killed run restarted with the same command ends with every prompt recorded exactly once.

The configuration hash covers what changes a prompt's record: model pair, method parts, sampling,
seed, generation length, datasets' formatting and paths, cost model, ``quality`` and the quality
checks (records with and without scores never mix, so a mean score covers every prompt). The
runner adds the digests of the learned weights (``specdec.bench.run.fingerprint``: a retrained draft
or head never resumes the old records) and the SHA-256 of each prompt file (an edited prompt file
never resumes the answers to its old text). What only selects or reports is left out (``limit``,
``warmup``, ``resume``, ``logger``, ``paths``, ``on_bad_record``, ``optimized_metric``,
``hparams_search``, ``rank_timeout_s``): raising ``limit`` resumes the same run, and so does a
``torchrun`` run of any world size (``specdec.bench.run.shards``). ``threads`` and ``device`` are
hashed: timings of one record set share them. The model config's ``placement:`` node is hashed as
its keys were before the node, flat in ``model`` (``placement_config.flat_model``), so runs of the
same settings keep their hash. A record's stats fields are
``GenerationStats.to_record()`` (``specdec.metrics``: one schema).

A corrupt line before the last (no kill produces one: a disk error, a hand edit) stops
``RecordFile.open`` with the file and line number; ``on_bad_record=skip`` drops it instead (with a
warning), and its prompt runs again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# the keys that do not change what a prompt's record contains: each key's ``hashed`` flag in
# eval_keys (still importable from here)
from specdec.bench.eval_keys import UNHASHED_DATASET_KEYS, UNHASHED_KEYS
from specdec.bench.rundir import dumps
from specdec.errors import BadInput
from specdec.models.placement_config import flat_model

log = logging.getLogger(__name__)

#: model keys hashed only when not null (``cuda_graphs``: null, i.e. auto, is the old behaviour)
MODEL_KEYS_IF_SET = ("cuda_graphs",)


def config_hash(cfg: dict) -> str:
    """A short stable hash of the record-relevant part of a resolved eval config (a plain dict)."""
    keep = {k: v for k, v in cfg.items() if k not in UNHASHED_KEYS}
    if "model" in keep:  # the placement node's keys where they were before it: the same hash
        keep["model"] = flat_model(keep["model"])
    model = keep.get("model")
    if isinstance(model, dict) and any(model.get(k, 0) is None for k in MODEL_KEYS_IF_SET):
        # keys added after records existed hash only when set: their default moves no hash
        keep["model"] = {
            k: v for k, v in model.items() if not (k in MODEL_KEYS_IF_SET and v is None)
        }
    bench = keep.get("benchmark")
    if isinstance(bench, dict):
        datasets = {
            name: {k: v for k, v in ds.items() if k not in UNHASHED_DATASET_KEYS}
            for name, ds in (bench.get("datasets") or {}).items()
        }
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
    def open(
        cls, path: str | Path, config_hash: str, *, resume: bool = True, on_bad: str = "stop"
    ) -> RecordFile:
        """Read existing records (dropping a partial last line); ``resume=False`` starts over.

        With ``resume=False`` records of this configuration are removed from the file (records of
        other configurations stay), so the run records every prompt afresh.

        Args:
            on_bad: what a corrupt whole line does (``on_bad_record``): ``stop`` raises a
                ``ValueError`` naming the file and line; ``skip`` logs a warning and removes the
                line from the file, so its prompt runs again.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = _whole_lines(path, on_bad=on_bad)
        mine, others, seen = [], [], set()
        for line, rec in lines:
            if rec.get("config_hash") != config_hash:
                others.append(line)
            elif rec["prompt_id"] not in seen:  # defensive: never count a prompt twice
                seen.add(rec["prompt_id"])
                mine.append(rec)
        if not resume:
            mine = []
        kept = others + [dumps(r) for r in mine]
        if len(kept) != _line_count(path) or not _ends_cleanly(path):
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
            f.write(dumps(record) + "\n")
            f.flush()
        self.records.append(record)


def _parse(raw: bytes) -> tuple[dict | None, str]:
    """A record line's record, or None and what is wrong with it."""
    try:
        rec = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        return None, f"not UTF-8: {err.reason}"
    except json.JSONDecodeError as err:
        return None, f"not valid JSON: {err.msg} at column {err.colno}"
    if not isinstance(rec, dict) or not isinstance(rec.get("prompt_id"), str):
        return None, "not a record (a JSON object with a string 'prompt_id')"
    return rec, ""


def _whole_lines(path: Path, *, on_bad: str = "stop") -> list[tuple[str, dict]]:
    """Every complete, parseable line with its record; a trailing partial line (killed mid-write)
    is dropped. A corrupt line before the last is no kill's doing: ``on_bad`` decides."""
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline, else the partial line
    out = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        rec, problem = _parse(raw)
        if rec is None and on_bad == "stop":
            raise BadInput(
                f"record file {path}, line {number}: {problem}. Remove the line, or "
                "rerun with on_bad_record=skip to drop it and run its prompt again"
            )
        if rec is None:
            log.warning(
                "record file %s, line %d: %s; dropped (its prompt runs again)",
                path,
                number,
                problem,
            )
            continue
        out.append((raw.decode("utf-8"), rec))
    rec, _ = _parse(tail) if tail.strip() else (None, "")
    if rec is not None:
        out.append((tail.decode("utf-8"), rec))
    return out


def _line_count(path: Path) -> int:
    """Non-blank lines in the file, a partial last line included."""
    if not path.exists():
        return 0
    return sum(1 for raw in path.read_bytes().split(b"\n") if raw.strip())


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
        for _, rec in _whole_lines(path):
            yield rec


def dataset_records(run_dir: str | Path, dataset: str, config_hash: str) -> list[dict]:
    """The records of one dataset written under ``config_hash`` (file order, first per prompt)."""
    out: dict[str, dict] = {}
    for _, rec in _whole_lines(Path(run_dir) / "records" / f"{dataset}.jsonl"):
        if rec.get("config_hash") == config_hash:
            out.setdefault(rec["prompt_id"], rec)
    return list(out.values())
