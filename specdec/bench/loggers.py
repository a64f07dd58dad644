"""Experiment loggers of the eval stage: the ``eval`` node of the shared ``logger`` group.

``conf/logger/<name>.yaml`` holds one ``_target_`` per entry point: ``eval`` (a class below, for
``python -m specdec.eval``) and ``train`` (a Lightning logger, or null, for ``python -m
specdec.train``). The runner instantiates ``logger.eval``, hands it the resolved run config
(``log_config``), then each dataset's metrics and records, and always calls ``finish``.

* ``EvalLogger`` (``logger=none``): nothing beyond the run directory's records and ``summary.json``.
* ``CSVLogger`` (``logger=csv``): ``metrics.csv`` in the run directory, one ``dataset,metric,value``
  row per scalar.
* ``WandbLogger`` (``logger=wandb``): Weights & Biases, offline unless ``WANDB_MODE`` says
  otherwise (``logger.mode``). The run gets the resolved config, the metrics as
  ``eval/<dataset>/<metric>`` (per-position acceptance as ``eval/<dataset>/acceptance_pos<j>``)
  and a table of records per dataset. ``WANDB_DIR`` is honoured; otherwise W&B files go into the
  run directory.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

RECORD_COLUMNS = ("prompt_id", "category", "new_tokens", "target_forwards", "draft_forwards",
                  "drafted", "accepted", "wall_s", "prefill_s", "text")


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


class EvalLogger:
    """No-op logger (``logger=none``); the others override what they record."""

    def log_config(self, config: dict) -> None:
        """Record the resolved run config (called once, first)."""

    def log_dataset(self, name: str, metrics: dict) -> None:
        """Record the metrics of one dataset (``name`` may be ``overall``)."""

    def log_records(self, name: str, records: list[dict]) -> None:
        """Record the per-prompt records of one dataset."""

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


class WandbLogger(EvalLogger):
    """A W&B run holding the config, ``eval/<dataset>/<metric>`` and record tables."""

    def __init__(self, out_dir: str | Path, *, name: str | None = None,
                 project: str | None = None, entity: str | None = None, mode: str = "offline",
                 tags: Sequence[str] = ()):
        import wandb

        self.wandb = wandb
        wandb_dir = os.environ.get("WANDB_DIR") or str(out_dir)
        Path(wandb_dir).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=project, entity=entity, mode=mode, tags=list(tags),
                              name=name, dir=wandb_dir, reinit="finish_previous")

    def log_config(self, config: dict) -> None:
        self.run.config.update(config, allow_val_change=True)  # a W&B sweep sets keys first

    def log_dataset(self, name: str, metrics: dict) -> None:
        values = {f"eval/{name}/{k}": v for k, v in scalar_metrics(metrics).items()}
        self.run.log(values)
        self.run.summary.update(values)

    def log_records(self, name: str, records: list[dict]) -> None:
        columns = [c for c in RECORD_COLUMNS if any(c in r for r in records)]
        columns += sorted({k for r in records for k in r if k.startswith("quality")})
        table = self.wandb.Table(columns=columns,
                                 data=[[r.get(c) for c in columns] for r in records])
        self.run.log({f"records/{name}": table})

    def finish(self) -> None:
        self.run.finish()
        # finish() can return before the W&B service has written the run file (seen in offline
        # mode under load); teardown waits for the service to flush and stop
        self.wandb.teardown()

