"""The child side of ``specdec.bench.sandbox``: confine, run the program, report the verdict.

``specdec.bench.sandbox.run_sandboxed`` starts ``python -I -B`` on this module (as a top-level
module beside ``sandbox_uid``, ``sandbox_confine`` and ``sandbox_seccomp``) in a new session,
with an empty environment, stdin from /dev/null and a temporary working directory. Two
processes follow:

* the **supervisor** (this process; never runs program code) waits for the host's ``go`` (it
  has been put in its cgroup), leaves uid 0 for a fresh uid where it can (``sandbox_uid``),
  enters the namespaces and the private mounts (``sandbox_confine``), then forks the
  program's process. Only it holds the status pipe to the host: it writes the layers line
  and, after the program's process ended, ``done <nonce>`` when that process exited 0 *and*
  handed back the supervisor's token. The host's nonce is read
  from its pipe only after the fork, so the program's process never had it in memory.
* the **program's process** (PID 1 of the PID namespace where there is one; killed when the
  supervisor dies) closes the status and nonce pipes, gives up every capability, sets the
  resource limits, enters Landlock and the syscall filter (``sandbox_seccomp``), installs a
  Python audit hook (defense in depth only: ``ctypes`` goes around it), reports its layers,
  then runs the program. Only when the program ran to its end does it write the token.

What the token does not stop: code that runs in the same interpreter as the tests can read the
interpreter's memory (frames, ``gc``, ``ctypes``), and so can find the token -- or, more simply,
defeat the tests themselves (a result equal to everything). The verdict is exactly as strong as
tests that share a process with the code they test; what the program can no longer do is write
to the host's status pipe, or pass by writing a fixed word to some inherited descriptor.

Resource limits (inherited by every process the program forks): ``RLIMIT_AS`` (memory),
``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, no core files, ``RLIMIT_NPROC`` (set after
the user namespace exists, so it counts the sandbox's own processes and threads; the kernel
exempts real uid 0, so a root caller without a fresh uid takes nobody's real uid first).
"""

from __future__ import annotations

import json
import os
import sys

try:  # as the sandbox runs it: a top-level module, its folder first on sys.path
    import sandbox_confine as confine
    import sandbox_seccomp as seccomp
    import sandbox_uid
except ImportError:  # imported from the package (linters, documentation)
    from specdec.bench import sandbox_confine as confine
    from specdec.bench import sandbox_seccomp as seccomp
    from specdec.bench import sandbox_uid

PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
BLOCKED_EVENTS = {"os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
                  "os.kill", "os.killpg", "pty.spawn"}
PATH_EVENTS = {"os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.chmod": (0,),
               "os.chown": (0,), "os.truncate": (0,), "os.utime": (0,), "os.rename": (0, 1),
               "os.link": (1,), "os.symlink": (1,), "shutil.rmtree": (0,), "os.setxattr": (0,),
               "os.removexattr": (0,)}


def set_limits(cfg: dict) -> None:
    """Hard and soft limits alike: the program cannot raise them again."""
    import resource

    for name, value in (("RLIMIT_AS", cfg["memory_bytes"]), ("RLIMIT_CPU", cfg["cpu_s"]),
                        ("RLIMIT_FSIZE", cfg["file_bytes"]), ("RLIMIT_NPROC", cfg["nproc"]),
                        ("RLIMIT_NOFILE", cfg["nofile"]), ("RLIMIT_CORE", 0)):
        if hasattr(resource, name):
            resource.setrlimit(getattr(resource, name), (value, value))


def install_guard(root: str) -> None:
    """Python-level refusal of writes outside ``root`` and of process launches."""
    root = os.path.realpath(root)

    def inside(path: object) -> bool:
        if isinstance(path, int):  # an fd that is already open
            return True
        full = os.path.realpath(os.fsdecode(path))  # type: ignore[arg-type]
        return full == root or full.startswith(root + os.sep)

    def hook(event: str, args: tuple) -> None:
        if event in BLOCKED_EVENTS:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open" and args[0] is not None and _writes(args[1], args[2]):
            paths = (args[0],)
        elif event in PATH_EVENTS:
            paths = tuple(args[i] for i in PATH_EVENTS[event])
        else:
            return
        for path in paths:
            if not inside(path):
                raise PermissionError(f"sandbox: {event} outside the working directory: {path}")

    sys.addaudithook(hook)


