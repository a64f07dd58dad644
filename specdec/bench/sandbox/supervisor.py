"""The sandbox's supervisor: confine, fork the program's process, report layers and the verdict.

``host.run_sandboxed`` starts ``python -I -B`` on this module (in a package of its own name,
see ``host``) in a new session, with an empty environment, stdin from /dev/null and a
temporary working directory. This process never runs program code. It waits for the host's
``go`` (it has been put in its cgroup), leaves uid 0 for a fresh uid where it can (``uid``),
enters the namespaces and the private mounts (``confine``), then forks the program's process
(``program``). Only it holds the status pipe to the host: it writes the layers line, then
``done <nonce>`` when the run passed:

* without tests: the program's process exited 0 *and* handed back this process's token (it
  writes the token only once the program ran to its end);
* with tests: ``judge`` ran them here, against the program's entry point across two pipes,
  and ``check`` returned; the program's process is then killed, whatever it does.

The host's nonce and the tests are read from their descriptors only after the fork, so the
program's process never had them in memory; this process is not dumpable (no
``/proc/<pid>/mem`` or fd of it for the program, which also has no ``ptrace``).
"""

from __future__ import annotations

import json
import os
import signal
import sys

from . import confine, judge, program, uid

PR_SET_DUMPABLE = 4


def _read_until_newline(fd: int, limit: int = 1 << 16) -> bytes:
    """Blocking read of one line (or up to EOF / ``limit`` bytes), one byte at a time."""
    data = b""
    while len(data) < limit and not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
    return data


def _read_rest(fd: int) -> bytes:
    """What is left in a pipe, without blocking (a writer may outlive the program's process)."""
    os.set_blocking(fd, False)
    data = b""
    while len(data) < 1 << 16:
        try:
            chunk = os.read(fd, 1 << 12)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _read_all(fd: int) -> bytes:
    """A whole file from its descriptor (the tests' anonymous file)."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _relay(code: int) -> None:
    """End this process as the program's process ended (the same status, or the same signal)."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def _confine(cfg: dict) -> tuple[list[str], tuple[str, ...], str]:
    """Fresh uid, namespaces, private mounts; (layers, namespaces, the program's source)."""
    with open(cfg["program"], encoding="utf-8") as f:
        source = f.read()
    fresh = uid.give_up_root()
    namespaces = confine.enter_namespaces(fresh_uid=fresh is not None)
    layers = [*(["fresh-uid"] if fresh else []), *(f"{n}ns" for n in namespaces)]
    if "mnt" in namespaces:
        layers += confine.private_mounts(
            os.getcwd(),
            cfg["disk_bytes"],
            keep=uid.interpreter_paths(),
            clones=tuple(fresh.clones) if fresh else (),
        )
        with open(cfg["program"], "w", encoding="utf-8") as f:  # tracebacks quote its lines
            f.write(source)
    if fresh:
        uid.release(fresh)
    return layers, namespaces, source


def main(cfg: dict) -> None:
    """The supervisor (see the module docstring); ends with the program's status or the judge's."""
    status_fd, nonce_fd, tests_fd = cfg["status_fd"], cfg["nonce_fd"], cfg["tests_fd"]
    if os.read(nonce_fd, 3) != b"go\n":  # exactly 3 bytes: the nonce behind stays in the pipe
        os._exit(1)
    layers, namespaces, source = _confine(cfg)
    # 1. the program's process: the tests' entry point is the only part of them it learns
    entry = cfg["entry_point"]  # None: no tests, the program checks itself
    token = None if entry is not None else os.urandom(16).hex().encode()
    end_r, end_w = os.pipe()
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    cfg = {
        **cfg,
        "supervisor": os.getpid(),
        "allow_inet": "net" in namespaces,
        "private_proc": {"mnt", "pid"} <= set(namespaces),
    }
    pid = os.fork()
    if pid == 0:
        for fd in (end_r, request_w, reply_r, status_fd, nonce_fd, tests_fd):
            os.close(fd)
        program.run_program(
            cfg, source, {"end_w": end_w, "request_r": request_r, "reply_w": reply_w}, token
        )
    for fd in (end_w, request_r, reply_w):
        os.close(fd)
    import ctypes

    ctypes.CDLL(None).prctl(
        PR_SET_DUMPABLE, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
    )
    # 2. the nonce and the tests, only now
    nonce = _read_until_newline(nonce_fd).strip().decode("ascii", errors="replace")
    os.close(nonce_fd)
    tests = json.loads(_read_all(tests_fd))
    os.close(tests_fd)
    try:
        layers += json.loads(_read_until_newline(end_r))
    except ValueError:  # the program's process died before it could report
        pass
    layers += ["judge"] if tests is not None else []
    os.write(status_fd, (json.dumps({"layers": layers}) + "\n").encode())
    # 3. the verdict
    if tests is not None:
        passed = judge.judge(tests, request_w, reply_r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        code = 0 if passed else 1
    else:
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        passed = code == 0 and _read_rest(end_r) == token
    if passed:
        os.write(status_fd, f"done {nonce}\n".encode())
    os.close(status_fd)
    sys.stdout.flush()
    sys.stderr.flush()
    _relay(code)
