"""Experiment loggers of the eval stage: the ``eval`` node of the shared ``logger`` group.

``conf/logger/<name>.yaml`` holds one ``_target_`` per entry point: ``eval`` (a class below, for
``python -m specdec.eval``) and ``train`` (a Lightning logger, or null, for ``python -m
specdec.train``), plus ``report`` (what a sweep's leaderboard is logged with, or null;
``specdec.bench.run.leaderboard``). The runner instantiates ``logger.eval``, hands it the resolved
run config and the run's ``RunTag`` (``log_config``), then each dataset's metrics and records, the
summary files once the run is summarised (``log_summary``), and always calls ``finish``.

* ``EvalLogger`` (``logger=none``): nothing beyond the run directory's records and ``summary.json``.
* ``CSVLogger`` (``logger=csv``): ``metrics.csv`` in the run directory, one ``dataset,metric,value``
  row per scalar.
* ``WandbLogger`` (``logger=wandb``): Weights & Biases, offline unless ``WANDB_MODE`` says
  otherwise (``logger.mode``). The run is named, grouped and typed from the ``RunTag``
  (``specdec.bench.wandb_artifacts``: group ``<pair>/<benchmark>``, job type the method) unless
  the config sets ``name`` / ``group`` / ``job_type``; it gets the resolved config, the metrics as
  ``eval/<dataset>/<metric>`` (per-position acceptance as ``eval/<dataset>/acceptance_pos<j>``;
  ``eval/overall/sweep_objective`` is the sweep metric, ``eval/overall/modeled_speedup_vs_ar`` the
  leaderboard's paired number and ``eval/<dataset>/self_modeled_speedup`` the run's own estimate,
  ``specdec.bench.run.paired``), a table of records per dataset and the
  summary files as a ``summary`` artifact. The trained weights the config names (a drafter's or
  head's asset folder) are declared as ``model`` artifacts the run used, so W&B's lineage links
  them to the run (``specdec.bench.wandb_lineage``). ``WANDB_DIR`` is honoured; otherwise W&B
  files go into the run directory.

The timing verdict (``specdec.bench.timing``, in ``overall`` once the run is paired) reaches both
loggers: ``timing_reliable`` (1 or 0) as a metric, ``timing_reasons`` as text (CSV: one row, ``;``
between reasons; W&B: the run summary's ``eval/overall/timing_reasons``).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

from specdec.bench.wandb_artifacts import RunTag, log_files
from specdec.bench.wandb_lineage import learned_folders, use_models

RECORD_COLUMNS = (
    "prompt_id",
    "category",
    "new_tokens",
    "target_forwards",
    "draft_forwards",
    "drafted",
    "accepted",
    "wall_s",
    "prefill_s",
    "text",
)


def scalar_metrics(metrics: dict) -> dict[str, float]:
    """Scalars of a metrics dict; per-position acceptance and method counters are spread into
    keys (``acceptance_pos<j>``, ``counter_<name>``)."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, bool | int | float):
            out[key] = float(value)
        elif key == "per_position_acceptance":
            out.update({f"acceptance_pos{j}": float(v) for j, v in enumerate(value)})
        elif key == "counters":
            out.update({f"counter_{k}": float(v) for k, v in value.items()})
    return out


def reasons_text(metrics: dict) -> str | None:
    """``timing_reasons`` of a metrics dict as one line (None: absent; empty: reliable)."""
    reasons = metrics.get("timing_reasons")
    return None if reasons is None else "; ".join(str(r) for r in reasons)


class EvalLogger:
    """No-op logger (``logger=none``); the others override what they record."""

    def log_config(self, config: dict, tag: RunTag) -> None:
        """Record the resolved run config (called once, first) and what names the run."""

    def log_dataset(self, name: str, metrics: dict) -> None:
        """Record the metrics of one dataset (``name`` may be ``overall``)."""

    def log_records(self, name: str, records: list[dict]) -> None:
        """Record the per-prompt records of one dataset."""

    def log_summary(self, files: Sequence[Path]) -> None:
        """Record the run's summary files (``summary.json`` and ``summary/<dataset>.json``)."""

    def finish(self) -> None:
        """Flush and close (always called, also after an error)."""


class CSVLogger(EvalLogger):
    """``metrics.csv`` in the run directory."""

    def __init__(self, out_dir: str | Path):
        self.path = Path(out_dir) / "metrics.csv"
        with self.path.open("w", newline="") as f:
            csv.writer(f).writerow(["dataset", "metric", "value"])

    def log_dataset(self, name: str, metrics: dict) -> None:
        with self.path.open("a", newline="") as f:
            writer = csv.writer(f)
            for key, value in scalar_metrics(metrics).items():
                writer.writerow([name, key, value])
            if reasons_text(metrics) is not None:
                writer.writerow([name, "timing_reasons", reasons_text(metrics)])


class WandbLogger(EvalLogger):
    """A W&B run holding the config, ``eval/<dataset>/<metric>``, record tables and the summary,
    using the trained weights' artifacts.

    The run starts in ``log_config``, when the run's ``RunTag`` is known; ``name``, ``group`` and
    ``job_type`` given here win over the tag's.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        name: str | None = None,
        group: str | None = None,
        job_type: str | None = None,
        project: str | None = None,
        entity: str | None = None,
        mode: str = "offline",
        tags: Sequence[str] = (),
    ):
        import wandb

        self.wandb, self.run, self.tag = wandb, None, None
        self.names = {"name": name, "group": group, "job_type": job_type}
        self.settings = {"project": project, "entity": entity, "mode": mode, "tags": list(tags)}
        self.dir = os.environ.get("WANDB_DIR") or str(out_dir)

    def log_config(self, config: dict, tag: RunTag) -> None:
        Path(self.dir).mkdir(parents=True, exist_ok=True)
        names = {k: v if v is not None else getattr(tag, k) for k, v in self.names.items()}
        self.tag = tag
        self.run = self.wandb.init(**self.settings, **names, dir=self.dir, reinit="finish_previous")
        self.run.config.update(config, allow_val_change=True)  # a W&B sweep sets keys first
        use_models(self.run, self.wandb, learned_folders(config))  # lineage: weights -> run

    def log_dataset(self, name: str, metrics: dict) -> None:
        values = {f"eval/{name}/{k}": v for k, v in scalar_metrics(metrics).items()}
        self.run.log(values)
        self.run.summary.update(values)
        if reasons_text(metrics) is not None:
            self.run.summary[f"eval/{name}/timing_reasons"] = reasons_text(metrics)

    def log_records(self, name: str, records: list[dict]) -> None:
        columns = [c for c in RECORD_COLUMNS if any(c in r for r in records)]
        columns += sorted({k for r in records for k in r if k.startswith("quality")})
        table = self.wandb.Table(
            columns=columns, data=[[r.get(c) for c in columns] for r in records]
        )
        self.run.log({f"records/{name}": table})

    def log_summary(self, files: Sequence[Path]) -> None:
        log_files(
            self.run,
            self.wandb,
            name=f"summary-{self.tag.name}",
            kind="summary",
            files=list(files),
            metadata={"group": self.tag.group},
        )

    def finish(self) -> None:
        if self.run is None:  # failed before the run started
            return
        self.run.finish()
        # finish() can return before the W&B service has written the run file (seen in offline
        # mode under load); teardown waits for the service to flush and stop
        self.wandb.teardown()
