"""The program's process: confine itself, run the program, then end or answer the judge.

Forked by the ``supervisor`` (as PID 1 of the PID namespace where there is one; killed when
the supervisor dies). It closes every descriptor of the supervisor's, mounts its private
``/proc`` (``procfs``), gives up every capability, sets the resource limits, enters Landlock
and the syscall filter (``seccomp``), installs a Python audit hook (defense in depth only:
``ctypes`` goes around it), reports its layers, then runs the program as ``__main__``:

* without tests, only when the program ran to its end does it write the supervisor's token
  (code that shares this interpreter can reach that call through its frames; the verdict is
  then as strong as tests that share a process with the code they test);
* with tests (``judge``), it answers calls of the entry point until the judge is done; it
  holds no token, and the verdict is the judge's.

Resource limits (inherited by every process the program forks): ``RLIMIT_AS`` (memory),
``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, no core files, ``RLIMIT_NPROC`` (set after
the user namespace exists, so it counts the sandbox's own processes and threads; the kernel
exempts real uid 0, so a root caller without a fresh uid takes nobody's real uid first).
"""

from __future__ import annotations

import json
import os
import sys

from . import confine, judge, procfs, seccomp

PR_SET_PDEATHSIG = 1
BLOCKED_EVENTS = {
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "subprocess.Popen",
    "os.kill",
    "os.killpg",
    "pty.spawn",
}
PATH_EVENTS = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.rename": (0, 1),
    "os.link": (1,),
    "os.symlink": (1,),
    "shutil.rmtree": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
}


def set_limits(cfg: dict) -> None:
    """Hard and soft limits alike: the program cannot raise them again."""
    import resource

    for name, value in (
        ("RLIMIT_AS", cfg["memory_bytes"]),
        ("RLIMIT_CPU", cfg["cpu_s"]),
        ("RLIMIT_FSIZE", cfg["file_bytes"]),
        ("RLIMIT_NPROC", cfg["nproc"]),
        ("RLIMIT_NOFILE", cfg["nofile"]),
        ("RLIMIT_CORE", 0),
    ):
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
    return (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
        isinstance(flags, int) and bool(flags & write_flags)
    )


def flush() -> None:
    """Flush stdout and stderr, ignoring a full disk quota or a closed stream."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _confine(cfg: dict) -> list[str]:
    """Every layer of the program's process, in order; the layers obtained."""
    layers = list(procfs.mount_private_proc()) if cfg["private_proc"] else []
    layers += ["nocaps"] if confine.drop_capabilities() else []
    set_limits(cfg)
    layers += confine.landlock(os.getcwd())
    if seccomp.install(allow_inet=cfg["allow_inet"]):
        layers.append("seccomp")
    install_guard(os.getcwd())
    return layers


def run_program(cfg: dict, source: str, fds: dict[str, int], token: bytes | None) -> None:
    """Confine, report the layers on ``fds["end_w"]``, run the program; never returns.

    ``fds``: ``end_w`` (layers, then the token), and with tests ``request_r``/``reply_w``.
    ``token``: None when the tests are judged apart.
    """
    import ctypes
    import signal

    ctypes.CDLL(None).prctl(
        PR_SET_PDEATHSIG,
        ctypes.c_ulong(int(signal.SIGKILL)),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )
    if os.getppid() not in (cfg["supervisor"], 0):  # it died before the line above (0: PID 1)
        os._exit(1)
    end_w = fds["end_w"]
    os.write(end_w, (json.dumps(_confine(cfg)) + "\n").encode())
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(source, cfg["program"], "exec"), namespace)
        if token is None:
            os.close(end_w)
            judge.serve(
                judge.entry_point(namespace, cfg["entry_point"]),
                fds["request_r"],
                fds["reply_w"],
                flush,
            )
    except BaseException:  # noqa: BLE001 - any end but the program's own is a failure
        import traceback

        traceback.print_exc()
        flush()
        os._exit(1)
    flush()
    if token is not None:
        os.write(end_w, token)
    os._exit(0)
