"""Speed per prompt length: each method's records in buckets of prompt tokens (``<512``,
``512-2k``, ``>2k``), prefill split, decode-only and end-to-end speed, end-to-end speedup.

A drafter that catches up on the prompt (the feature drafters read the target's features at every
prompt position) pays for it once per turn, so its end-to-end speed falls with the prompt's length
while its decode speed does not; this table shows where that happens. A record falls in the bucket
of its first turn's prompt length (``prompt_tokens[0]``). Per method (all its rows' datasets
together): prompts, mean prompt tokens, summed ``prefill_target_s`` and ``prefill_draft_s``
(``specdec.bench.run.e2e``), decode tokens/s (new tokens / ``wall_s``), end-to-end tokens/s (new
tokens / ``total_s``) and the end-to-end speedup against the row's baseline run on the same
prompts (its seconds per token over the method's). Rows merging repeats read their first run.
Records from before the prefill split show ``-`` there; a table needs ``prompt_tokens``.
"""

from __future__ import annotations

import math

from specdec.bench.report.row import Row

BUCKETS = ((0, 512, "<512"), (512, 2048, "512-2k"), (2048, math.inf, ">2k"))
HEADER = [
    "context",
    "prompts",
    "prompt tokens",
    "prefill target s",
    "prefill draft s",
    "decode tokens/s",
    "e2e tokens/s",
    "e2e speedup",
]


def bucket_of(tokens: int) -> str:
    """The bucket label of a prompt of ``tokens`` tokens."""
    return next(name for lo, hi, name in BUCKETS if lo <= tokens < hi)


def _sum(records: list[dict], key: str) -> float | None:
    return sum(r[key] for r in records) if all(key in r for r in records) else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def bucket_values(records: list[dict], base: list[dict] | None) -> dict[str, float | None]:
    """One bucket's values (``HEADER`` after ``context``); ``base``: the baseline's records of
    the same prompts (None: no speedup)."""
    new = sum(int(r.get("new_tokens", 0)) for r in records)
    total = _sum(records, "total_s")
    own = _ratio(total, new)
    theirs = (
        _ratio(_sum(base, "total_s"), sum(int(b.get("new_tokens", 0)) for b in base))
        if base
        else None
    )
    return {
        "prompts": len(records),
        "prompt tokens": sum(r["prompt_tokens"][0] for r in records) / len(records),
        "prefill target s": _sum(records, "prefill_target_s"),
        "prefill draft s": _sum(records, "prefill_draft_s"),
        "decode tokens/s": _ratio(new, _sum(records, "wall_s")),
        "e2e tokens/s": _ratio(new, total),
        "e2e speedup": _ratio(theirs, own),
    }


def method_buckets(rows: list[Row]) -> dict[str, dict[str, float | None]]:
    """Per bucket (in ``BUCKETS`` order, empty ones left out) the values of one method's
    ``rows`` (one per dataset)."""
    mine: dict[str, list[dict]] = {}
    theirs: dict[str, list[dict | None]] = {}
    for row in rows:
        base = (
            {r["prompt_id"]: r for r in row.baseline.records(row.dataset)}
            if row.baseline is not None
            else {}
        )
        for rec in row.run.records(row.dataset):
            if not rec.get("prompt_tokens"):
                continue
            name = bucket_of(int(rec["prompt_tokens"][0]))
            mine.setdefault(name, []).append(rec)
            theirs.setdefault(name, []).append(base.get(rec["prompt_id"]))
    out = {}
    for _, _, name in BUCKETS:
        if name in mine:
            base = theirs[name]
            whole = all(b is not None for b in base)  # a speedup only over the same prompts
            out[name] = bucket_values(mine[name], [b for b in base if b] if whole else None)
    return out


def _cell(value: float | None, key: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if key == "prompts":
        return f"{value:.0f}"
    return (
        f"{value:.2f}x"
        if key == "e2e speedup"
        else f"{value:.2f}"
        if key.endswith(" s")
        else f"{value:.1f}"
    )


def per_context_tables(rows: list[Row]) -> list[str]:
    """The ``## Per context length`` section: a table per method label (empty: no record has
    ``prompt_tokens``)."""
    lines: list[str] = []
    for label in sorted({r.label for r in rows}):
        buckets = method_buckets([r for r in rows if r.label == label])
        if not buckets:
            continue
        body = [
            [name, *[_cell(values[k], k) for k in HEADER[1:]]] for name, values in buckets.items()
        ]
        lines += [
            "",
            f"### {label}",
            "",
            "| " + " | ".join(HEADER) + " |",
            "|---|" + "---:|" * (len(HEADER) - 1),
            *["| " + " | ".join(cells) + " |" for cells in body],
        ]
    if not lines:
        return []
    return [
        "",
        "## Per context length (prompt tokens of the first turn; prefill included in e2e)",
        *lines,
    ]
