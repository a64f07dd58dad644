"""Ahead: a drafter's background job, run while the target verifies, taken or rolled back after.

The execution model of "draft while the target verifies" (PEARL's post-verify,
Liu et al. 2025, "PEARL: Parallel Speculative Decoding with Adaptive Draft Length"; SpecBranch's
branches; SSD's outcome cache). The engine knows nothing of it: a drafter ``submit``s a job at the
end of ``propose`` (the step's draft is fixed by then), the engine runs the target's forward and
the verifier, and the drafter ``take``s the job's result in ``observe``, where it keeps it (its
guess of the verdict hit) or drops it (a miss: the work is rolled back). A step is thus priced
``max(target forward, job)`` by the modeled clock (``specdec.bench.pricing``), because the job's
forwards run inside ``forwards.lane(name)`` and the engine stamps them with the step they overlap.

What a job must be (so a seed gives one output whatever the worker's timing):

* a deterministic function of what it was given: its randomness comes from a forked coin stream
  (``Coins.fork`` with a key holding the step), never from the shared coins;
* the only user of the state it touches (e.g. the draft model's cache) until ``take``;
* finished before its result is used: ``take`` waits for it. A result never depends on *when* the
  job ends, only on its inputs.

Where it runs (``mode``; ``auto``, the default, is ``thread`` when ``check_overlap`` says the
configuration can overlap and ``inline`` otherwise):

* ``thread``: one persistent worker thread per ``Ahead``. On CPU its forwards use the draft
  model's thread budget (``CachedLM.threads`` = ``model.placement.draft_threads``, set around
  each forward; the worker also starts with it), the target keeps the process's (``threads``).
  On CUDA the job runs on a side stream of the draft model's device (a device of its own when
  ``model.placement.draft_device`` differs from the target's, a second stream on the same device
  otherwise), and the worker synchronises that stream before ``take`` hands the result over. The
  CUDA path is written to the CUDA semantics but untested here (no GPU on the project's machine).
* ``inline``: the job runs inside ``submit``, before the target's forward. Same result, same
  lanes in the log (so the modeled clock still prices the overlap), no wall-clock overlap. The
  exact enumeration harness needs it (its draws must come in a fixed order).

Whether a configuration can overlap at all is checked once (``check_overlap``): a draft thread
budget above the machine's cores is an error; a budget that leaves the target fewer cores than it
uses gives a warning that the run is serial in wall time (the modeled clock is then the two-device
answer), and ``auto`` runs the job inline: threads that cannot overlap only slow each other's
forwards, and the modeled clock's cost table is fitted on those forward times. On a 2-core
machine a worker thread rarely pays in wall time even when it fits (measured: docs/methods.md,
PEARL).

Errors: an exception raised by a job is re-raised by ``take`` in the caller's thread as
``BackgroundError`` naming the lane and the decoding step (``specdec.bench.run.method.run_prompt``
adds the prompt; the runner then writes no record for it).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

import torch

from specdec.errors import BadInput
from specdec.forwards import lane

log = logging.getLogger(__name__)
T = TypeVar("T")
MODES = ("auto", "thread", "inline")


class BackgroundError(RuntimeError):
    """A drafter's background job failed; the message names its lane and decoding step."""

    def at(self, where: str) -> BackgroundError:
        """The same error, saying which generation it belongs to (e.g. the prompt)."""
        err = BackgroundError(f"{self} ({where})")
        err.__cause__ = self.__cause__
        return err


def machine_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_overlap(device: torch.device, draft_threads: int | None, *, mode: str, name: str) -> bool:
    """Whether background work on ``device`` can overlap the target's forward in wall time.

    Args:
        device: the draft model's device.
        draft_threads: the draft's torch thread budget (``model.placement.draft_threads``;
            ``None``: the worker inherits the process's ``torch.get_num_threads()``).
        mode: the requested mode (``auto``, ``thread`` or ``inline``), for the warning's advice.
        name: the worker's lane (for messages).

    Returns:
        False (with a warning, for ``auto`` and ``thread``) when the draft's and the target's
        CPU threads together exceed the cores, or when ``mode`` is ``inline``.

    Raises:
        ValueError: when ``draft_threads`` exceeds the machine's cores.
    """
    if mode == "inline":
        log.info(
            "background work %r runs inline: serial in wall time, overlapped in the modeled clock",
            name,
        )
        return False
    if device.type != "cpu":
        return True
    cores, target = machine_cores(), torch.get_num_threads()
    if draft_threads is not None and draft_threads > cores:
        raise BadInput(
            f"model.placement.draft_threads={draft_threads} exceeds this machine's "
            f"{cores} cores; give the draft at most {max(1, cores - 1)} (and the target "
            "the rest with threads=...)"
        )
    draft = draft_threads if draft_threads is not None else target
    if draft + target <= cores:
        return True
    what = (
        "the worker runs inline (drafter.mode=auto): same output, no thread contention in "
        "the forward times the modeled clock is fitted on"
        if mode == "auto"
        else "a worker thread only adds contention (drafter.mode=thread): it slows the forwards "
        "the modeled clock is fitted on; drafter.mode=auto runs it inline"
    )
    log.warning(
        "background work %r: the draft's %d torch threads and the target's %d share %d CPU "
        "cores, so drafting cannot overlap verification: this run is serial in wall time "
        "(wall_s) and %s; modeled_s prices the two lanes as two devices. To overlap, set "
        "threads=T model.placement.draft_threads=D with T + D <= %d, or "
        "model.placement.draft_device=<gpu>",
        name,
        draft,
        target,
        cores,
        what,
        cores,
    )
    return False


