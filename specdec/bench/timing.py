"""Timing quality: whether a run's forward times can back a speedup claim.

A modeled speedup prices forwards with a table fitted on the run's own forward log
(``specdec.bench.costfit``); that table is only as good as the times behind it. On a shared machine
a burst of load lands in some forwards and not others: an audit on a 2-core machine at load 6-10
priced a 1-token target forward at 72 ms in one run and 0.15 ms in the next, and read a 5.24x
speedup (3.73x modeled) off an ``sps`` run whose drafts were never accepted. These checks name what
makes a run's timing unreliable (each a reason; no reason: reliable):

1. ``table_reasons``: the fitted table drops with the number of new tokens by more than
   ``MONOTONE_TOLERANCE`` and by more than ``NOISE_SIGMAS`` standard errors of the two means
   (``costfit.monotone_violations``) where the calibration does not reproduce the drop (each of
   its two halves' ratio ``t(n) / t(peak)`` within ``SHAPE_TOLERANCE`` of the table's,
   ``costfit.reproduced_drops``: a drop it does reproduce is the kernel's shape, recorded in the
   fit's ``kernel_shape``), or prices a size at zero or less;
2. ``calibration_reasons``: a size the run made costs, in the run's own forwards, more than
   ``CALIBRATION_RATIO`` times what the short calibration measured before the run, or less than
   its inverse (one of the two saw another machine);
3. ``load_reasons``: the 1-minute load average at the run's start or end exceeds this run's own
   threads by more than ``LOAD_EXCESS`` per core (other processes competed for the cores);
4. ``paired_reasons``: two runs priced together (a method and its ``ar`` baseline) whose
   calibrations differ by more than ``PAIRED_RATIO`` (median over their shared sizes): the
   machine was not the same for both.

A ``TimingCheck`` (``RunSummary.timing``) holds a run's reasons and load readings; its verdict is
derived from them.
What an unreliable run loses is decided by ``strict()``: by default (``SPECDEC_TIMING`` unset or
``strict``) it claims no speedup (the sweep objective is NaN, the leaderboard's speedup cells say
``unreliable``); ``SPECDEC_TIMING=lenient`` keeps the numbers beside the flag.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specdec.bench.costfit import (
    MONOTONE_TOLERANCE,
    NOISE_SIGMAS,
    SHAPE_TOLERANCE,
    unexplained_violations,
)
from specdec.bench.pricing import CostTable

__all__ = ["MONOTONE_TOLERANCE", "NOISE_SIGMAS", "SHAPE_TOLERANCE", "TimingCheck", "strict"]

CALIBRATION_RATIO = 3.0  # run's mean forward / calibration's median, per size the run made
PAIRED_RATIO = 1.5  # one run's calibration / the other's (median over shared sizes)
LOAD_EXCESS = 0.5  # load beyond this run's threads, per core, at start or end
ENV = "SPECDEC_TIMING"  # strict (default) | lenient

#: the 1-, 5- and 15-minute load averages (tests replace it)
load_average: Callable[[], tuple[float, float, float]] = os.getloadavg


def strict() -> bool:
    """Whether an unreliable run's speedups are withheld (``SPECDEC_TIMING``, default strict).

    Raises:
        ValueError: ``SPECDEC_TIMING`` set to anything but ``strict`` or ``lenient``.
    """
    mode = os.environ.get(ENV, "strict").strip().lower() or "strict"
    if mode not in ("strict", "lenient"):
        raise ValueError(
            f"{ENV}={mode!r}: use strict (withhold an unreliable run's speedups) "
            "or lenient (keep them beside the flag)"
        )
    return mode == "strict"


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def read_load() -> list[float]:
    """The 1/5/15-minute load averages now, rounded to 0.01 (``[]`` where the OS has none)."""
    try:
        return [round(x, 2) for x in load_average()]
    except OSError:
        return []


@dataclass
class TimingCheck:
    """A run's timing verdict (``summary.json``: ``timing``).

    Attributes:
        table: reasons against the run's fitted tables (checks 1-2), set by each pricing.
        paired: reasons against pricing it with its ``ar`` baseline (check 4 and the baseline's
            own verdict), set when the run is paired.
        load: load readings ``[when, 1-min, 5-min, 15-min]``, ``when`` ``start`` (before the
            calibration) or ``end``; a resumed run keeps its earlier processes' readings.
        cores: CPU cores the run could use; threads: its torch threads.
    """

    table: list[str] = field(default_factory=list)
    paired: list[str] = field(default_factory=list)
    load: list[list] = field(default_factory=list)
    cores: int = 1
    threads: int = 1

    @property
    def reasons(self) -> list[str]:
        """Every reason the run's timing is unreliable (empty: reliable)."""
        return [*self.table, *load_reasons(self), *self.paired]

    @property
    def reliable(self) -> bool:
        return not self.reasons

    @classmethod
    def begin(cls, threads: int, previous: TimingCheck | None = None) -> TimingCheck:
        """The check of a run (or a resumed run's new process) starting now: its start load read
        after ``previous``'s readings (the same run's earlier processes)."""
        earlier = list(previous.load) if previous is not None else []
        return cls(
            load=[*earlier, ["start", *read_load()]], cores=cores(), threads=max(int(threads), 1)
        )

    def end(self) -> None:
        """Read the load at the run's end."""
        self.load.append(["end", *read_load()])

    def line(self) -> str:
        """``timing: ok`` or ``timing: unreliable (<reasons>)``, for logs and stdout."""
        return "timing: ok" if self.reliable else f"timing: unreliable ({'; '.join(self.reasons)})"

    def to_json(self) -> dict[str, Any]:
        return {
            "reliable": self.reliable,
            "reasons": self.reasons,
            "table": list(self.table),
            "paired": list(self.paired),
            "load": [list(x) for x in self.load],
            "cores": self.cores,
            "threads": self.threads,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimingCheck:
        """A check as ``to_json`` wrote it (``reliable`` and ``reasons`` are derived again)."""
        return cls(
            table=[str(r) for r in data.get("table", [])],
            paired=[str(r) for r in data.get("paired", [])],
            load=[list(x) for x in data.get("load", [])],
            cores=int(data.get("cores", 1)),
            threads=int(data.get("threads", 1)),
        )


def table_reasons(name: str, table: dict, fit: dict) -> list[str]:
    """Reasons against a fitted table (``CostTable.to_dict()``) and its fit report: sizes whose
    time drops beyond the noise and the calibration does not reproduce the drop
    (``fit["monotone_violations"]`` less ``fit["kernel_shape"]``), sizes priced at zero or
    less."""
    out = []
    for role, sizes in unexplained_violations(fit).items():
        if sizes:
            times = table["times"].get(role, {})
            shown = ", ".join(f"n={n} {1e3 * times.get(str(n), math.nan):.3g} ms" for n in sizes)
            out.append(
                f"{name}: {role} forward time drops as tokens grow ({shown}; "
                f"n=1 {1e3 * times.get('1', math.nan):.3g} ms; not reproduced by the "
                "calibration nor by both halves of the run)"
            )
    for role, times in table["times"].items():
        bad = [n for n, t in times.items() if t <= 0]
        if bad:
            out.append(f"{name}: {role} priced at zero or less for n={','.join(bad)}")
    return out


def calibration_reasons(name: str, table: dict, fit: dict, calibration: dict) -> list[str]:
    """Reasons against the sizes the run made (``fit["fitted"]``) whose fitted time is off the
    calibration's by more than ``CALIBRATION_RATIO`` either way."""
    cal, out = CostTable.from_dict(calibration), []
    for role, sizes in (fit.get("fitted") or {}).items():
        if role not in cal.times:
            continue
        for n in sizes:
            ran, measured = table["times"][role][n], cal.base(role, int(n))
            ratio = ran / measured if measured > 0 else math.inf
            if not 1 / CALIBRATION_RATIO <= ratio <= CALIBRATION_RATIO:
                out.append(
                    f"{name}: {role} n={n} took {1e3 * ran:.3g} ms in the run, "
                    f"{1e3 * measured:.3g} ms in the calibration ({ratio:.3g}x; "
                    f"limit {CALIBRATION_RATIO:g}x)"
                )
    return out


def load_reasons(check: TimingCheck) -> list[str]:
    """Reasons against the load readings (see the module docstring)."""
    limit = min(check.threads, check.cores) + LOAD_EXCESS * check.cores
    return [
        f"load average {reading[1]:.2f} at the {reading[0]} on {check.cores} cores (limit "
        f"{limit:g}: this run's {check.threads} threads + {LOAD_EXCESS:g} per core)"
        for reading in check.load
        if len(reading) > 1 and reading[1] > limit
    ]


def paired_reasons(mine: dict | None, theirs: dict | None, base: str) -> list[str]:
    """Reasons against pricing two runs together: their calibrations (``CostTable.to_dict()``)
    differ by more than ``PAIRED_RATIO``, as the median ratio over the sizes both measured."""
    if not mine or not theirs:
        return []
    a, b = CostTable.from_dict(mine), CostTable.from_dict(theirs)
    ratios = [
        a.times[role][n] / b.times[role][n]
        for role in a.times
        if role in b.times
        for n in a.times[role]
        if n in b.times[role] and b.times[role][n] > 0 and a.times[role][n] > 0
    ]
    if not ratios:
        return []
    ratio = statistics.median(ratios)
    if 1 / PAIRED_RATIO <= ratio <= PAIRED_RATIO:
        return []
    return [
        f"this run's calibration is {ratio:.3g}x the `{base}` run's (median over "
        f"{len(ratios)} sizes; limit {PAIRED_RATIO:g}x)"
    ]
