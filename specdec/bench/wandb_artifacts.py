"""Weights & Biases naming and artifacts for eval runs and leaderboards.

Naming (``RunTag``): every eval run of one model pair on one benchmark lands in one W&B *group*
(``<pair>/<benchmark>``), its *job type* is the method preset, and its *name* is
``<method>-<pair>-<benchmark>-s<seed>``, so the W&B UI groups the runs a leaderboard compares and
splits them by method. The pair is ``ModelPair.describe()["name"]``; the benchmark is its
datasets joined by ``+`` (``alpaca+gsm8k+humaneval``).

Artifacts (``log_files``): an eval run logs its ``summary.json`` and ``summary/<dataset>.json`` as
an artifact of type ``summary`` (``specdec.bench.run.loggers.WandbLogger.log_summary``); a report
logs its folder (``leaderboard.md``, ``.csv``, ``.tex``, the PDF and PNG plots, a sweep's YAML
files) as an artifact of type ``leaderboard`` from a W&B run of job type ``report``
(``WandbReport``: the ``report`` node of ``conf/logger/wandb.yaml``, used by the sweep's
leaderboard callback, and ``python -m specdec.report --wandb``). That run also logs the leaderboard
itself, browsable in the W&B UI (``log_board``): ``leaderboard.csv`` as the W&B Table
``leaderboard`` and each PNG plot as the image ``plots/<name>``. W&B is imported only inside these
calls; ``mode`` defaults to offline.

One run id per logical run: under ``wandb agent`` the process's environment names the sweep
trial's run (``WANDB_RUN_ID``, ``WANDB_SWEEP_ID``, ...), which the eval run is; the report run that
the sweep's leaderboard callback starts in the same process is another run, so ``WandbReport``
starts it with a fresh id and without those variables (``own_run_env``), and it never lands on
(or resumes) the trial's run.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdec.bench.run_summary import RunSummary

REPORT_FILES = (
    "leaderboard.md",
    "leaderboard.csv",
    "leaderboard.tex",
    "*.pdf",
    "*.png",
    "*.yaml",
)  # yaml: the sweep's
# what `wandb agent` sets for its trial's run: a report run started in that process must not use it
TRIAL_ENV = (
    "WANDB_RUN_ID",
    "WANDB_RESUME",
    "WANDB_SWEEP_ID",
    "WANDB_SWEEP_PARAM_PATH",
    "WANDB_RUN_GROUP",
    "WANDB_JOB_TYPE",
    "WANDB_NAME",
)


@contextmanager
def own_run_env() -> Iterator[None]:
    """Hide the sweep trial's run variables (``TRIAL_ENV``) while a run of its own starts."""
    saved = {k: os.environ.pop(k) for k in TRIAL_ENV if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


@dataclass(frozen=True)
class RunTag:
    """What names an eval run on W&B: method preset, pair name, benchmark, seed."""

    method: str
    pair: str
    benchmark: str
    seed: int = 0

    @classmethod
    def from_summary(cls, summary: RunSummary | dict) -> RunTag:
        """The tag of a run from its summary, typed or as ``summary.json`` holds it (datasets
        from ``prompt_files``, which the runner fills before the first prompt)."""
        if isinstance(summary, dict):
            summary = RunSummary.from_json({"datasets": {}, **summary})
        datasets = summary.prompt_files or summary.datasets or {}
        return cls(
            str(summary.method),
            str((summary.model or {}).get("name", "pair")),
            "+".join(sorted(datasets)),
            int(summary.seed or 0),
        )

    @property
    def group(self) -> str:
        return f"{self.pair}/{self.benchmark}"

    @property
    def job_type(self) -> str:
        return self.method

    @property
    def name(self) -> str:
        return f"{self.method}-{self.pair}-{self.benchmark}-s{self.seed}"


def common_group(summaries: Sequence[RunSummary | dict]) -> str | None:
    """The W&B group every run shares (``RunTag.group``), or None when they differ."""
    groups = {RunTag.from_summary(s).group for s in summaries}
    return groups.pop() if len(groups) == 1 else None


def artifact_name(text: str) -> str:
    """``text`` with every character W&B refuses in an artifact name replaced by ``-``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "artifact"


def log_files(
    run: Any,
    wandb: Any,
    *,
    name: str,
    kind: str,
    files: Sequence[Path],
    metadata: dict | None = None,
) -> Any:
    """Log ``files`` as one artifact of type ``kind`` on the W&B ``run``; returns the artifact.

    Raises:
        ValueError: when ``files`` is empty (nothing to log is a caller's mistake).
    """
    if not files:
        raise ValueError(f"no files for W&B artifact {name!r}; write them before logging")
    artifact = wandb.Artifact(artifact_name(name), type=kind, metadata=metadata or {})
    for path in files:
        artifact.add_file(str(path), name=path.name)
    run.log_artifact(artifact)
    return artifact


def log_board(run: Any, wandb: Any, out_dir: Path) -> list[str]:
    """Log a report folder's ``leaderboard.csv`` as the W&B Table ``leaderboard`` and each PNG
    plot as the image ``plots/<stem>``, in one ``run.log`` call; returns the keys logged (none
    when the folder holds neither)."""
    import pandas as pd

    out_dir = Path(out_dir)
    values: dict[str, Any] = {}
    board = out_dir / "leaderboard.csv"
    if board.is_file():
        frame = pd.read_csv(board)
        # empty cells are undefined values: None in the Table, not NaN
        frame = frame.astype(object).where(frame.notna(), None)
        values["leaderboard"] = wandb.Table(dataframe=frame)
    for png in sorted(out_dir.glob("*.png")):
        values[f"plots/{png.stem}"] = wandb.Image(str(png), caption=png.stem)
    if values:
        run.log(values)
    return list(values)


def report_files(out_dir: Path) -> list[Path]:
    """The files of a report folder that its artifact holds (``REPORT_FILES``)."""
    return sorted({p for pattern in REPORT_FILES for p in Path(out_dir).glob(pattern)})


class WandbReport:
    """Logs a report folder as a ``leaderboard`` artifact, its table and its plots
    (``log_board``) from a W&B run of job type ``report``.

    Args:
        project, entity, tags: of the W&B run (as ``conf/logger/wandb.yaml``).
        mode: ``offline`` (default), ``online`` or ``disabled``.
    """

    def __init__(
        self,
        *,
        project: str | None = None,
        entity: str | None = None,
        mode: str = "offline",
        tags: Sequence[str] = (),
    ) -> None:
        self.project, self.entity, self.mode, self.tags = project, entity, mode, list(tags)

    def log(self, out_dir: str | Path, *, group: str | None = None) -> str:
        """Log the folder's leaderboard files, table and plots; returns the artifact's name."""
        import wandb

        out_dir = Path(out_dir)
        files = report_files(out_dir)
        wandb_dir = os.environ.get("WANDB_DIR") or str(out_dir)
        with own_run_env():  # never the sweep trial's run (module docstring)
            run = wandb.init(
                project=self.project,
                entity=self.entity,
                mode=self.mode,
                tags=self.tags,
                group=group,
                job_type="report",
                name=f"report-{out_dir.name}",
                dir=wandb_dir,
                id=uuid.uuid4().hex[:12],
                reinit="finish_previous",
            )
        name = artifact_name(f"leaderboard-{out_dir.name}")
        try:
            log_files(
                run,
                wandb,
                name=name,
                kind="leaderboard",
                files=files,
                metadata={"folder": str(out_dir)},
            )
            log_board(run, wandb, out_dir)
        finally:
            run.finish()
            wandb.teardown()  # as WandbLogger.finish: let the service flush before returning
        return name
