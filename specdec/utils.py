"""Small helpers for the entry points: OmegaConf resolvers and the printed summary table."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]

TABLE_COLUMNS = [
    ("new_tokens", "new tokens", "{:d}"),
    ("target_forwards", "target fwd", "{:d}"),
    ("block_efficiency", "block eff.", "{:.3f}"),
    ("acceptance_rate", "accept rate", "{:.3f}"),
    ("tokens_per_s", "tokens/s", "{:.1f}"),
    ("wall_s", "wall s", "{:.2f}"),
]


def register_resolvers() -> None:
    """Register ``${specdec_root:}`` (the repository root; the package is installed editable) and
    ``${specdec_choice:<group>}`` (the option chosen for a config group, e.g. the model pair)."""
    if not OmegaConf.has_resolver("specdec_root"):
        OmegaConf.register_new_resolver("specdec_root", lambda: str(ROOT))
    if not OmegaConf.has_resolver("specdec_choice"):
        OmegaConf.register_new_resolver("specdec_choice", _choice)


def _choice(group: str, *, _root_) -> str:
    # Under @hydra.main the choices live in HydraConfig; a compose(return_hydra_config=True)
    # config carries them in its own `hydra` node.
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return str(HydraConfig.get().runtime.choices[group])
    choices = OmegaConf.select(_root_, "hydra.runtime.choices")
    if choices is None or group not in choices:
        raise ValueError(f"no choice recorded for config group {group!r}; compose the config "
                         "through Hydra (return_hydra_config=True) or set the value explicitly")
    return str(choices[group])


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
