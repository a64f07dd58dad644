"""A failing job does not sink the sweep: in a multirun its error is recorded and the next job runs.

Hydra's basic launcher runs a multirun's jobs one after the other; an exception escaping a job
made the sweeper stop at the end with a traceback and no leaderboard, and an input error's
``SystemExit`` (``specdec.errors.exit_on_input_error``) ended the sweep at once, losing every job
after it. Inside a multirun ``run_job`` catches the job's error instead:

1. it prints the error on stderr: an input error as its one ``error: ...`` line, any other
   exception (a bug) with its traceback (input errors too under ``HYDRA_FULL_ERROR=1``);
2. it writes the error into the run folder's ``summary.json`` (``complete: false``, ``error``:
   the line), creating a minimal summary when the job failed before writing one, unless another
   process holds the folder (``specdec.bench.rundir.RunLock``);
3. it notes the failure for the sweep (``failed()``) and returns None, so the next job runs.

At the end of the sweep the leaderboard callback (``specdec.bench.run.leaderboard``) lists the
failed jobs (an error line printed in step 1 is not printed again) and ends the process with
status 2 when every failure was an input error, else 1.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from specdec.bench.rundir import RunLock, write_json
from specdec.errors import EXIT_STATUS, input_error

BUG_STATUS = 1  # the sweep's exit status when a job failed with anything but an input error


@dataclass(frozen=True)
class Failure:
    """A failed job: its run folder, its method and its error line."""

    run_dir: Path
    method: str
    line: str

    @property
    def bad_input(self) -> bool:
        """An input error (its line starts ``error:``; an exception's starts with its class)."""
        return self.line.startswith("error: ")


_FAILED: list[Failure] = []  # this process's failed jobs, in order


def failed() -> list[Failure]:
    """The jobs of this process that failed so far."""
    return list(_FAILED)


def in_multirun() -> bool:
    """Whether this process runs a Hydra multirun (False outside Hydra, e.g. in tests)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def error_line(err: BaseException) -> str:
    """``error: <message>`` for an input error, ``<Exception class>: <message>`` otherwise
    (one line: the message's first line)."""
    cause = input_error(err)
    text = f"error: {cause}" if cause is not None else f"{type(err).__name__}: {err}"
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__


def exit_status(failures: list[Failure]) -> int:
    """0 with no failures; 2 when each was an input error; 1 when any was a bug."""
    if not failures:
        return 0
    return EXIT_STATUS if all(f.bad_input for f in failures) else BUG_STATUS


def mark_failed(run_dir: Path, method: str, line: str) -> bool:
    """Write ``line`` into ``run_dir/summary.json`` as its ``error`` (``complete: false``);
    returns False (nothing written) when another process holds the folder."""
    path = run_dir / "summary.json"
    try:
        with RunLock(run_dir):
            summary = (
                json.loads(path.read_text())
                if path.exists()
                else {
                    "method": method,
                    "datasets": {},
                    "datasets_done": [],
                    "progress": {},
                    "overall": {},
                }
            )
            summary.update(complete=False, error=line)
            write_json(path, summary)
    except RuntimeError:  # the folder is another eval's
        return False
    except (OSError, ValueError) as err:  # an unreadable summary: say so, keep the sweep going
        print(f"could not record the failure in {path}: {err}", file=sys.stderr, flush=True)
        return False
    return True


def run_job(job: Callable[[DictConfig], float | None], cfg: DictConfig) -> float | None:
    """``job(cfg)``; on an error, print it, record it (module docstring) and return None."""
    try:
        return job(cfg)
    except Exception as err:
        line = error_line(err)
        if input_error(err) is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
            traceback.print_exc(file=sys.stderr)  # a bug (or full errors asked for)
        print(line, file=sys.stderr, flush=True)
        run_dir = Path(str(cfg.paths.output_dir))
        method = str(OmegaConf.select(cfg, "method_name"))  # None when not set
        mark_failed(run_dir, method, line)
        _FAILED.append(Failure(run_dir, method, line))
        return None


def job_failure(
    run_dir: Path, method: str, completed: bool, value: object = None
) -> Failure | None:
    """How a sweep job failed, or None: an exception Hydra caught (``completed`` False, ``value``
    the exception), a failure ``run_job`` noted in this process, or an ``error`` in the run
    folder's summary (a job run in another process)."""
    if not completed:
        err = value if isinstance(value, BaseException) else RuntimeError(str(value))
        return Failure(run_dir, method, error_line(err))
    for failure in reversed(_FAILED):
        if failure.run_dir == run_dir:
            return failure
    line = summary_error(run_dir)
    return Failure(run_dir, method, line) if line is not None else None


def summary_error(run_dir: Path) -> str | None:
    """The ``error`` of ``run_dir/summary.json`` (None: none, or no readable summary)."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return summary.get("error") if isinstance(summary, dict) else None


def end_sweep(failures: list[Failure]) -> None:
    """Name the failed jobs on stderr and exit with ``exit_status`` (nothing when none failed).
    A job whose error ``run_job`` already printed is named by its folder only, so each error line
    shows once; a sweep whose only failure was printed adds nothing but the exit status."""
    status = exit_status(failures)
    if not status:
        return
    printed = [f for f in failures if f in _FAILED]
    if len(failures) == 1 and printed:
        sys.stderr.flush()
        raise SystemExit(status)
    print(
        f"error: {len(failures)} sweep job(s) failed (summary.json in each folder has the "
        "error; rerun the command to resume them):",
        file=sys.stderr,
    )
    for f in failures:
        said = " (its error is above)" if f in printed else f": {f.line}"
        print(f"  {f.method} ({f.run_dir}){said}", file=sys.stderr)
    sys.stderr.flush()
    raise SystemExit(status)
