"""Experiment loggers of the eval stage, chosen by the shared ``logger`` group (``backend:``).

* ``none``: nothing beyond the run directory's records and ``summary.json``.
* ``csv``: ``metrics.csv`` in the run directory, one ``dataset,metric,value`` row per scalar.
* ``wandb``: Weights & Biases, offline unless ``WANDB_MODE`` says otherwise (``logger.mode``).
  The run gets the resolved config, the metrics as ``eval/<dataset>/<metric>`` (per-position
  acceptance as ``eval/<dataset>/acceptance_pos<j>``) and a table of records per dataset.
  ``WANDB_DIR`` is honoured; otherwise W&B files go into the run directory.

The schema (``backend``, ``project``, ``entity``, ``mode``, ``tags``) is shared with
``specdec/train.py``'s Lightning loggers.
"""

from __future__ import annotations

import csv
import os
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
    """No-op logger (``backend: none``); the others override what they record."""

    def log_dataset(self, name: str, metrics: dict) -> None:
        """Record the metrics of one dataset (``name`` may be ``overall``)."""

    def log_records(self, name: str, records: list[dict]) -> None:
        """Record the per-prompt records of one dataset."""

    def finish(self) -> None:
        """Flush and close (always called, also after an error)."""


class CSVLogger(EvalLogger):
    """``metrics.csv`` in the run directory."""

    def __init__(self, out_dir: Path):
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

    def __init__(self, cfg: dict, config: dict, out_dir: Path, name: str):
        import wandb

        self.wandb = wandb
        wandb_dir = os.environ.get("WANDB_DIR") or str(out_dir)
        Path(wandb_dir).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=cfg.get("project"), entity=cfg.get("entity"),
            mode=os.environ.get("WANDB_MODE") or cfg.get("mode") or "offline",
            tags=list(cfg.get("tags") or []), name=name, dir=wandb_dir, config=config,
            reinit="finish_previous",
        )

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


def make_logger(cfg: dict, config: dict, out_dir: str | Path, *, name: str) -> EvalLogger:
    """The logger that ``cfg['backend']`` names.

    Args:
        cfg: the resolved ``logger`` group.
        config: the resolved run config (logged by W&B).
        out_dir: the run directory.
        name: the run's name (method preset).
    """
    backend = cfg.get("backend")
    if backend == "none":
        return EvalLogger()
    if backend == "csv":
        return CSVLogger(Path(out_dir))
    if backend == "wandb":
        return WandbLogger(cfg, config, Path(out_dir), name)
    raise ValueError(f"unknown logger.backend {backend!r}; use logger=none, logger=csv or "
                     "logger=wandb")