def _writes(mode: object, flags: object) -> bool:
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    return ((isinstance(mode, str) and any(c in mode for c in "wax+"))
            or (isinstance(flags, int) and bool(flags & write_flags)))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a full disk quota or a closed stream: nothing to keep
            pass


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


def run_program(cfg: dict, source: str, end_w: int, token: bytes, *, allow_inet: bool) -> None:
    """The program's process: confine, report the layers on ``end_w``, run; never returns."""
    import ctypes
    import signal

    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(int(signal.SIGKILL)),
                            ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    if os.getppid() not in (cfg["supervisor"], 0):  # it died before the line above (0: PID 1)
        os._exit(1)
    layers = ["nocaps"] if confine.drop_capabilities() else []
    set_limits(cfg)
    layers += confine.landlock(os.getcwd())
    if seccomp.install(allow_inet=allow_inet):
        layers.append("seccomp")
    install_guard(os.getcwd())
    os.write(end_w, (json.dumps(layers) + "\n").encode())

    def finish() -> None:
        _flush()
        os.write(end_w, token)
        os._exit(0)

    try:
        exec(compile(source, cfg["program"], "exec"), {"__name__": "__main__"})
    except BaseException:  # noqa: BLE001 - any end but the program's own is a failure
        import traceback

        traceback.print_exc()
        _flush()
        os._exit(1)
    finish()


def _relay(code: int) -> None:
    """End this process as the program's process ended (the same status, or the same signal)."""
    if code < 0:
        import signal

        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def main(cfg: dict) -> None:
    """The supervisor: confine, fork the program's process, report layers and the verdict."""
    with open(cfg["program"], encoding="utf-8") as f:
        source = f.read()
    status_fd, nonce_fd = cfg["status_fd"], cfg["nonce_fd"]
    if os.read(nonce_fd, 3) != b"go\n":  # exactly 3 bytes: the nonce behind stays in the pipe
        os._exit(1)
    fresh = sandbox_uid.give_up_root()
    namespaces = confine.enter_namespaces(fresh_uid=fresh is not None)
    layers = [*(["fresh-uid"] if fresh else []), *(f"{n}ns" for n in namespaces)]
    if "mnt" in namespaces:
        layers += confine.private_mounts(os.getcwd(), cfg["disk_bytes"],
                                         keep=sandbox_uid.interpreter_paths(),
                                         clones=tuple(fresh.clones) if fresh else ())
        with open(cfg["program"], "w", encoding="utf-8") as f:  # tracebacks quote its lines
            f.write(source)
    if fresh:
        sandbox_uid.release(fresh)
    token = os.urandom(16).hex().encode()
    end_r, end_w = os.pipe()
    cfg = {**cfg, "supervisor": os.getpid()}
    pid = os.fork()
    if pid == 0:
        for fd in (end_r, status_fd, nonce_fd):
            os.close(fd)
        run_program(cfg, source, end_w, token, allow_inet="net" in namespaces)
    os.close(end_w)
    import ctypes  # not dumpable: no /proc/<pid>/mem or fd of this process for the program

    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, ctypes.c_ulong(0), ctypes.c_ulong(0),
                            ctypes.c_ulong(0), ctypes.c_ulong(0))
    nonce = _read_until_newline(nonce_fd).strip().decode("ascii", errors="replace")
    os.close(nonce_fd)
    first = _read_until_newline(end_r)
    try:
        layers += json.loads(first)
    except ValueError:  # the program's process died before it could report
        pass
    os.write(status_fd, (json.dumps({"layers": layers}) + "\n").encode())
    _, wait_status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(wait_status)
    if code == 0 and _read_rest(end_r) == token:
        os.write(status_fd, f"done {nonce}\n".encode())
    os.close(status_fd)
    _relay(code)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
