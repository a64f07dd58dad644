"""``python -m specdec.report RUN_DIRS...``: merge eval runs into a Markdown leaderboard and plots.

Each run directory holds a ``summary.json`` written by ``specdec.eval`` (a folder given here is
searched recursively). The leaderboard has one row per (method run, dataset) with tokens/s, speedup,
block efficiency, acceptance, rollback, discard and verification rates (definitions in
``specdec.metrics``), ``modeled_s / wall_s`` when a cost model ran, and task quality when measured.

Speedup = ``wall_s`` of the baseline run (``ar``) / ``wall_s`` of the method run, on one dataset
(ARCHITECTURE §0.3). It is computed only when both runs share the model pair, the prompts (ids,
the prompt file's digest, generation length, formatting), the sampling (settings and seed), the
machine and the software versions; otherwise the cell says ``refused`` and the report lists why.
The baseline decodes without a draft, so against it only the target's part of the pair fingerprint
must match (keys of ``ModelPair.describe()`` that name the draft are ignored): one ``ar`` run
serves every draft model of the same target.

A run whose ``summary.json`` is not ``complete`` (stopped before its last dataset) shows ``no`` in
the ``complete`` column and is listed with what it left unfinished; ``--strict`` exits with status
2 for it too. Undefined metrics (``null`` in the JSON, e.g. AR's acceptance rate) show as ``-``.

Modeled speedup (when the method run calibrated a cost table and both runs' records carry forward
profiles, ``specdec.bench.pricing``): the baseline's forwards / the method's forwards, both priced
by the method run's table. Wall-clock speedups on a shared machine move with its load (±0.2 on the
project's 2-core VM); the modeled one depends only on token counts and one calibration.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from specdec.bench.pricing import CostTable

COLUMNS = [  # (metric key, header, format)
    ("tokens_per_s", "tokens/s", "{:.1f}"),
    ("speedup", "speedup", "{:.2f}x"),
    ("block_efficiency", "τ", "{:.2f}"),
    ("acceptance_rate", "accept", "{:.3f}"),
    ("rollback_rate", "rollback", "{:.3f}"),
    ("discard_rate", "discard", "{:.3f}"),
    ("verification_rate", "verif.", "{:.3f}"),
]
PROMPT_KEYS = ("prompt_ids_hash", "prompt_file_sha256", "max_new_tokens", "chat_template",
               "template")


@dataclass
class Run:
    """One eval run: its directory and ``summary.json``."""

    path: Path
    summary: dict

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


@dataclass
class Row:
    """One leaderboard row (a method run on one dataset)."""

    run: Run
    dataset: str
    metrics: dict
    label: str = ""
    speedup: float | None = None
    baseline: Run | None = None
    refused: str | None = None
    modeled_speedup: float | None = None


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


def mismatches(a: Run, b: Run, dataset: str, *, target_only: bool = False) -> list[str]:
    """Why runs ``a`` and ``b`` may not be compared on ``dataset`` (empty: comparable).

    Args:
        target_only: compare only the target's part of the model fingerprint (``b`` is a
            baseline that uses no draft).
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
    return [d for name, x, y in checks if (d := _diff(name, x, y)) is not None]


def modeled_speedup(run: Run, base: Run, dataset: str) -> float | None:
    """Baseline forwards / method forwards, both priced by ``run``'s own calibrated cost table.

    One calibration prices both sides, so machine-speed drift between the two runs cancels; None
    when ``run`` has no cost table or either side's records lack forward profiles.
    """
    table = run.summary.get("cost_table")
    mine = run.summary["datasets"][dataset].get("forward_profile")
    theirs = base.summary["datasets"][dataset].get("forward_profile")
    if not table or mine is None or theirs is None:
        return None
    cost = CostTable.from_dict(table)
    # the method's own modeled_s prices its overlap per step (a profile would price it serially)
    own = run.summary["datasets"][dataset].get("modeled_s", cost.price(mine))
    return cost.price(theirs) / own if own else math.nan


def build_rows(runs: list[Run], *, baseline: str = "ar") -> list[Row]:
    """Leaderboard rows with speedups against a comparable baseline run, or a refusal reason."""
    rows = []
    folders: dict[str, set[Path]] = {}
    for run in runs:
        folders.setdefault(run.method, set()).add(run.path)
    for run in runs:
        label = run.method if len(folders[run.method]) == 1 else f"{run.method} ({run.path.name})"
        for dataset, metrics in run.summary["datasets"].items():
            row = Row(run, dataset, metrics, label)
            candidates = [b for b in runs if b.method == baseline and dataset in
                          b.summary["datasets"]]
            reasons = {b.path: mismatches(run, b, dataset, target_only=True) for b in candidates}
            match = next((b for b in candidates if not reasons[b.path]), None)
            if match is not None:
                row.baseline = match
                base_s, s = match.summary["datasets"][dataset]["wall_s"], metrics["wall_s"]
                row.speedup = base_s / s if s else math.nan
                row.modeled_speedup = modeled_speedup(run, match, dataset)
            elif not candidates:
                row.refused = f"no `{baseline}` run of dataset {dataset} among the inputs"
            else:
                b = candidates[0]
                row.refused = (f"speedup vs `{baseline}` run {b.path} refused: "
                               + "; ".join(reasons[b.path]))
            rows.append(row)
    rows.sort(key=lambda r: (r.dataset, -_num(r.speedup), r.label))
    return rows


