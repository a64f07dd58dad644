"""Run untrusted (model-written) Python in a sandbox; every HumanEval check runs through here.

``run_sandboxed(source, timeout_s=..., tests=...)`` (``host``) starts a **supervisor**
(``supervisor``; never runs program code, alone holds the status pipe to the host) that
confines itself and forks the **program's process** (``program``). With ``TaskTests`` the verdict
is decided outside the program's process: the supervisor runs the tests (``judge``) and calls
the program's entry point across a pipe, plain data only (``wire``).

One concept per module: ``host`` (the caller's side), ``result`` (``Limits``, ``TaskTests``,
``SandboxResult``), ``fallbacks`` (each refused layer logged), ``cgroup`` (total caps),
``uid`` (a root caller's fresh uid), ``confine`` (namespaces, mounts, capabilities, Landlock),
``procfs`` (the private ``/proc``), ``seccomp`` (the syscall filter), ``supervisor``,
``program``, ``judge`` and ``wire``.

What protects what (``Limits`` holds the numbers; the ``layers`` names in brackets):

==============  =================================================================================
memory          ``RLIMIT_AS`` per process (``memory_bytes``); all processes together
                ``total_memory_bytes`` [cgroup-memory]
CPU             ``RLIMIT_CPU`` per process (timeout rounded up): SIGKILL past it
processes       ``RLIMIT_NPROC`` (``nproc``) [cgroup-pids], group SIGKILL, PID namespace teardown
other processes a PID namespace with its own ``/proc``: no host process, nor its command line,
                is visible [pidns, private-proc]
disk            ``RLIMIT_FSIZE`` per file (``file_bytes``); all files together ``disk_bytes``
                [tmpfs-disk]; writes only in the working folder [landlock-fs, ro-root]
metadata        no chmod/chown/xattr/utime outside the folder [ro-root]; no setuid bits, no
                xattrs, no chown anywhere [seccomp]; no uid 0 owning root's files [fresh-uid]
network         network namespace [netns]; Landlock refuses TCP [landlock-tcp]
local sockets   no Unix-domain socket can be made [seccomp]; nothing in /tmp, /run [empty-tmp]
secrets         empty environment, ``-I`` (no ``PYTHON*`` variables, no user site); root's
                own files unreadable [fresh-uid]; ``/root`` hidden but for Python [fresh-uid]
verdict         the status pipe is the supervisor's only; ``done`` carries the host's nonce;
                with ``TaskTests`` the supervisor judges them apart from the program [judge]
==============  =================================================================================

Nothing is claimed that was not obtained: the result lists the ``layers`` the sandbox got,
``network_isolated`` is true only when a network namespace was created, and the host logs a
warning for each expected layer the OS refused (``fallbacks``). Without ``TaskTests`` the result
passes only on a clean run: exit status 0, the supervisor's ``done`` line with this run's
nonce, and no timeout; code sharing the interpreter with its own checks can still defeat them.
"""

from specdec.bench.sandbox.host import run_sandboxed
from specdec.bench.sandbox.result import Limits, SandboxResult, TaskTests

__all__ = ["Limits", "SandboxResult", "TaskTests", "run_sandboxed"]
