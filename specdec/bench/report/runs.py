"""Eval runs as the report reads them: a run folder's ``summary.json``, and when two runs compare.

Two runs compare on a dataset (``mismatches`` is empty) when they share the model pair, the prompts
(ids, the prompt file's digest, generation length, formatting), the sampling (settings and seed),
the machine and the software versions. The baseline (``ar``) decodes without a draft, so against
it only the target's part of the pair fingerprint must match (keys of ``ModelPair.describe()``
that name the draft are ignored): one ``ar`` run serves every draft model of the same target. The
kernel probe's timings (``MEASURED``) are left out of the pair: the kernel it chose is compared.
Greedy equality (``specdec.bench.report.greedy``) needs only the pair, prompts and sampling to agree
(``mismatches(..., only=OUTPUT_CHECKS)``): outputs do not depend on the machine's speed.

``read_run`` checks the summary against its records (``specdec.bench.report.audit``): the run's
summary is the records' view (their prompt counts; ``complete`` only where they agree) and
``Run.audit`` keeps what the records hold, with every claim of the summary they contradict.
``Run.records`` reads a dataset's per-prompt records (those of the audited config hash), for the
per-category table, greedy equality and the Spec-Bench export.

``read_runs`` reads every ``summary.json`` below the given folders and names each one it cannot
use (not JSON, unreadable, or without ``method`` and ``datasets``) instead of stopping at it; the
report skips those with a warning (``--strict`` fails on them). ``load_runs`` refuses them.
A summary written before the run's own estimate was renamed (``modeled_speedup`` in its
datasets) reads as ``self_modeled_speedup``.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from specdec.bench.records import dataset_records
from specdec.bench.report.audit import Audit, audit, checked_summary
from specdec.bench.run_summary import RunSummary
from specdec.errors import BadInput, MissingInput

PROMPT_KEYS = (
    "prompt_ids_hash",
    "prompt_file_sha256",
    "max_new_tokens",
    "chat_template",
    "template",
)
CHECKS = ("model pair", "prompts", "sampling", "machine", "software")
OUTPUT_CHECKS = ("model pair", "prompts", "sampling")  # what decides the output tokens


@dataclass
class Run:
    """One eval run: its directory and its ``summary.json`` (typed: ``RunSummary``)."""

    path: Path
    summary: RunSummary
    audit: Audit | None = None  # what the records hold (read_run); None: not checked
    _records: dict[str, list[dict]] = field(default_factory=dict, repr=False, compare=False)

    def records(self, dataset: str) -> list[dict]:
        """The dataset's records under the audited config hash (else the summary's; read once,
        then cached)."""
        if dataset not in self._records:
            chash = self.audit.record_hash if self.audit else self.summary.config_hash or ""
            self._records[dataset] = dataset_records(self.path, dataset, chash)
        return self._records[dataset]

    @property
    def method(self) -> str:
        return self.summary.method

    @property
    def incomplete(self) -> str | None:
        """Why the summary does not cover the whole run (None: it does)."""
        if self.summary.complete is None:
            return "completeness not recorded (an older summary); rerun its eval command"
        if self.summary.complete:
            return None
        if self.audit is not None and self.audit.unfinished:
            return "stopped before finishing " + ", ".join(self.audit.unfinished)
        left = [
            f"{name} ({p['recorded']} of {p['expected']} prompts recorded)"
            for name, p in (self.summary.progress or {}).items()
            if name not in self.summary.datasets
        ]
        return "stopped before finishing " + (", ".join(left) or "its datasets")


def read_run(file: Path) -> Run:
    """The run of one ``summary.json``, checked against its records; BadInput naming the file
    when it cannot be used (a corrupt record line included)."""
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInput(
            f"{file}: unreadable ({err}); rerun its eval command or leave the folder out"
        ) from err
    if (
        not isinstance(summary, dict)
        or not isinstance(summary.get("datasets"), dict)
        or "method" not in summary
    ):
        raise BadInput(
            f"{file}: not an eval summary (no `method` and `datasets`); rerun its "
            "eval command or leave the folder out"
        )
    claimed = RunSummary.from_json(summary)
    found = audit(file.parent, claimed)
    return Run(file.parent, checked_summary(claimed, found), found)


def read_runs(paths: list[str | Path]) -> tuple[list[Run], list[str]]:
    """Every ``summary.json`` at or below the given folders, and ``"<file>: <why>"`` for each
    one that cannot be used (skipped).

    Raises:
        MissingInput: when a path holds no summary at all.
    """
    runs: list[Run] = []
    unreadable: list[str] = []
    for path in map(Path, paths):
        files = (
            [path / "summary.json"]
            if (path / "summary.json").exists()
            else sorted(p for p in path.rglob("summary.json") if p.parent.name != "summary")
        )
        if not files:
            raise MissingInput(
                f"no summary.json at or below {path}; pass run directories "
                "written by `python -m specdec.eval`"
            )
        for file in files:
            try:
                runs.append(read_run(file))
            except BadInput as err:
                unreadable.append(str(err))
    return runs, unreadable


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Read every ``summary.json`` at or below the given folders.

    Raises:
        MissingInput: when a path holds no summary.
        BadInput: naming the first summary that cannot be used.
    """
    runs, unreadable = read_runs(paths)
    if unreadable:
        raise BadInput(unreadable[0])
    return runs


def _diff(name: str, a, b) -> str | None:
    if a == b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        parts = ", ".join(f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys)
        return f"{name} differs ({parts})"
    return f"{name} differs ({a!r} vs {b!r})"


#: pair fingerprint keys that record a measurement, not what ran (the kernel probe's timings
#: change on every probe; the kernel it chose, ``linear_kernel``, is compared)
MEASURED = frozenset({"linear_kernel_probe"})


def _identity(model: dict | None) -> dict | None:
    return None if model is None else {k: v for k, v in model.items() if k not in MEASURED}


def _target_only(model: dict | None) -> dict | None:
    model = _identity(model)
    return None if model is None else {k: v for k, v in model.items() if "draft" not in k}


def mismatches(
    a: Run, b: Run, dataset: str, *, target_only: bool = False, only: Collection[str] = CHECKS
) -> list[str]:
    """Why runs ``a`` and ``b`` may not be compared on ``dataset`` (empty: comparable).

    Args:
        target_only: compare only the target's part of the model fingerprint (``b`` is a
            baseline that uses no draft).
        only: the checks to make (names in ``CHECKS``; default all).
    """
    ma, mb = a.summary.datasets[dataset], b.summary.datasets[dataset]
    pick = _target_only if target_only else _identity
    checks = [
        ("model pair", pick(a.summary.model), pick(b.summary.model)),
        ("prompts", {k: ma.get(k) for k in PROMPT_KEYS}, {k: mb.get(k) for k in PROMPT_KEYS}),
        (
            "sampling",
            {**(a.summary.sampling or {}), "seed": a.summary.seed},
            {**(b.summary.sampling or {}), "seed": b.summary.seed},
        ),
        ("machine", a.summary.machine, b.summary.machine),
        ("software", a.summary.software, b.summary.software),
    ]
    return [d for name, x, y in checks if name in only and (d := _diff(name, x, y)) is not None]


def doubts(runs: list[Run]) -> list[str]:
    """Per run, each claim of its summary its records contradict (``"<summary.json>: <claim>,
    but ..."``) and each cut-off record line (``"<records file>: ..."``), in run order."""
    out: list[str] = []
    for run in runs:
        if run.audit is not None:
            out += [f"{run.path / 'summary.json'}: {d}" for d in run.audit.disagreements]
            out += list(run.audit.cut_off)
    return list(dict.fromkeys(out))
