"""The sandbox's fresh uid: a root caller gives up uid 0 for an unused one before anything runs.

As uid 0 (even with no capability left) a process owns every root-owned file: it may ``chmod``
them and read those only root may read. So a root supervisor, before its namespaces, takes a
random uid from ``FRESH_UID_BASE`` on (one no file or process on the machine has) for real,
effective and saved uid and gid alike, with no supplementary groups; then it has no way back.

Python itself must stay readable under that uid. Where the interpreter's prefix or a
``sys.path`` folder lies below a folder others may not enter (``/root`` in a pyenv install),
that folder is cloned (``open_tree``) while still root, and ``sandbox_confine.private_mounts``
later covers the closed folder with an empty tmpfs and mounts the clone at its old path: the
interpreter is found where it was, and nothing else of ``/root`` is visible.

The switch happens only where it will work: a forked probe first checks that the fresh uid can
make a user and a mount namespace; else ``give_up_root`` returns None and the caller keeps the
root path (``sandbox_confine.enter_namespaces`` without a fresh uid).
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass, field

FRESH_UID_BASE, FRESH_UID_SPAN = 1_600_000_000, 1 << 24
OPEN_TREE, OPEN_TREE_CLONE, AT_RECURSIVE, AT_FDCWD = 428, 1, 0x8000, -100
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
PR_SET_DUMPABLE = 4


@dataclass
class FreshUid:
    """The uid taken, and the trees to mount again where they were (cover, path, clone fd)."""

    uid: int
    clones: list[tuple[str, str, int]] = field(default_factory=list)


def _closed_ancestor(path: str) -> str | None:
    """The highest folder above ``path`` that others may not enter (None: all open)."""
    parts = os.path.abspath(path).split(os.sep)[1:]
    for i in range(1, len(parts)):
        folder = os.sep + os.path.join(*parts[:i])
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return folder
    return None


def interpreter_paths() -> tuple[str, ...]:
    """The folders Python imports from (prefixes and ``sys.path``), resolved and sorted."""
    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix,
             *(p for p in sys.path if p and os.path.isdir(p))}
    return tuple(sorted({os.path.realpath(p) for p in paths}))


def needed_trees() -> list[tuple[str, str]]:
    """(closed folder, tree below it) for every interpreter folder others cannot reach."""
    found: list[tuple[str, str]] = []
    for path in interpreter_paths():
        if any(path == t or path.startswith(t + os.sep) for _, t in found):
            continue  # inside a tree already cloned
        cover = _closed_ancestor(path)
        if cover is not None:
            found.append((cover, path))
    return found


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def _probe(uid: int) -> bool:
    """Whether ``uid`` may make a user and a mount namespace here (tried in a forked child)."""
    pid = os.fork()
    if pid == 0:
        try:
            _, libc = _libc()
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os._exit(0 if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 else 1)
        except BaseException:  # noqa: BLE001 - the probe must never return into the caller
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def give_up_root() -> FreshUid | None:
    """Switch this root process to a fresh uid and gid for good; None (nothing done) where the
    fresh uid could not make its namespaces or a closed interpreter folder could not be cloned.
    """
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return None
    ctypes, libc = _libc()
    uid = FRESH_UID_BASE + int.from_bytes(os.urandom(3), "little") % FRESH_UID_SPAN
    fresh = FreshUid(uid)
    for cover, path in needed_trees():
        fd = libc.syscall(OPEN_TREE, AT_FDCWD, path.encode(),
                          ctypes.c_uint(OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC))
        if fd < 0:
            release(fresh)
            return None
        fresh.clones.append((cover, path, fd))
    if not _probe(uid):
        release(fresh)
        return None
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # leaving uid 0 made this process undumpable: /proc/self/uid_map would stay root's
    libc.prctl(PR_SET_DUMPABLE, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
               ctypes.c_ulong(0))
    return fresh


def release(fresh: FreshUid) -> None:
    """Close the clones' descriptors (after they were mounted, or when unused)."""
    for _, _, fd in fresh.clones:
        os.close(fd)
    fresh.clones.clear()
