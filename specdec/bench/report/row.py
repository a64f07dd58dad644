"""A leaderboard row: one method run on one dataset (or the mean of its repeats), its speedups
against the baseline run and its greedy equality.

Its own module below both ``specdec.bench.report.rows`` (which builds rows) and
``specdec.bench.report.repeats`` (which merges them), so neither imports the other to name it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specdec.bench.report.greedy import Greedy
from specdec.bench.report.runs import Run


@dataclass
class Row:
    """One leaderboard row: a method run on one dataset, or the mean of its repeats.

    Attributes:
        run: the (first) run.
        metrics: the run's dataset metrics (for repeats: numeric ones averaged).
        greedy: equality of the outputs with the baseline's (temperature 0 only).
        members: the per-run rows a merged row averages (empty for a single run).
        e2e_speedup: the baseline's end-to-end seconds per token (prefill included, ``total_s``)
            / the run's.
        std: sample standard deviation over ``members`` per metric name (and ``speedup``,
            ``modeled_speedup_vs_ar``, ``e2e_speedup``).
        timing: why the row's timing is unreliable (``specdec.bench.timing``): the run's own
            reasons, its baseline's, and those against pricing the two together; empty:
            reliable; None: not checked (an older run, or no cost model).
        withheld: its speedups were withheld for those reasons (strict mode).
    """

    run: Run
    dataset: str
    metrics: dict
    label: str = ""
    speedup: float | None = None
    baseline: Run | None = None
    refused: str | None = None
    modeled_speedup_vs_ar: float | None = None
    e2e_speedup: float | None = None
    greedy: Greedy | None = None
    members: list[Row] = field(default_factory=list)
    std: dict[str, float] = field(default_factory=dict)
    timing: list[str] | None = None
    withheld: bool = False

    @property
    def runs(self) -> list[Run]:
        """The runs behind the row."""
        return [m.run for m in self.members] or [self.run]

    @property
    def unreliable(self) -> list[str]:
        """Why the row's timing (any merged run's) is unreliable; empty: reliable or unchecked."""
        rows = self.members or [self]
        return list(dict.fromkeys(r for m in rows for r in (m.timing or [])))

    @property
    def checked(self) -> bool:
        """Whether any run of the row had its timing checked."""
        return any(m.timing is not None for m in self.members or [self])

    @property
    def claims_withheld(self) -> bool:
        """Whether the row's speedups were withheld (any merged run's)."""
        return any(m.withheld for m in self.members or [self])