def _num(x: float | None) -> float:
    return -1.0 if x is None or math.isnan(x) else x


def _fmt(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


def to_markdown(rows: list[Row]) -> str:
    """The leaderboard, a speedup pivot (method × dataset) and the list of refused comparisons."""
    quality = sorted({k for r in rows for k in r.metrics if k.startswith("quality_")})
    modeled = any("modeled_s" in r.metrics for r in rows)
    priced = any(r.modeled_speedup is not None for r in rows)
    header = ["method", "dataset", "lossless", "prompts", "complete", *[c[1] for c in COLUMNS]]
    header += (["modeled speedup"] if priced else []) + (["modeled/wall"] if modeled else [])
    header += [q.removeprefix("quality_") for q in quality]
    lines = ["## Leaderboard", "", "| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
    for r in rows:
        values = {**r.metrics, "speedup": r.speedup}
        cells = [r.label, r.dataset, "yes" if r.run.summary.get("lossless") else "no",
                 str(r.metrics.get("prompts", "-")), "no" if r.run.incomplete else "yes"]
        for key, _, fmt in COLUMNS:
            cells.append("refused" if key == "speedup" and r.refused and r.speedup is None
                         else _fmt(values.get(key), fmt))
        if priced:
            cells.append(_fmt(r.modeled_speedup, "{:.2f}x"))
        if modeled:
            m, w = r.metrics.get("modeled_s"), r.metrics.get("wall_s")
            cells.append(_fmt(m / w if m is not None and w else None, "{:.2f}"))
        cells += [_fmt(r.metrics.get(q), "{:.3f}") for q in quality]
        lines.append("| " + " | ".join(cells) + " |")
    datasets = sorted({r.dataset for r in rows})
    methods = sorted({r.label for r in rows})
    lines += ["", "## Speedup vs `ar` (method × dataset)", "",
              "| method | " + " | ".join(datasets) + " |",
              "|---|" + "---:|" * len(datasets)]
    for m in methods:
        cells = []
        for d in datasets:
            found = [r for r in rows if r.label == m and r.dataset == d]
            cells.append(", ".join(_fmt(r.speedup, "{:.2f}x") if not r.refused else "refused"
                                   for r in found) or "")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    counted = [r for r in rows if r.metrics.get("counters")]
    if counted:
        lines += ["", "## Method counters (summed over prompts)", ""]
        lines += [f"- {r.label} on {r.dataset}: " + ", ".join(
            f"{k}={v}" for k, v in r.metrics["counters"].items()) for r in counted]
    incomplete = {r.run.path: r.run.incomplete for r in rows if r.run.incomplete}
    if incomplete:
        lines += ["", "## Incomplete runs (rows show the datasets they finished)", ""]
        lines += [f"- {path}: {why}" for path, why in incomplete.items()]
    refused = [r for r in rows if r.refused]
    if refused:
        lines += ["", "## Refused comparisons", ""]
        lines += [f"- {r.label} on {r.dataset} ({r.run.path}): {r.refused}" for r in refused]
    lines += ["", "Speedup = baseline wall_s / method wall_s (decoding only, prefill excluded, "
              "warm-up excluded); τ = mean accepted length = new tokens / target forwards "
              "(block efficiency: accepted + the recovered or bonus token per verification)."]
    if priced:
        lines += ["Modeled speedup = the baseline's forwards / the method's forwards, both priced "
                  "by the method run's calibrated cost table (one calibration, so machine-speed "
                  "drift between the runs cancels); modeled/wall checks that table against the "
                  "run's own clock."]
    return "\n".join(lines) + "\n"


def report(paths: list[str | Path], out_dir: str | Path, *, baseline: str = "ar",
           plots: bool = True) -> tuple[str, list[Row]]:
    """Write ``leaderboard.md`` (and PNG plots) into ``out_dir``; returns the Markdown and rows."""
    rows = build_rows(load_runs(paths), baseline=baseline)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = to_markdown(rows)
    (out_dir / "leaderboard.md").write_text(text)
    if plots:
        from specdec.bench.plots import plot_all

        plot_all(rows, out_dir)
    return text, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specdec.report", description=__doc__)
    parser.add_argument("runs", nargs="+", help="run directories (or folders holding them)")
    parser.add_argument("--out", default="outputs/report",
                        help="output folder (default outputs/report)")
    parser.add_argument("--baseline", default="ar", help="method name of the baseline run")
    parser.add_argument("--no-plots", action="store_true", help="write the Markdown only")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 2 when any speedup was refused or any run is "
                             "incomplete")
    args = parser.parse_args(argv)
    try:
        text, rows = report(args.runs, args.out, baseline=args.baseline,
                            plots=not args.no_plots)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(text)
    for r in rows:
        if r.refused:
            print(f"refused: {r.label} on {r.dataset}: {r.refused}", file=sys.stderr)
    incomplete = {r.run.path: r.run.incomplete for r in rows if r.run.incomplete}
    for path, why in incomplete.items():
        print(f"incomplete: {path}: {why}", file=sys.stderr)
    print(f"wrote {Path(args.out) / 'leaderboard.md'}", file=sys.stderr)
    return 2 if args.strict and (incomplete or any(r.refused for r in rows)) else 0


if __name__ == "__main__":
    sys.exit(main())
