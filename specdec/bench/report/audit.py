"""A run's ``summary.json`` checked against its records: what the report trusts, and what it names.

The records (``records/<dataset>.jsonl``, one line per prompt, ``specdec.bench.records``) are the
measurement; ``summary.json`` is what a run said about them, and a file can be edited, copied half
way or left behind by a killed run. So the report takes from the records:

* **which records are the run's**: those under the summary's ``config_hash``; when none are, but
  the summary's own ``config`` (with its ``learned_weights`` and ``prompt_files``) hashes to
  another value under which records exist, those (the summary's hash was changed);
* **the prompt counts**: a dataset's ``prompts`` is the number of its records;
* **completeness**: a run is complete only when its summary says so *and* every dataset of its
  benchmark (the config's ``benchmark.datasets``, else ``progress``) is summarised and has a record
  for every prompt it expected (``progress``); records can only take completeness away;
* **cut-off lines**: a record file whose last line is not a whole record (a run killed mid-write)
  is named, its line not counted.

Where the summary says otherwise (its ``prompts``, ``progress``, ``overall`` count, ``complete`` or
``config_hash``), ``Audit.disagreements`` names the file, the claim and what the records hold; the
report prints each (``--strict`` exits 2 on them) and shows the records' values
(``checked_summary``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from specdec.bench.records import config_hash, dataset_records
from specdec.bench.run_summary import RunSummary


@dataclass(frozen=True)
class Audit:
    """What a run's records say, beside its summary.

    Attributes:
        record_hash: the config hash whose records are the run's.
        counts: dataset -> records under ``record_hash`` (one per prompt).
        unfinished: ``"<dataset> (<why>)"`` per dataset the records do not complete (empty: the
            records complete every dataset the summary planned).
        disagreements: ``"<claim>, but <what the records hold>"`` per claim of the summary that
            the records contradict.
        cut_off: one line per record file that ends in a cut-off (unparsable) line.
    """

    record_hash: str
    counts: dict[str, int] = field(default_factory=dict)
    unfinished: tuple[str, ...] = ()
    disagreements: tuple[str, ...] = ()
    cut_off: tuple[str, ...] = ()


def cut_off_line(path: Path) -> str | None:
    """``"<file>: ..."`` when the file's last line is a cut-off record (no newline, not JSON);
    ``specdec.bench.records`` drops such a line silently, the report names it."""
    if not path.is_file():
        return None
    tail = path.read_bytes().rsplit(b"\n", 1)[-1]
    if not tail.strip():
        return None
    try:
        rec = json.loads(tail.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        rec = None
    if isinstance(rec, dict) and isinstance(rec.get("prompt_id"), str):
        return None  # a whole record that only lacks its newline: counted
    return (
        f"{path}: its last line is cut off ({len(tail)} bytes, not a whole record: a run "
        "killed mid-write); that record is not counted. Rerun the run's eval command to "
        "record its prompt again"
    )


def config_hash_of(summary: RunSummary) -> str | None:
    """The hash the run's records carry, recomputed from the summary's config as the runner
    computes it (None without a config)."""
    if summary.config is None:
        return None
    return config_hash(
        {
            **summary.config,
            "learned_weights": summary.learned_weights,
            "prompt_files": summary.prompt_files,
        }
    )


def _planned(summary: RunSummary) -> list[str]:
    """The datasets the run set out to run, in the order it runs them (``progress``'s)."""
    bench = (summary.config or {}).get("benchmark")
    named = list((bench.get("datasets") or {}) if isinstance(bench, dict) else {})
    return list(dict.fromkeys([*(summary.progress or {}), *named, *summary.datasets]))


def _hash_and_records(
    path: Path, summary: RunSummary, datasets: list[str]
) -> tuple[str, dict[str, list[dict]], list[str]]:
    """The hash whose records are the run's, those records, and the disagreement if the
    summary's hash is not it."""
    claimed = summary.config_hash or ""
    mine = {d: dataset_records(path, d, claimed) for d in datasets}
    if any(mine.values()):
        return claimed, mine, []
    found: Counter[str] = Counter()
    for d in datasets:
        file = path / "records" / f"{d}.jsonl"
        lines = (
            file.read_text(encoding="utf-8", errors="replace").splitlines()
            if file.is_file()
            else []
        )
        for line in lines:
            try:
                found[str(json.loads(line).get("config_hash"))] += 1
            except (json.JSONDecodeError, AttributeError):
                continue  # a cut-off line: named by cut_off_line
    if not found:
        return claimed, mine, []  # no records at all: said per dataset (unfinished)
    recomputed = config_hash_of(summary)
    if recomputed and recomputed != claimed and recomputed in found:
        why = (
            f"config_hash {claimed!r} matches no record; its config hashes to "
            f"{recomputed!r}, the hash of {found[recomputed]} records: those are used"
        )
        return recomputed, {d: dataset_records(path, d, recomputed) for d in datasets}, [why]
    held = ", ".join(f"{h!r} ({n})" for h, n in found.most_common(3))
    return (
        claimed,
        mine,
        [
            f"config_hash {claimed!r} matches no record (the record files hold "
            f"records of hash {held}): no records are the run's"
        ],
    )


def audit(path: Path, summary: RunSummary) -> Audit:
    """Check the summary of the run in ``path`` against its records (module docstring)."""
    datasets = _planned(summary)
    chash, records, disagree = _hash_and_records(path, summary, datasets)
    counts = {d: len(records[d]) for d in datasets}
    progress = summary.progress or {}
    unfinished: list[str] = []
    for d in datasets:
        # 1. What the records complete: a summarised dataset with every expected prompt.
        n, expected = counts[d], progress.get(d, {}).get("expected")
        of = f"{n} of {expected if expected is not None else '?'} prompts recorded"
        if d not in summary.datasets:  # not summarised
            unfinished.append(f"{d} ({of})")
        elif n == 0:
            unfinished.append(f"{d} (no records under config hash {chash!r})")
        elif expected is not None and n < expected:
            unfinished.append(f"{d} ({of})")
        # 2. The summary's counts against the records.
        claimed = summary.datasets.get(d, {}).get("prompts")
        if d in summary.datasets and claimed != n:
            disagree.append(f"{d}: prompts {claimed}, but {n} records")
        recorded = progress.get(d, {}).get("recorded")  # final once the dataset is summarised
        if d in summary.datasets and recorded is not None and recorded != n:
            disagree.append(f"{d}: progress recorded {recorded}, but {n} records")
    total = summary.overall.get("prompts")
    if (
        summary.datasets
        and total is not None
        and total != sum(counts.get(d, 0) for d in summary.datasets)
    ):
        disagree.append(
            f"overall: prompts {total}, but "
            f"{sum(counts.get(d, 0) for d in summary.datasets)} records"
        )
    if summary.complete and unfinished:
        disagree.append("complete: true, but the records leave " + ", ".join(unfinished))
    cut = [c for d in datasets if (c := cut_off_line(path / "records" / f"{d}.jsonl"))]
    return Audit(chash, counts, tuple(unfinished), tuple(disagree), tuple(cut))


def checked_summary(summary: RunSummary, found: Audit) -> RunSummary:
    """The summary as the report shows it: each dataset's ``prompts`` (and ``overall``'s) the
    records' count, ``complete`` only where the records agree (a copy; the claims stay named in
    ``found.disagreements``)."""
    datasets = {
        d: {**m, "prompts": found.counts.get(d, 0)} if isinstance(m, dict) else m
        for d, m in summary.datasets.items()
    }
    overall = dict(summary.overall)
    if "prompts" in overall:
        overall["prompts"] = sum(found.counts.get(d, 0) for d in summary.datasets)
    complete = summary.complete and not found.unfinished if summary.complete is not None else None
    return replace(summary, datasets=datasets, overall=overall, complete=complete)
