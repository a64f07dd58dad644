"""Record files of a data-parallel eval: one per rank while a dataset runs, one merged after.

With ``WORLD_SIZE`` = N > 1 (``specdec.bench.run.ranks``) rank ``r`` appends its records of dataset
``d`` to ``records/ranks/<d>.rank<r>.jsonl`` (a subfolder: readers of ``records/*.jsonl`` never see
a record twice). When every rank has finished the dataset, rank 0 merges (``merge``): the records
of the current config hash from ``records/<d>.jsonl`` and every rank file, one per prompt id,
ordered as the prompt file orders them, plus every other config's lines unchanged, are written
atomically to ``records/<d>.jsonl``; then the rank files are deleted. The ``records/ranks/`` folder
stays while the run goes on: the other ranks are already appending to the next dataset's files
in it (removing it made their next append fail). Rank 0 removes it, if empty, when the last
dataset is merged (``remove_ranks_dir``), so a finished run leaves the same single file per
dataset a one-process run leaves, and a one-process run (``own_path`` is the merged file, no rank
file) is untouched. After the merge, the dataset's records are the merged file's whatever the
world size (a rerun with nothing new merges nothing and still summarises every record).

Resume never records a prompt twice, whatever the world size of the earlier runs: a rank skips
every prompt recorded under the config hash in the merged file or in any rank file
(``recorded_elsewhere``, read only: only the owner repairs a file), besides its own; prompts are
given to ranks round robin (``Ranks.shard``), so each prompt has one owner in a run. With
``resume=false`` only the files the current ranks write count: the earlier records of this config
elsewhere are dropped at the merge.
"""

from __future__ import annotations

import re
from pathlib import Path

from specdec.bench.records import _rewrite, _whole_lines
from specdec.bench.run.ranks import Ranks

_RANK_FILE = re.compile(r"^(?P<dataset>.+)\.rank(?P<rank>\d+)\.jsonl$")


def merged_path(records_dir: Path, dataset: str) -> Path:
    """The dataset's one record file, ``records/<dataset>.jsonl``."""
    return Path(records_dir) / f"{dataset}.jsonl"


def rank_path(records_dir: Path, dataset: str, rank: int) -> Path:
    """Rank ``rank``'s record file of ``dataset`` while it runs."""
    return Path(records_dir) / "ranks" / f"{dataset}.rank{rank}.jsonl"


def own_path(records_dir: Path, dataset: str, ranks: Ranks) -> Path:
    """Where this process appends: the merged file for one process, else its rank file."""
    if ranks.world == 1:
        return merged_path(records_dir, dataset)
    return rank_path(records_dir, dataset, ranks.rank)


def rank_files(records_dir: Path, dataset: str) -> list[Path]:
    """The dataset's rank files on disk (of any earlier world size), by rank."""
    found = []
    for path in (Path(records_dir) / "ranks").glob(f"{dataset}.rank*.jsonl"):
        m = _RANK_FILE.match(path.name)
        if m is not None and m["dataset"] == dataset:
            found.append((int(m["rank"]), path))
    return [path for _, path in sorted(found)]


def recorded_elsewhere(
    records_dir: Path, dataset: str, config_hash: str, *, own: Path, on_bad: str = "stop"
) -> set[str]:
    """Prompt ids recorded under ``config_hash`` in the dataset's files other than ``own``."""
    paths = [merged_path(records_dir, dataset), *rank_files(records_dir, dataset)]
    return {
        rec["prompt_id"]
        for path in paths
        if path != Path(own)
        for _, rec in _whole_lines(path, on_bad=on_bad)
        if rec.get("config_hash") == config_hash
    }


def merge(
    records_dir: Path,
    dataset: str,
    config_hash: str,
    order: list[str],
    *,
    ranks: Ranks,
    resume: bool = True,
    on_bad: str = "stop",
) -> bool:
    """Merge the dataset's rank files into ``records/<dataset>.jsonl``; False when the file is left
    as it was: no rank file, and nothing to drop (with ``resume=False`` and several ranks, the
    merged file's earlier records of this config are dropped even without a rank file).

    Args:
        order: prompt ids in the prompt file's order; the merged records follow it (records of
            ids not in it come last, in the order found).
        ranks: the current run's ranks; with ``resume=False`` only their files' records of this
            config are kept.
    """
    merged = merged_path(records_dir, dataset)
    ranked = rank_files(records_dir, dataset)
    if not ranked and (resume or ranks.world == 1):
        return False  # nothing to merge, nothing to drop (one process: RecordFile.open dropped it)
    current = {own_path(records_dir, dataset, Ranks(r, ranks.world)) for r in range(ranks.world)}
    others: dict[str, None] = {}  # other configs' lines, first seen first, each once
    mine: dict[str, str] = {}  # this config's record lines by prompt id, first source wins
    # 1. Read the merged file first, then the rank files by rank.
    for path in [merged, *ranked]:
        for line, rec in _whole_lines(path, on_bad=on_bad):
            if rec.get("config_hash") != config_hash:
                others.setdefault(line, None)
            elif resume or path in current:
                mine.setdefault(rec["prompt_id"], line)
    # 2. Order this config's records as the prompt file does; 3. write atomically, then delete.
    rank_of = {pid: i for i, pid in enumerate(order)}
    ids = sorted(mine, key=lambda pid: rank_of.get(pid, len(order)))
    _rewrite(merged, [*others, *(mine[pid] for pid in ids)])
    for path in ranked:
        path.unlink()
    return True


def remove_ranks_dir(records_dir: Path) -> None:
    """Remove ``records/ranks/`` when it is empty (rank 0, once no rank appends any more)."""
    folder = Path(records_dir) / "ranks"
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
