"""Eval runs as the report reads them: a run folder's ``summary.json``, and when two runs compare.

Two runs compare on a dataset (``mismatches`` is empty) when they share the model pair, the prompts
(ids, the prompt file's digest, generation length, formatting), the sampling (settings and seed),
the machine and the software versions. The baseline (``ar``) decodes without a draft, so against
it only the target's part of the pair fingerprint must match (keys of ``ModelPair.describe()``
that name the draft are ignored): one ``ar`` run serves every draft model of the same target.
Greedy equality (``specdec.bench.greedy``) needs only the pair, prompts and sampling to agree
(``mismatches(..., only=OUTPUT_CHECKS)``): outputs do not depend on the machine's speed.

``Run.records`` reads a dataset's per-prompt records (those of the summary's config hash), for
the per-category table and greedy equality.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from specdec.bench.records import dataset_records

PROMPT_KEYS = ("prompt_ids_hash", "prompt_file_sha256", "max_new_tokens", "chat_template",
               "template")
CHECKS = ("model pair", "prompts", "sampling", "machine", "software")
OUTPUT_CHECKS = ("model pair", "prompts", "sampling")  # what decides the output tokens


@dataclass
class Run:
    """One eval run: its directory and ``summary.json``."""

    path: Path
    summary: dict
    _records: dict[str, list[dict]] = field(default_factory=dict, repr=False, compare=False)

    def records(self, dataset: str) -> list[dict]:
        """The dataset's records under the summary's config hash (read once, then cached)."""
        if dataset not in self._records:
            self._records[dataset] = dataset_records(self.path, dataset,
                                                     self.summary.get("config_hash", ""))
        return self._records[dataset]

    @property
    def method(self) -> str:
        return self.summary["method"]

    @property
    def incomplete(self) -> str | None:
        """Why the summary does not cover the whole run (None: it does)."""
        if "complete" not in self.summary:
            return "completeness not recorded (an older summary); rerun its eval command"
        if self.summary["complete"]:
            return None
        left = [f"{name} ({p['recorded']} of {p['expected']} prompts recorded)"
                for name, p in (self.summary.get("progress") or {}).items()
                if name not in self.summary["datasets"]]
        return "stopped before finishing " + (", ".join(left) or "its datasets")


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Read every ``summary.json`` at or below the given folders.

    Raises:
        ValueError: when a path holds no summary.
    """
    runs: list[Run] = []
    for path in map(Path, paths):
        files = [path / "summary.json"] if (path / "summary.json").exists() else sorted(
            p for p in path.rglob("summary.json") if p.parent.name != "summary")
        if not files:
            raise ValueError(f"no summary.json at or below {path}; pass run directories written "
                             "by `python -m specdec.eval`")
        runs += [Run(f.parent, json.loads(f.read_text())) for f in files]
    return runs


def _diff(name: str, a, b) -> str | None:
    if a == b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        parts = ", ".join(f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys)
        return f"{name} differs ({parts})"
    return f"{name} differs ({a!r} vs {b!r})"


def _target_only(model: dict | None) -> dict | None:
    return None if model is None else {k: v for k, v in model.items() if "draft" not in k}


def mismatches(a: Run, b: Run, dataset: str, *, target_only: bool = False,
               only: Collection[str] = CHECKS) -> list[str]:
    """Why runs ``a`` and ``b`` may not be compared on ``dataset`` (empty: comparable).

    Args:
        target_only: compare only the target's part of the model fingerprint (``b`` is a
            baseline that uses no draft).
        only: the checks to make (names in ``CHECKS``; default all).
    """
    ma, mb = a.summary["datasets"][dataset], b.summary["datasets"][dataset]
    pick = _target_only if target_only else (lambda m: m)
    checks = [
        ("model pair", pick(a.summary.get("model")), pick(b.summary.get("model"))),
        ("prompts", {k: ma.get(k) for k in PROMPT_KEYS}, {k: mb.get(k) for k in PROMPT_KEYS}),
        ("sampling", {**a.summary.get("sampling", {}), "seed": a.summary.get("seed")},
         {**b.summary.get("sampling", {}), "seed": b.summary.get("seed")}),
        ("machine", a.summary.get("machine"), b.summary.get("machine")),
        ("software", a.summary.get("software"), b.summary.get("software")),
    ]
    return [d for name, x, y in checks
            if name in only and (d := _diff(name, x, y)) is not None]

