"""The host side of the sandbox: ``run_sandboxed`` starts the supervisor and reads its verdict.

``run_sandboxed(source, timeout_s=...)`` starts ``sys.executable -I -B`` on this package's
``supervisor`` module (which confines itself and forks the program's process; see its
docstring) with:

* a new session and process group (``start_new_session``): at the timeout, and after every
  run, SIGKILL goes to the whole group, so forked grandchildren die too;
* a cgroup of its own where the caller may make one (``cgroup``): memory and process totals for
  the whole sandbox; whatever is left in it is killed at the end;
* an empty environment (``PATH``, and ``HOME``/``TMPDIR`` pointing at the working directory):
  the parent's API tokens and settings are not inherited;
* a fresh temporary working directory, removed afterwards; stdin from /dev/null; stdout and
  stderr into an anonymous file (its size capped by ``RLIMIT_FSIZE``);
* the host's nonce on a pipe, and the ``TaskTests`` (when given) in an anonymous file: the
  supervisor reads both only after it forked the program's process.

The child imports this folder as a package of its own name (``CHILD_PACKAGE``, registered by
hand: nothing goes on ``sys.path``, and neither ``specdec`` nor this ``__init__`` is imported),
so none of its modules can shadow a module the program imports.
"""

from __future__ import annotations

import json
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
from dataclasses import asdict
from pathlib import Path

from specdec.bench.sandbox import cgroup, fallbacks
from specdec.bench.sandbox.result import Limits, SandboxResult, TaskTests, make_result

OUTPUT_TAIL = 4000  # characters of stdout+stderr kept in the result
POLL_S = 0.01
CHILD_PACKAGE = "specdec_sandbox_child"
BOOTSTRAP = (
    "import json, sys, types; pkg = types.ModuleType({name!r}); "
    "pkg.__path__ = [{folder!r}]; sys.modules[{name!r}] = pkg; "
    "from {name} import supervisor; supervisor.main(json.loads(sys.argv[1]))"
)


def run_sandboxed(
    source: str, *, timeout_s: float, limits: Limits | None = None, tests: TaskTests | None = None
) -> SandboxResult:
    """Run Python ``source`` as ``__main__`` in the sandbox; never raises for what the code does.

    Args:
        source: the whole program (without ``tests``: its own checks included), or the code that
            defines ``tests.entry_point`` (HumanEval: prompt + completion).
        timeout_s: wall-clock limit; the CPU limit is this, rounded up.
        limits: resource caps (``Limits()`` when None).
        tests: judged in the supervisor, outside the program's process (``judge``); the
            program's process only answers calls of the entry point.

    Returns:
        The structured end of the run; ``passed`` is the only success.
    """
    limits = limits or Limits()
    tmp = tempfile.mkdtemp(prefix="specdec-sandbox-")
    nonce = secrets.token_hex(16)
    status_r, status_w = os.pipe()
    nonce_r, nonce_w = os.pipe()
    cgroups = cgroup.create(memory_bytes=limits.total_memory_bytes, pids=limits.nproc)
    try:
        (Path(tmp) / "program.py").write_text(source, encoding="utf-8")
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as spec:
            spec.write(json.dumps(asdict(tests) if tests else None).encode())
            spec.flush()
            spec.seek(0)
            cfg = {
                "program": "program.py",
                "status_fd": status_w,
                "nonce_fd": nonce_r,
                "tests_fd": spec.fileno(),
                "entry_point": tests.entry_point if tests else None,
                "cpu_s": max(1, math.ceil(timeout_s)),
                "memory_bytes": limits.memory_bytes,
                "file_bytes": limits.file_bytes,
                "nproc": limits.nproc,
                "nofile": limits.nofile,
                "disk_bytes": limits.disk_bytes,
            }
            folder = str(Path(__file__).resolve().parent)
            boot = BOOTSTRAP.format(name=CHILD_PACKAGE, folder=folder)
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", boot, json.dumps(cfg)],
                cwd=tmp,
                env={"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=(status_w, nonce_r, spec.fileno()),
                start_new_session=True,
            )
            for fd in (status_w, nonce_r):
                os.close(fd)
            status_w = nonce_r = -1
            cgroup.join(cgroups, proc.pid)  # before the child may fork anything
            try:
                os.write(nonce_w, f"go\n{nonce}\n".encode())
            except BrokenPipeError:  # the child died before it read: its status says how
                pass
            timed_out = not _exited_within(proc.pid, timeout_s)
            _kill_group(proc.pid)  # the leader is not reaped yet, so its pgid is still ours
            cgroup.kill_and_remove(cgroups)
            proc.wait()
            output = _tail(out)
        layers, done = _read_status(status_r, nonce)
    finally:
        for fd in (status_r, status_w, nonce_r, nonce_w):
            if fd >= 0:
                os.close(fd)
        cgroup.kill_and_remove(cgroups)
        _remove_tree(tmp)
    obtained = (*cgroups.layers, *layers)
    fallbacks.warn_missing(obtained)
    return make_result(
        code=proc.returncode,
        pgid=proc.pid,
        timed_out=timed_out,
        done=done,
        layers=obtained,
        output=output,
        timeout_s=timeout_s,
    )


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