class Ahead(Generic[T]):
    """At most one background job at a time: ``submit`` it, then ``take`` (or ``discard``) it.

    Args:
        name: the lane its forwards are logged on.
        device: the device the job's model lives on (CUDA: a side stream there).
        threads: the torch thread budget of the worker thread (``None``: inherited).
        mode: ``auto`` (``thread`` when ``check_overlap`` passes, else ``inline``), ``thread``
            (a worker thread) or ``inline`` (run inside ``submit``). ``self.mode`` is the one used.
    """

    def __init__(
        self,
        name: str,
        *,
        device: torch.device | str = "cpu",
        threads: int | None = None,
        mode: str = "auto",
    ) -> None:
        if mode not in MODES:
            raise BadInput(
                f"drafter.mode={mode!r} is not a background mode; use one of {list(MODES)}"
            )
        self.name, self.threads = name, threads
        self.device = torch.device(device)
        self.overlaps = check_overlap(self.device, threads, mode=mode, name=name)
        self.mode = ("thread" if self.overlaps else "inline") if mode == "auto" else mode
        self._pool: ThreadPoolExecutor | None = None
        self._stream = None
        self._job: tuple[int, Future] | None = None

    @property
    def busy(self) -> bool:
        """Whether a job was submitted and not yet taken or discarded."""
        return self._job is not None

    def submit(self, step: int, job: Callable[[], T]) -> None:
        """Start ``job`` for decoding step ``step`` (inline: run it now)."""
        if self._job is not None:
            raise RuntimeError(
                f"background work {self.name!r}: the job of step "
                f"{self._job[0]} was never taken; take() it in observe"
            )
        if self.mode == "inline":
            future: Future = Future()
            try:
                future.set_result(self._run(job))
            except Exception as err:  # re-raised by take, as a thread's would be
                future.set_exception(err)
        else:
            future = self._executor().submit(self._run, job)
        self._job = (step, future)

    def take(self) -> T | None:
        """Wait for the job and return its result (``None`` if none was submitted).

        Raises:
            BackgroundError: naming the lane and the step when the job raised.
        """
        if self._job is None:
            return None
        step, future = self._job
        self._job = None
        try:
            return future.result()
        except Exception as err:
            raise BackgroundError(
                f"background work {self.name!r} of decoding step {step} "
                f"failed: {type(err).__name__}: {err}"
            ) from err

    def discard(self) -> None:
        """Wait for a pending job and drop its result or error (a generation ended early)."""
        if self._job is not None:
            wait([self._job[1]])
            self._job = None

    def close(self) -> None:
        """Drop a pending job and stop the worker thread."""
        self.discard()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # --- the worker ---------------------------------------------------------------------------
    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            if self.device.type == "cuda":
                self._stream = torch.cuda.Stream(device=self.device)
            self._pool = ThreadPoolExecutor(
                1, thread_name_prefix=f"specdec-{self.name}", initializer=self._init_thread
            )
        return self._pool

    def _init_thread(self) -> None:
        if self.threads is not None:
            torch.set_num_threads(self.threads)  # this thread's budget (OpenMP: per thread)

    def _run(self, job: Callable[[], T]) -> T:
        with lane(self.name), self._on_stream():
            out = job()
        if self._stream is not None:
            self._stream.synchronize()  # the result is complete before take hands it over
        return out

    @contextlib.contextmanager
    def _on_stream(self) -> Iterator[None]:
        if self._stream is None:
            yield
        else:
            with torch.cuda.stream(self._stream):
                yield
