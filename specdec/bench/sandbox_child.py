"""The child side of ``specdec.bench.sandbox``: confine this process, then run the program.

``specdec.bench.sandbox.run_sandboxed`` runs this file's source as
``python -I -B -c <source> <config json>`` in a new session, with an empty environment, stdin
from /dev/null and a temporary working directory. Before the untrusted program runs, in order:

1. Namespaces (Linux): a new user namespace holding a new network namespace (only a down
   loopback: no network at all) and a new PID namespace. The program then runs as PID 1 of that
   namespace in a forked child that is killed when this process dies, and the kernel kills every
   process left in the namespace when PID 1 ends, even one that left the process group. Each
   combination is tried in turn; only what was created is reported.
2. Resource limits, inherited by every process the program forks: ``RLIMIT_AS`` (memory),
   ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, no core files, and ``RLIMIT_NPROC``
   (set after the user namespace exists, so it counts the sandbox's own processes and threads).
   The kernel exempts real uid 0 from ``RLIMIT_NPROC``, so a root caller first takes nobody's
   real uid (files are still accessed as root: Landlock, not the uid, confines writes). In a
   user namespace the program holds no capability of the host, so it cannot raise the limits
   or take uid 0 back; root without a user namespace keeps its capabilities and could.
3. Landlock (Linux >= 5.13, no privilege needed): nothing may be written, created, removed,
   renamed or linked outside the working directory (reads stay allowed); no TCP bind or connect
   (ABI >= 4); no signals to processes outside the sandbox (ABI >= 6).
4. A Python audit hook (``sys.addaudithook``; it cannot be removed) refusing file writes outside
   the working directory and process launches (``os.system``, ``exec*``, ``subprocess``,
   ``os.kill``). It is defense in depth, not a security boundary: code that calls libc through
   ``ctypes`` goes around it. Steps 1-3 are what contain memory, CPU, processes and writes.

The layers obtained go to the status pipe as one JSON line before the program runs; ``done``
follows when the program ran to its end without an exception (``SystemExit`` included).
"""

from __future__ import annotations

import json
import os
import sys

CLONE_FLAGS = {"user": 0x10000000, "net": 0x40000000, "pid": 0x20000000}
# tried in order: unprivileged (user namespace) first, then root without a user namespace
NAMESPACE_SETS = (("user", "net", "pid"), ("user", "net"), ("net", "pid"), ("net",))
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
NOBODY = 65534
LANDLOCK_SYSCALLS = (444, 445, 446)  # create_ruleset, add_rule, restrict_self (all arches)
FS_WRITE_V1 = sum(1 << b for b in (1, *range(4, 13)))  # write, remove, make_* (ABI 1)
FS_REFER, FS_TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
NET_TCP = (1 << 0) | (1 << 1)  # bind, connect (ABI 4)
SCOPE_SIGNAL_AND_UNIX = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)
BLOCKED_EVENTS = {"os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
                  "os.kill", "os.killpg", "pty.spawn"}
PATH_EVENTS = {"os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.chmod": (0,),
               "os.chown": (0,), "os.truncate": (0,), "os.utime": (0,), "os.rename": (0, 1),
               "os.link": (1,), "os.symlink": (1,), "shutil.rmtree": (0,), "os.setxattr": (0,),
               "os.removexattr": (0,)}


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def enter_namespaces() -> tuple[str, ...]:
    """Unshare the first namespace set the OS allows; returns its names (empty: none)."""
    if not sys.platform.startswith("linux"):
        return ()
    _, libc = _libc()
    if os.geteuid() == 0:
        # root is exempt from RLIMIT_NPROC by real uid: take nobody's real uid (files are still
        # accessed as root; in the user namespace no host capability remains to undo this)
        os.setresuid(NOBODY, 0, 0)
    for names in NAMESPACE_SETS:
        if libc.unshare(sum(CLONE_FLAGS[n] for n in names)) == 0:
            return names
    return ()


def set_limits(cfg: dict) -> None:
    """Hard and soft limits alike: the program cannot raise them again."""
    import resource

    for name, value in (("RLIMIT_AS", cfg["memory_bytes"]), ("RLIMIT_CPU", cfg["cpu_s"]),
                        ("RLIMIT_FSIZE", cfg["file_bytes"]), ("RLIMIT_NPROC", cfg["nproc"]),
                        ("RLIMIT_NOFILE", cfg["nofile"]), ("RLIMIT_CORE", 0)):
        if hasattr(resource, name):
            resource.setrlimit(getattr(resource, name), (value, value))


def landlock(root: str) -> tuple[str, ...]:
    """Confine writes to ``root`` (and TCP, signals where the ABI has them); returns the layers."""
    if not sys.platform.startswith("linux"):
        return ()
    ctypes, libc = _libc()
    create, add_rule, restrict = LANDLOCK_SYSCALLS
    abi = libc.syscall(create, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return ()
    fs = FS_WRITE_V1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0)
    fields = [fs, NET_TCP if abi >= 4 else 0, SCOPE_SIGNAL_AND_UNIX if abi >= 6 else 0]
    used = 3 if abi >= 6 else 2 if abi >= 4 else 1
    attr = (ctypes.c_uint64 * used)(*fields[:used])

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(8 * used),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        return ()
    dir_fd = os.open(root, os.O_PATH | os.O_CLOEXEC)
    rule = PathBeneath(fs, dir_fd)
    ok = (libc.syscall(add_rule, ruleset, 1, ctypes.byref(rule), ctypes.c_uint32(0)) == 0
          and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
          and libc.syscall(restrict, ruleset, ctypes.c_uint32(0)) == 0)
    os.close(dir_fd)
    os.close(ruleset)
    if not ok:
        return ()
    return ("landlock-fs", *(("landlock-tcp",) if abi >= 4 else ()),
            *(("landlock-signal",) if abi >= 6 else ()))


def run_as_pid1() -> None:
    """Fork the namespace's PID 1, which goes on; this process relays its end and exits."""
    pid = os.fork()
    if pid == 0:
        import signal

        _, libc = _libc()
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)  # dies with its parent
        return
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # re-raise the signal that ended PID 1 so the caller sees the same end
        import signal

        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


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


def main(cfg: dict) -> None:
    """Confine, report the layers, run the program; exit 0 only after it ran to its end."""
    with open(cfg["program"], encoding="utf-8") as f:
        source = f.read()
    status = os.fdopen(cfg["status_fd"], "w", buffering=1)
    namespaces = enter_namespaces()
    set_limits(cfg)
    layers = (*(f"{n}ns" for n in namespaces), *landlock(os.getcwd()))
    if "pid" in namespaces:
        run_as_pid1()
    install_guard(os.getcwd())
    status.write(json.dumps({"layers": layers}) + "\n")
    try:
        exec(compile(source, cfg["program"], "exec"), {"__name__": "__main__"})
    except BaseException:  # noqa: BLE001 - any end but the program's own is a failure
        import traceback

        traceback.print_exc()
        _flush()
        os._exit(1)
    _flush()
    status.write("done\n")
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
