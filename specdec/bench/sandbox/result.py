"""What a sandboxed run is given and gives back: ``Limits``, ``TaskTests``, ``SandboxResult``."""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Resource caps of a sandboxed run (each applies per process unless said otherwise)."""

    memory_bytes: int = 2 << 30  # RLIMIT_AS
    file_bytes: int = 16 << 20  # RLIMIT_FSIZE: largest file, stdout+stderr included
    nproc: int = 64  # RLIMIT_NPROC (and the cgroup's pids.max): processes and threads
    nofile: int = 256  # RLIMIT_NOFILE: open file descriptors
    total_memory_bytes: int = 4 << 30  # the cgroup's memory cap: all processes together
    disk_bytes: int = 64 << 20  # size of the tmpfs working folder: all files together


@dataclass(frozen=True)
class TaskTests:
    """Tests judged apart from the program (``specdec.bench.sandbox.judge``).

    Attributes:
        code: the test code; it defines ``check(candidate)`` (HumanEval's ``test`` field).
        entry_point: the function of the program that ``check`` is given.
        context: trusted code run before ``code`` in the judge (HumanEval's prompt: the helpers
            some tests call, such as ``poly`` or ``encode_cyclic``).
    """

    code: str
    entry_point: str
    context: str = ""


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed run ended.

    Attributes:
        passed: without ``TaskTests``: exit status 0 after the program ran to its end, within the
            timeout; with ``TaskTests``: the judge's ``check`` returned, within the timeout.
        timed_out: the wall-clock timeout fired and the process group was killed.
        killed: the run ended by a signal (ours at the timeout, or the kernel's at a limit).
        reason: one line for people: ``passed``, the timeout, the signal or the last error line.
        network_isolated: the program ran in its own network namespace (no network at all).
        layers: the isolation obtained (``cgroup-memory``, ``cgroup-pids``, ``fresh-uid``,
            ``userns``, ``mntns``, ``netns``, ``pidns``, ``private-proc``, ``empty-tmp``,
            ``tmpfs-disk``, ``ro-root``, ``nocaps``, ``landlock-fs``, ``landlock-tcp``,
            ``landlock-signal``, ``seccomp``, and ``judge`` where tests were judged apart).
        returncode: the supervisor's exit status (negative: the signal that ended it).
        pgid: the process group that was killed at the end.
        output: the tail of stdout and stderr together.
    """

    passed: bool
    timed_out: bool
    killed: bool
    reason: str
    network_isolated: bool
    layers: tuple[str, ...]
    returncode: int | None
    pgid: int
    output: str


def make_result(
    *,
    code: int,
    pgid: int,
    timed_out: bool,
    done: bool,
    layers: tuple[str, ...],
    output: str,
    timeout_s: float,
) -> SandboxResult:
    """The result of a run whose supervisor ended with ``code`` (``done``: its verdict line)."""
    passed = not timed_out and code == 0 and done
    if timed_out:
        reason = f"timed out after {timeout_s:g} s; process group killed"
    elif passed:
        reason = "passed"
    elif code < 0:
        reason = f"killed by {signal.Signals(-code).name}"
    elif code == 0:
        reason = "exited before the program ran to its end"
    else:
        last = next((x for x in reversed(output.splitlines()) if x.strip()), "")
        reason = f"exit status {code}: {last.strip()}"[:300]
    return SandboxResult(
        passed=passed,
        timed_out=timed_out,
        killed=code < 0,
        reason=reason,
        network_isolated="netns" in layers,
        layers=layers,
        returncode=code,
        pgid=pgid,
        output=output,
    )
