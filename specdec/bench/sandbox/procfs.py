"""The sandbox's private ``/proc``: the program sees its own PID namespace's processes only.

The host's ``/proc`` lists every process of the machine, with its command line
(``/proc/<pid>/cmdline``: paths, arguments, at times a token passed on the command line).
The supervisor unshares a PID namespace; its first child, the program's process, is that
namespace's PID 1, and only a process inside it can mount a procfs showing that namespace.
So the program's process, before it gives up its capabilities, takes a mount namespace of its
own (the supervisor keeps its view) and mounts a fresh procfs over ``/proc`` (``nosuid``,
``nodev``, ``noexec``); the host's stays below it, unreachable: the syscall filter refuses
``umount2``. Where the kernel refuses a step nothing is mounted and ``private-proc`` is not
claimed (the host logs the fallback).
"""

from __future__ import annotations

import os

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8


def mount_private_proc() -> tuple[str, ...]:
    """In the PID namespace's first process: a fresh procfs on ``/proc``; the layers obtained."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if os.getpid() != 1:  # not in a fresh PID namespace: a procfs here would show the host's
        return ()
    if libc.unshare(CLONE_NEWNS) != 0:
        return ()
    if (
        libc.mount(
            b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None
        )
        != 0
    ):
        return ()
    return ("private-proc",)
