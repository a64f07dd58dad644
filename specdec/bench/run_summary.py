"""``RunSummary``: an eval run's ``summary.json`` as one typed object, written by the run side
(``specdec.bench.run.runner``, ``run.summary``, ``run.paired``) and read by the report side
(``specdec.bench.report.runs``).

The file on disk is ``to_json()`` of this object, key for key in the order the fields are
declared: the run's identity (what it ran, on which pair, prompts, sampling, machine and software,
``config_hash``), its completeness (``complete``, ``datasets_done``, ``progress``; see
``specdec.bench.run.summary``), the cost model it ran with, its metrics (``datasets``: per dataset,
``specdec.metrics.summarize`` plus what makes runs comparable and the modeled times;
``overall``) and the resolved ``config``. The keys after ``config`` are written only once they
exist: ``world_size`` (a data-parallel run), the run's own pricing (``calibration``, ``cost_fit``,
``cost_tables``, ``cost_fits``, ``cost_table_monotone``: ``specdec.bench.run.summary.price_run``),
``timing`` (whether those times can back a speedup claim: ``specdec.bench.timing.TimingCheck``)
and ``sweep_objective_source`` (``specdec.bench.run.paired``).

``from_json`` reads any summary the report accepts (``method`` and ``datasets`` present): a key an
older summary lacks reads as None (``complete`` None: completeness not recorded; ``timing``
None: not checked), a key this
version does not know (a failed job's ``error``) is kept in ``extra`` and written back after the
known ones, and a dataset's ``modeled_speedup`` (the run's own estimate before its rename) reads as
``self_modeled_speedup``. ``from_json(d).to_json() == d``, key order included, for every summary
this version writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from specdec.bench.timing import TimingCheck

Metrics = dict[str, Any]  # specdec.metrics.summarize plus a summary's own keys (module docstring)
Progress = dict[str, dict[str, int]]  # dataset -> {"recorded": n, "expected": m}

#: written only once set (None: absent from the file)
LATE = (
    "world_size",
    "calibration",
    "cost_fit",
    "cost_tables",
    "cost_fits",
    "cost_table_monotone",
    "timing",
    "sweep_objective_source",
)


@dataclass
class RunSummary:
    """One eval run's summary (see the module docstring for what each group of keys holds).

    Attributes:
        method: the method preset's name (``method_name``).
        lossless: whether the method's verifier keeps the target distribution.
        model: ``ModelPair.describe()``: the pair's fingerprint.
        learned_weights: digests of the learned weights the method loaded.
        prompt_files: dataset -> its prompt file's sha256.
        sampling: the sampling settings; ``seed`` the run's seed.
        machine, software, provenance: where, with what and from which code it ran.
        config_hash: the records' config hash (``specdec.bench.records.config_hash``).
        complete: every dataset summarised (None: not recorded, an older summary).
        cost_table: the run's calibration or run-wide cost table (None: no cost model).
        datasets: dataset -> its metrics, for the datasets summarised so far.
        overall: the metrics over every summarised dataset, and the paired sweep objective.
        config: the resolved eval config (without ``hydra``).
        timing: the run's timing verdict (None: not checked: ``cost_model=false`` or older).
        extra: keys this version does not know, kept as read.
    """

    method: str
    datasets: dict[str, Metrics]
    lossless: bool | None = None
    model: dict[str, Any] | None = None
    learned_weights: dict[str, Any] | None = None
    prompt_files: dict[str, str] | None = None
    sampling: dict[str, Any] | None = None
    seed: int | None = None
    machine: dict[str, Any] | None = None
    software: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None
    config_hash: str | None = None
    complete: bool | None = None
    datasets_done: list[str] | None = None
    progress: Progress | None = None
    cost_model: bool | None = None
    cost_table: dict[str, Any] | None = None
    overall: Metrics = field(default_factory=dict)
    config: dict[str, Any] | None = None
    world_size: int | None = None
    calibration: dict[str, Any] | None = None
    cost_fit: dict[str, Any] | None = None
    cost_tables: dict[str, dict[str, Any]] | None = None
    cost_fits: dict[str, dict[str, Any]] | None = None
    cost_table_monotone: bool | None = None
    timing: TimingCheck | None = None
    sweep_objective_source: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``summary.json`` object: the known keys in file order (the ``LATE`` ones only when
        set), then ``extra``."""
        out = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "extra" and not (f.name in LATE and getattr(self, f.name) is None)
        }
        if self.timing is not None:
            out["timing"] = self.timing.to_json()
        order = [*ORDER, *LATE]
        return {**{k: out[k] for k in order if k in out}, **self.extra}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        """The summary of a ``summary.json`` object (``method`` and ``datasets`` required).

        Raises:
            KeyError: without ``method`` or ``datasets``.
        """
        known = {f.name for f in fields(cls)} - {"extra"}
        summary = cls(
            **{k: v for k, v in data.items() if k in known},
            extra={k: v for k, v in data.items() if k not in known},
        )
        if isinstance(summary.timing, dict):
            summary.timing = TimingCheck.from_json(summary.timing)
        summary.datasets = {name: _renamed(m) for name, m in summary.datasets.items()}
        summary.overall = _renamed(summary.overall)
        return summary


def _renamed(metrics: Metrics) -> Metrics:
    """``metrics`` with ``modeled_speedup`` (the run's own estimate before its rename) read as
    ``self_modeled_speedup`` (a copy; unchanged when there is nothing to rename)."""
    if not isinstance(metrics, dict) or "modeled_speedup" not in metrics:
        return metrics
    out = {k: v for k, v in metrics.items() if k != "modeled_speedup"}
    out.setdefault("self_modeled_speedup", metrics["modeled_speedup"])
    return out


#: the keys every summary of this version holds, in file order (then ``LATE``)
ORDER = (
    "method",
    "lossless",
    "model",
    "learned_weights",
    "prompt_files",
    "sampling",
    "seed",
    "machine",
    "software",
    "provenance",
    "config_hash",
    "complete",
    "datasets_done",
    "progress",
    "cost_model",
    "cost_table",
    "datasets",
    "overall",
    "config",
)
