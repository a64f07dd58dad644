"""Pricing forwards with a calibrated cost table: a whole log, or its compact profile.

The modeled clock of every run. ``specdec.bench.run.calibration.calibrate`` measures a
``CostTable`` on this
machine; this module (no torch, so the report can use it anywhere) turns forwards into seconds:

    t(role, n, ctx) = T_role(n) + s_role * (ctx - c_ref)

with ``T(n)`` interpolated linearly between measured sizes (extrapolated from the last two) and
``s`` the per-context-token slope. ``CostTable(forwards)`` (``modeled_s``) prices a run's log step
by step: serial draft work plus the max of the target's lane and each background lane
(``specdec.forwards``); for a method without background lanes that is the sum of its forwards.

A forward *profile* is what a record keeps of its forward log: per role and number of new tokens
``n``, the count of forwards and the sum of their contexts, ``{role: {"n": [count, ctx_sum]}}``.
Because ``t`` is linear in ``ctx``, ``CostTable.price(profile)`` equals pricing the log itself
(as long as no single forward would be priced below zero, where ``cost`` clips) for methods
without background lanes; a profile prices overlapped work serially, so the report takes an
overlapping method's own ``modeled_s``. Profiles let the
report price a baseline run with a method run's table: both sides of a speedup measured by one
calibration, so a slow phase of a shared machine during either run cancels out
(``modeled_speedup_vs_ar``).

``ar_profile`` is the profile AR decoding would have for given token counts: one 1-token target
forward per new token, the i-th (from 0) of a turn at context ``T - 1 + i`` after a ``T``-token
prompt (``engine.generate`` prefills all prompt tokens but the last and keeps every committed token
but the root cached). A run prices it with its own table to get ``ar_modeled_s`` and its
self-contained ``self_modeled_speedup = ar_modeled_s / modeled_s`` (``specdec.bench.run.summary``):
what AR would cost for the same tokens at the same contexts, over what the method cost. At
temperature 0 a lossless method emits AR's tokens, so this equals pricing a real ``ar`` run's
profile with the same table.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specdec.forwards import MAIN

if TYPE_CHECKING:
    from specdec.forwards import ForwardRecord

Profile = dict[str, dict[str, list[int]]]  # {role: {str(n): [count, sum of contexts]}}


def forward_profile(forwards: Iterable[ForwardRecord]) -> Profile:
    """Count forwards and sum their contexts per (role, new tokens)."""
    out: Profile = {}
    for f in forwards:
        cell = out.setdefault(f.role, {}).setdefault(str(int(f.new_tokens)), [0, 0])
        cell[0] += 1
        cell[1] += int(f.context)
    return out


def merge_profiles(profiles: Iterable[Profile]) -> Profile:
    """The profile of the concatenated logs."""
    out: Profile = {}
    for profile in profiles:
        for role, sizes in profile.items():
            for n, (count, ctx_sum) in sizes.items():
                cell = out.setdefault(role, {}).setdefault(n, [0, 0])
                cell[0] += count
                cell[1] += ctx_sum
    return out


def ar_profile(prompt_tokens: Sequence[int], new_tokens: Sequence[int]) -> Profile:
    """The profile of AR emitting ``new_tokens[t]`` tokens after a ``prompt_tokens[t]``-token
    prompt, for each turn ``t`` (see the module docstring)."""
    if len(prompt_tokens) != len(new_tokens):
        raise ValueError(
            f"{len(prompt_tokens)} prompt lengths for {len(new_tokens)} turns; "
            "give one prompt length per turn"
        )
    count = ctx_sum = 0
    for prompt, n in zip(prompt_tokens, new_tokens):
        count += n
        ctx_sum += n * (prompt - 1) + n * (n - 1) // 2  # contexts T-1, T, ..., T-2+n
    return {"target": {"1": [count, ctx_sum]}} if count else {}


@dataclass
class CostTable:
    """Median forward seconds per role and number of new tokens, plus a context slope.

    Attributes:
        times: ``{role: {n: seconds}}`` measured at context ``ref_context``.
        slopes: ``{role: seconds per extra context token}`` (1-token forwards).
        ref_context: the context length the ``times`` were measured at.
        halves: ``{role: [first, second]}``, a calibration's sizes measured twice: the medians of
            the first and of the second half of its rounds (``{n: seconds}`` each), two
            measurements taken one after the other, against which a drop in a fitted table is
            checked (``specdec.bench.costfit.reproduced_drops``); empty for a fitted table.
    """

    times: dict[str, dict[int, float]]
    slopes: dict[str, float] = field(default_factory=dict)
    ref_context: int = 0
    halves: dict[str, list[dict[int, float]]] = field(default_factory=dict)

    def base(self, role: str, new_tokens: int) -> float:
        """``T_role(n)``: seconds of an ``n``-token forward at the reference context."""
        if role not in self.times:
            raise ValueError(f"no calibration for role {role!r}; calibrated: {sorted(self.times)}")
        table = self.times[role]
        sizes = sorted(table)
        n = max(1, int(new_tokens))
        i = bisect.bisect_left(sizes, n)
        if i < len(sizes) and sizes[i] == n:
            return table[n]
        if len(sizes) == 1:
            return table[sizes[0]] * n / sizes[0]
        # interpolate between neighbours (or extrapolate from the two nearest ends)
        lo, hi = (
            (sizes[i - 1], sizes[i])
            if 0 < i < len(sizes)
            else ((sizes[0], sizes[1]) if i == 0 else (sizes[-2], sizes[-1]))
        )
        return table[lo] + (n - lo) / (hi - lo) * (table[hi] - table[lo])

    def cost(self, role: str, new_tokens: int, context: int) -> float:
        """Modelled seconds of one forward."""
        extra = self.slopes.get(role, 0.0) * (context - self.ref_context)
        return max(self.base(role, new_tokens) + extra, 0.0)

    def __call__(self, forwards: Sequence[ForwardRecord]) -> float:
        """Modeled seconds of a forward log, each decoding step priced with its overlap (§0.2).

        Per step (``ForwardRecord.step``): ``serial + max(target, each background lane)``, where
        ``serial`` is the main lane's draft work, ``target`` the main lane's target forwards and
        a background lane's price the sum of its forwards. Without background lanes this is the
        plain sum of every forward's price; unstamped records (step -1) add up serially.
        """
        serial = 0.0
        overlap: dict[int, dict[str, float]] = {}  # step -> {"target" | lane: seconds}
        for f in forwards:
            price = self.cost(f.role, f.new_tokens, f.context)
            if f.step < 0 or (f.lane == MAIN and f.role != "target"):
                serial += price
            else:
                key = "target" if f.lane == MAIN else f.lane
                lanes = overlap.setdefault(f.step, {})
                lanes[key] = lanes.get(key, 0.0) + price
        return serial + sum(max(lanes.values()) for lanes in overlap.values())

    def price(self, profile: Profile) -> float:
        """Modelled seconds of the forwards a profile describes (serial)."""
        total = 0.0
        for role, sizes in profile.items():
            slope = self.slopes.get(role, 0.0)
            for n, (count, ctx_sum) in sizes.items():
                total += count * self.base(role, int(n)) + slope * (
                    ctx_sum - count * self.ref_context
                )
        return total

    def to_dict(self) -> dict:
        """JSON form (``summary.json``: ``cost_table``, ``calibration``; ``halves`` only when
        measured); ``from_dict`` reads it back."""
        out = {
            "times": {role: _str_keys(tab) for role, tab in self.times.items()},
            "slopes": dict(self.slopes),
            "ref_context": self.ref_context,
        }
        if self.halves:
            out["halves"] = {role: [_str_keys(h) for h in hs] for role, hs in self.halves.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict) -> CostTable:
        return cls(
            times={role: _int_keys(tab) for role, tab in data["times"].items()},
            slopes={k: float(v) for k, v in data.get("slopes", {}).items()},
            ref_context=int(data.get("ref_context", 0)),
            halves={
                role: [_int_keys(h) for h in hs] for role, hs in data.get("halves", {}).items()
            },
        )

    def describe(self) -> str:
        """One line for logs: per role, ms per forward by new tokens to 3 significant digits
        (``target: n=1 4.12, n=2 4.3; draft: ...``)."""
        return "; ".join(
            f"{role}: " + ", ".join(f"n={n} {1000 * t:.3g}" for n, t in sorted(tab.items()))
            for role, tab in self.times.items()
        )


def _str_keys(table: dict[int, float]) -> dict[str, float]:
    """A size table in JSON form: sizes as strings, in increasing order."""
    return {str(n): t for n, t in sorted(table.items())}


def _int_keys(table: dict[str, float]) -> dict[int, float]:
    """``_str_keys`` read back."""
    return {int(n): float(t) for n, t in table.items()}
