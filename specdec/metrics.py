"""One accounting for every method (ARCHITECTURE §0.3, vLLM's vocabulary), counted from token ids.

Per step (one target verification forward):

* ``drafted``: drafted nodes in the step's draft (0 for AR).
* ``accepted``: drafted nodes the verifier accepted (the verdict's path length).
* ``emitted``: tokens the step appended to the output *after* truncation at a stop id or at
  ``max_new_tokens`` (accepted + recovered|bonus, cut where the generation ends).

Per generation and in aggregate (``summarize``):

* ``new_tokens`` = Σ emitted (the tokens kept; prefill excluded).
* ``target_forwards`` = number of steps (one verification forward each; prefill excluded; AR too).
* ``block_efficiency`` = new_tokens / target_forwards (includes the recovered/bonus token; equals
  Spec-Bench's mean accepted tokens and vLLM's ``1 + accepted/drafts``; exactly 1 for AR).
* ``acceptance_rate`` = accepted / drafted.
* ``rollback_rate`` = (drafted − accepted) / drafted: drafted-but-discarded share of drafted tokens.
* ``discard_rate`` = (drafted − accepted) / new_tokens: drafted-but-discarded per generated token.
* ``verification_rate`` = target_forwards / new_tokens.
* ``per_position_acceptance[j]`` = steps accepting depth j+1 / steps drafting depth j+1.
* ``draft_forwards``: draft-model forwards; ``draft_share``: draft forward time / decode time.
* ``tokens_per_s`` = new_tokens / decode_s, where ``decode_s`` excludes prefill (``prefill_s``).
* ``modeled_s``: the forward log priced by a calibrated cost table (``specdec.costmodel``), when one
  is given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from specdec.lm import ForwardRecord


@dataclass
class GenerationStats:
    """Counts and timings of one generation (one prompt)."""

    new_tokens: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0
    drafted: int = 0
    accepted: int = 0
    accepted_per_step: list[int] = field(default_factory=list)
    drafted_per_step: list[int] = field(default_factory=list)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    draft_s: float = 0.0
    forwards: list[ForwardRecord] = field(default_factory=list)

    def step(self, drafted: int, accepted: int, emitted: int) -> None:
        """Record one verification step."""
        self.target_forwards += 1
        self.drafted += drafted
        self.accepted += accepted
        self.new_tokens += emitted
        self.drafted_per_step.append(drafted)
        self.accepted_per_step.append(accepted)

    def to_dict(self, *, with_forwards: bool = False) -> dict:
        out = asdict(self)
        out["forwards"] = (
            [asdict(f) for f in self.forwards] if with_forwards else len(self.forwards)
        )
        return out


def _ratio(num: float, den: float) -> float:
    return float(num) / den if den else float("nan")


def summarize(
    stats: Sequence[GenerationStats],
    *,
    cost: Callable[[Sequence[ForwardRecord]], float] | None = None,
) -> dict[str, float | int | list[float]]:
    """Aggregate generations into the metrics defined in the module docstring.

    Args:
        stats: one ``GenerationStats`` per prompt.
        cost: optional cost model mapping a forward log to modelled seconds. ``forwards`` holds
            the decoding-phase forwards only (target prefill excluded), like ``wall_s``.

    Returns:
        A flat dict of metrics (JSON-serialisable).
    """
    new = sum(s.new_tokens for s in stats)
    tf = sum(s.target_forwards for s in stats)
    drafted = sum(s.drafted for s in stats)
    accepted = sum(s.accepted for s in stats)
    decode_s = sum(s.decode_s for s in stats)
    depth = max((d for s in stats for d in s.drafted_per_step), default=0)
    reached = [0] * depth
    passed = [0] * depth
    for s in stats:
        for d, a in zip(s.drafted_per_step, s.accepted_per_step):
            for j in range(d):
                reached[j] += 1
                passed[j] += j < a
    out: dict[str, float | int | list[float]] = {
        "prompts": len(stats),
        "new_tokens": new,
        "target_forwards": tf,
        "draft_forwards": sum(s.draft_forwards for s in stats),
        "drafted": drafted,
        "accepted": accepted,
        "block_efficiency": _ratio(new, tf),
        "acceptance_rate": _ratio(accepted, drafted),
        "rollback_rate": _ratio(drafted - accepted, drafted),
        "discard_rate": _ratio(drafted - accepted, new),
        "verification_rate": _ratio(tf, new),
        "per_position_acceptance": [_ratio(p, r) for p, r in zip(passed, reached)],
        "prefill_s": sum(s.prefill_s for s in stats),
        "wall_s": decode_s,
        "draft_share": _ratio(sum(s.draft_s for s in stats), decode_s),
        "tokens_per_s": _ratio(new, decode_s),
    }
    if cost is not None:
        out["modeled_s"] = sum(cost(s.forwards) for s in stats)
    return out
