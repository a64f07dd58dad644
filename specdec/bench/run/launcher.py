"""A rank of a data-parallel eval stops when its launcher dies.

``torchrun`` starts each rank in a session of its own, so when its agent is killed (SIGKILL, a
lost terminal, an OOM kill) no signal reaches the ranks: they ran on for hours, appending records
to a run nobody waits for. ``stop_with_launcher`` makes a launched rank (``WORLD_SIZE``
> 1, ``specdec.bench.run.ranks``) watch its parent: a daemon thread reads the parent pid every
``interval_s`` seconds, and once the parent has changed (the launcher died, the rank was handed
to init or a subreaper) it logs why and sends this process ``SIGTERM``, whose default action
ends it at once, even inside a long forward. Records are written line by line
(``specdec.bench.records``), so the rank leaves whole lines plus at most one partial last line,
which a rerun drops; the run lock goes with the process (``specdec.bench.rundir``).

Polling rather than ``prctl(PR_SET_PDEATHSIG)``: the kernel sends that signal when the *thread*
that started the process ends, which would stop the ranks of a launcher that starts them from a
short-lived thread. A one-process eval (no ``WORLD_SIZE``) is left alone: it may be meant to
outlive its shell (``nohup``). A launcher that died before the watch starts (while the rank still
imports) is not noticed.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

from specdec.bench.run.ranks import Ranks

log = logging.getLogger(__name__)

_watching: list[threading.Thread] = []  # at most one watch per process


def watch_parent(interval_s: float = 1.0, sig: int = signal.SIGTERM) -> threading.Thread:
    """Send this process ``sig`` once its parent process has changed (checked every
    ``interval_s`` seconds by a daemon thread, started here once per process)."""
    if _watching:
        return _watching[0]
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        log.error(
            "the launcher of this rank (pid %d) is gone; stopping (pid %d). The records "
            "written so far are kept: rerun the command to complete the run",
            parent,
            os.getpid(),
        )
        os.kill(os.getpid(), sig)

    thread = threading.Thread(target=watch, name="watch-launcher", daemon=True)
    thread.start()
    _watching.append(thread)
    return thread


def stop_with_launcher(interval_s: float = 1.0) -> bool:
    """In a launched rank (``WORLD_SIZE`` > 1), stop when the launcher dies; True if watching."""
    if Ranks.from_env().world == 1:
        return False
    watch_parent(interval_s)
    return True
