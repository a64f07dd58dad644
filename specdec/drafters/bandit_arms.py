"""The arms of SpecBlock's bandit (``drafters.specblock_bandit``): each arm's tree shape from the
config (``TreeShape`` overrides of the drafter's own tree, or ``None``: skip), and per-arm rates
read back from a generation's summed counters (``bandit_<arm>_pulls``, ``_tokens``, ``_us``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace

from specdec.drafters.specblock import TreeShape
from specdec.errors import BadInput

DEFAULT_ARMS: dict[str, dict | None] = {
    "skip": None,
    "head": {"widths": [1, 1, 1, 0], "root_width": 1, "total_tokens": 4, "max_blocks": 1},
    "full": {},
}


def arm_shape(full: TreeShape, name: str, spec: Mapping | None) -> TreeShape | None:
    """The tree shape of arm ``name``: ``full`` with ``spec``'s settings (``None``: skip)."""
    if spec is None:
        return None
    allowed = sorted(f.name for f in fields(TreeShape))
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise BadInput(
            f"drafter.arms.{name} sets {unknown}, which are not tree settings; use "
            f"{allowed}, or null for the skip arm"
        )
    spec = {k: tuple(int(w) for w in v) if k == "widths" else v for k, v in spec.items()}
    return replace(full, **spec)


def arm_rates(counters: Mapping[str, int]) -> dict[str, dict[str, float]]:
    """Per arm from (summed) counters: ``share`` of the pulls and modeled ``tokens_per_s``."""
    names = [
        k[len("bandit_") : -len("_pulls")]
        for k in counters
        if k.startswith("bandit_") and k.endswith("_pulls")
    ]
    total = sum(counters[f"bandit_{n}_pulls"] for n in names)
    out = {}
    for name in names:
        pulls, tokens, us = (counters[f"bandit_{name}_{k}"] for k in ("pulls", "tokens", "us"))
        out[name] = {
            "share": pulls / total if total else 0.0,
            "tokens_per_s": 1e6 * tokens / us if us else 0.0,
        }
    return out
