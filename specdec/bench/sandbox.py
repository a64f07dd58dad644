"""Run untrusted (model-written) Python in a sandbox; every HumanEval check runs through here.

``run_sandboxed(source, timeout_s=...)`` starts ``sys.executable -I -B`` on
``specdec/bench/sandbox_child.py`` (a supervisor that confines itself and forks the program's
process; see its docstring) with:

* a new session and process group (``start_new_session``): at the timeout, and after every
  run, SIGKILL goes to the whole group, so forked grandchildren die too;
* a cgroup of its own where the caller may make one (``sandbox_cgroup``): memory and process
  totals for the whole sandbox; whatever is left in it is killed at the end;
* an empty environment (``PATH``, and ``HOME``/``TMPDIR`` pointing at the working directory):
  the parent's API tokens and settings are not inherited;
* a fresh temporary working directory, removed afterwards; stdin from /dev/null; stdout and
  stderr into an anonymous file (its size capped by ``RLIMIT_FSIZE``);
* in the child: a fresh unused uid in place of root (``sandbox_uid``); user, mount, network
  and PID namespaces where the OS allows them (``sandbox_confine``): a tmpfs working folder,
  empty ``/tmp`` and ``/run``, every other mount read-only; no capabilities;
  ``RLIMIT_AS``/``CPU``/``FSIZE``/``NPROC``/``NOFILE``; Landlock; a seccomp syscall filter
  (``sandbox_seccomp``); and a Python audit hook as defense in depth.

What protects what (``Limits`` holds the numbers; the ``layers`` names in brackets):

==============  =================================================================================
memory          ``RLIMIT_AS`` per process (``memory_bytes``); all processes together
                ``total_memory_bytes`` [cgroup-memory]
CPU             ``RLIMIT_CPU`` per process (timeout rounded up): SIGKILL past it
processes       ``RLIMIT_NPROC`` (``nproc``) [cgroup-pids], group SIGKILL, PID namespace teardown
disk            ``RLIMIT_FSIZE`` per file (``file_bytes``); all files together ``disk_bytes``
                [tmpfs-disk]; writes only in the working folder [landlock-fs, ro-root]
metadata        no chmod/chown/xattr/utime outside the folder [ro-root]; no setuid bits, no
                xattrs, no chown anywhere [seccomp]; no uid 0 owning root's files [fresh-uid]
network         network namespace [netns]; Landlock refuses TCP [landlock-tcp]
local sockets   no Unix-domain socket can be made [seccomp]; nothing in /tmp, /run [empty-tmp]
secrets         empty environment, ``-I`` (no ``PYTHON*`` variables, no user site); root's
                own files unreadable [fresh-uid]; ``/root`` hidden but for Python [fresh-uid]
verdict         the status pipe is the supervisor's only; ``done`` carries the host's nonce
==============  =================================================================================

Nothing is claimed that was not obtained: the result lists the ``layers`` the sandbox got, and
``network_isolated`` is true only when a network namespace was created. The result passes only
on a clean run: exit status 0, the supervisor's ``done`` line with this run's nonce, and no
timeout.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from specdec.bench import sandbox_cgroup

log = logging.getLogger(__name__)

OUTPUT_TAIL = 4000  # characters of stdout+stderr kept in the result
POLL_S = 0.01


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
class SandboxResult:
    """How a sandboxed run ended.

    Attributes:
        passed: exit status 0 after the program ran to its end, within the timeout.
        timed_out: the wall-clock timeout fired and the process group was killed.
        killed: the run ended by a signal (ours at the timeout, or the kernel's at a limit).
        reason: one line for people: ``passed``, the timeout, the signal or the last error line.
        network_isolated: the program ran in its own network namespace (no network at all).
        layers: the isolation obtained (``cgroup-memory``, ``cgroup-pids``, ``fresh-uid``,
            ``userns``, ``mntns``, ``netns``, ``pidns``, ``empty-tmp``, ``tmpfs-disk``, ``ro-root``,
            ``nocaps``, ``landlock-fs``, ``landlock-tcp``, ``landlock-signal``, ``seccomp``).
        returncode: the child's exit status (negative: the signal that ended it).
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


# the child runs sandbox_child.py as a top-level module from this folder (``-I`` puts neither
# the working directory nor PYTHONPATH on sys.path, so nothing else can stand in for it); the
# folder leaves sys.path before the program runs, so its modules shadow nothing the program imports
BOOTSTRAP = ("import json, sys; sys.path.insert(0, {folder!r}); import sandbox_child; "
             "del sys.path[0]; sandbox_child.main(json.loads(sys.argv[1]))")


def run_sandboxed(source: str, *, timeout_s: float, limits: Limits | None = None) -> SandboxResult:
    """Run Python ``source`` as ``__main__`` in the sandbox; never raises for what the code does.

    Args:
        source: the whole program (for HumanEval: prompt + completion + tests + ``check``).
        timeout_s: wall-clock limit; the CPU limit is this, rounded up.
        limits: resource caps (``Limits()`` when None).

    Returns:
        The structured end of the run; ``passed`` is the only success.
    """
    limits = limits or Limits()
    tmp = tempfile.mkdtemp(prefix="specdec-sandbox-")
    nonce = secrets.token_hex(16)
    status_r, status_w = os.pipe()
    nonce_r, nonce_w = os.pipe()
    cgroups = sandbox_cgroup.create(memory_bytes=limits.total_memory_bytes, pids=limits.nproc)
    try:
        (Path(tmp) / "program.py").write_text(source, encoding="utf-8")
        cfg = {"program": "program.py", "status_fd": status_w, "nonce_fd": nonce_r,
               "cpu_s": max(1, math.ceil(timeout_s)), "memory_bytes": limits.memory_bytes,
               "file_bytes": limits.file_bytes, "nproc": limits.nproc, "nofile": limits.nofile,
               "disk_bytes": limits.disk_bytes}
        boot = BOOTSTRAP.format(folder=str(Path(__file__).resolve().parent))
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", boot, json.dumps(cfg)],
                cwd=tmp, env={"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp},
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                pass_fds=(status_w, nonce_r), start_new_session=True)
            for fd in (status_w, nonce_r):
                os.close(fd)
            status_w = nonce_r = -1
            sandbox_cgroup.join(cgroups, proc.pid)  # before the child may fork anything
            try:
                os.write(nonce_w, f"go\n{nonce}\n".encode())
            except BrokenPipeError:  # the child died before it read: its status says how
                pass
            timed_out = not _exited_within(proc.pid, timeout_s)
            _kill_group(proc.pid)  # the leader is not reaped yet, so its pgid is still ours
            sandbox_cgroup.kill_and_remove(cgroups)
            proc.wait()
            output = _tail(out)
        layers, done = _read_status(status_r, nonce)
    finally:
        for fd in (status_r, status_w, nonce_r, nonce_w):
            if fd >= 0:
                os.close(fd)
        sandbox_cgroup.kill_and_remove(cgroups)
        _remove_tree(tmp)
    return _result(proc, timed_out=timed_out, done=done,
                   layers=(*cgroups.layers, *layers), output=output, timeout_s=timeout_s)


def _exited_within(pid: int, timeout_s: float) -> bool:
    """Wait for ``pid`` to exit without reaping it (a zombie leader keeps its group id taken)."""
    deadline = time.monotonic() + timeout_s
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(out) -> str:
    out.seek(0, os.SEEK_END)
    out.seek(max(0, out.tell() - OUTPUT_TAIL))
    return out.read().decode("utf-8", errors="replace")


def _read_status(fd: int, nonce: str) -> tuple[tuple[str, ...], bool]:
    """The supervisor's layers line and whether ``done <nonce>`` followed (without blocking)."""
    os.set_blocking(fd, False)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:  # a writer outlived the group kill (it left the group)
            break
        if not chunk:
            break
        data += chunk
    lines = data.decode("utf-8", errors="replace").splitlines()
    try:
        layers = tuple(json.loads(lines[0])["layers"]) if lines else ()
    except (ValueError, KeyError, TypeError):
        layers = ()
    return layers, f"done {nonce}" in lines[1:]


def _remove_tree(path: str) -> None:
    """Remove the working directory even where the program took its own permissions away."""

    def retry(func, target, _exc) -> None:
        os.chmod(os.path.dirname(target), stat.S_IRWXU)
        if os.path.isdir(target) and not os.path.islink(target):
            os.chmod(target, stat.S_IRWXU)
            shutil.rmtree(target, onerror=retry)
        else:
            func(target)

    shutil.rmtree(path, onerror=retry)


def _result(proc: subprocess.Popen, *, timed_out: bool, done: bool, layers: tuple[str, ...],
            output: str, timeout_s: float) -> SandboxResult:
    code = proc.returncode
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
    return SandboxResult(passed=passed, timed_out=timed_out, killed=code < 0, reason=reason,
                         network_isolated="netns" in layers, layers=layers, returncode=code,
                         pgid=proc.pid, output=output)
