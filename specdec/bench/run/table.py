"""The plain-text table ``python -m specdec.eval`` prints per run: one row per dataset."""

from __future__ import annotations

TABLE_COLUMNS = [
    ("new_tokens", "new tokens", "{:d}"),
    ("target_forwards", "target fwd", "{:d}"),
    ("block_efficiency", "τ", "{:.3f}"),
    ("acceptance_rate", "accept rate", "{:.3f}"),
    ("hit_rate", "hit rate", "{:.3f}"),  # methods that draft ahead (specdec.metrics)
    ("branches_per_step", "branches/step", "{:.2f}"),  # SpecBranch
    ("tokens_per_s", "tokens/s", "{:.1f}"),
    ("wall_s", "wall s", "{:.2f}"),
]


def format_table(method: str, per_dataset: dict[str, dict]) -> str:
    """A plain-text table of the headline metrics, one row per dataset."""
    columns = [c for c in TABLE_COLUMNS if any(c[0] in m for m in per_dataset.values())]
    if any("modeled_s" in m for m in per_dataset.values()):
        columns.append(("modeled_s", "modeled s", "{:.2f}"))
    header = ["method", "dataset", *[c[1] for c in columns]]
    rows = [header]
    for name, metrics in per_dataset.items():
        cells = [method, name]
        for key, _, fmt in columns:
            value = metrics.get(key)
            cells.append("-" if value is None or value != value else fmt.format(value))
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
