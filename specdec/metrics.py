"""One accounting for every method (vLLM's vocabulary), counted from token ids.

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
* ``counters``: a method's own counts (``Drafter.counters``), summed over generations.

Methods that draft ahead of verification (``specdec.drafters.ahead``: PEARL, and any drafter
using the counter names below) draft tokens the engine never sees in a draft (a rolled-back
block). Their counters ``draft_tokens`` (every token the draft made) and ``rolled_back`` (those
discarded) replace the engine's counts in ``rollback_rate = rolled_back / draft_tokens``, and
``hits`` / ``misses`` (steps whose background work was used / dropped: PEARL's block,
SpecBranch's subtree, SSD's cached chain for the verdict's outcome) give ``hit_rate = hits /
(hits + misses)`` (for SSD the cache hit rate); both are absent for methods without these
counters. ``branches`` (leaves of every proposed tree, SpecBranch) gives ``branches_per_step =
branches / decoding steps``.

Modeled time (a forward log priced by a calibrated cost table) is the harness's business:
``specdec.bench.pricing``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from specdec.forwards import ForwardRecord

# counter names with a meaning in the summary (see the module docstring)
DRAFT_TOKENS, ROLLED_BACK, HITS, MISSES = "draft_tokens", "rolled_back", "hits", "misses"
BRANCHES = "branches"


@dataclass
class GenerationStats:
    """Counts and timings of one generation (one prompt); its fields are the record schema.

    ``forwards`` (the raw forward log) stays in memory; ``to_record`` writes every other field
    and ``from_record`` reads them back, so records and stats can never disagree on a name.
    ``counters`` holds a method's own counts (``Drafter.counters``: cache hits, branches, ...).
    """

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
    counters: dict[str, int] = field(default_factory=dict)
    forwards: list[ForwardRecord] = field(default_factory=list)

    def step(self, drafted: int, accepted: int, emitted: int) -> None:
        """Record one verification step."""
        self.target_forwards += 1
        self.drafted += drafted
        self.accepted += accepted
        self.new_tokens += emitted
        self.drafted_per_step.append(drafted)
        self.accepted_per_step.append(accepted)

    def merge(self, other: GenerationStats) -> None:
        """Add ``other`` (e.g. the next turn of a multi-turn prompt): numbers add, lists extend,
        counters add key by key."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, dict):
                for key, value in theirs.items():
                    mine[key] = mine.get(key, 0) + value
            else:
                setattr(self, f.name, mine + theirs)

    def to_record(self) -> dict:
        """Every field but the forward log, JSON-ready (the stats part of an eval record)."""
        return {
            f.name: copy.copy(getattr(self, f.name)) for f in fields(self) if f.name != "forwards"
        }

    @classmethod
    def from_record(cls, record: dict) -> GenerationStats:
        """The stats an eval record was written from (without the forward log)."""
        return cls(
            **{
                f.name: copy.copy(record[f.name])
                for f in fields(cls)
                if f.name in record and f.name != "forwards"
            }
        )


def _ratio(num: float, den: float) -> float:
    return float(num) / den if den else float("nan")


def summarize(stats: Sequence[GenerationStats]) -> dict:
    """Aggregate generations into the metrics defined in the module docstring.

    Args:
        stats: one ``GenerationStats`` per prompt.

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
    out: dict = {
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
    counters: dict[str, int] = {}
    for s in stats:
        for key, value in s.counters.items():
            counters[key] = counters.get(key, 0) + value
    if counters:
        out["counters"] = dict(sorted(counters.items()))
    if DRAFT_TOKENS in counters and ROLLED_BACK in counters:  # speculative blocks included
        out["rollback_rate"] = _ratio(counters[ROLLED_BACK], counters[DRAFT_TOKENS])
    if HITS in counters or MISSES in counters:
        hits, misses = counters.get(HITS, 0), counters.get(MISSES, 0)
        out["hit_rate"] = _ratio(hits, hits + misses)
    if BRANCHES in counters:
        steps = sum(len(s.drafted_per_step) for s in stats)
        out["branches_per_step"] = _ratio(counters[BRANCHES], steps)
    return out
