"""The sandbox's fresh uid: a root caller gives up uid 0 for an unused one before anything runs.

As uid 0 (even with no capability left) a process owns every root-owned file: it may ``chmod``
them and read those only root may read. So a root supervisor, before its namespaces, takes a
random uid from ``FRESH_UID_BASE`` on (one no file or process on the machine has) for real,
effective and saved uid and gid alike, with no supplementary groups; then it has no way back.

Python itself must stay readable under that uid. Where the interpreter's prefix or a
``sys.path`` folder lies below a folder others may not enter (``/root`` in a pyenv install),
that folder is cloned (``open_tree``) while still root, and ``confine.private_mounts``
later covers the closed folder with an empty tmpfs and mounts the clone at its old path: the
interpreter is found where it was, and nothing else of ``/root`` is visible.

The switch happens only where it will work: a forked child first rehearses all of it (clones,
uid, user and mount namespace, the mounts, listing every interpreter folder); where that fails
``give_up_root`` returns None and the caller keeps the root path (``confine``'s
``enter_namespaces`` without a fresh uid).
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
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 0x4000, 1 << 18
MOVE_MOUNT, MOVE_MOUNT_F_EMPTY_PATH = 429, 0x4


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
    paths = {
        sys.base_prefix,
        sys.prefix,
        sys.exec_prefix,
        *(p for p in sys.path if p and os.path.isdir(p)),
    }
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


def _clone_trees() -> list[tuple[str, str, int]] | None:
    """Detached copies (cover, path, fd) of the trees ``needed_trees`` names; None if refused."""
    ctypes, libc = _libc()
    clones = []
    for cover, path in needed_trees():
        fd = libc.syscall(
            OPEN_TREE,
            AT_FDCWD,
            path.encode(),
            ctypes.c_uint(OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC),
        )
        if fd < 0:
            for *_, other in clones:
                os.close(other)
            return None
        clones.append((cover, path, fd))
    return clones


def _switch(uid: int) -> None:
    """Real, effective and saved uid and gid to ``uid``, no groups: there is no way back."""
    ctypes, libc = _libc()
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # leaving uid 0 made this process undumpable: /proc/self/uid_map would stay root's
    libc.prctl(
        PR_SET_DUMPABLE, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
    )


def map_ids(uid: int, gid: int) -> bool:
    """Map this process's own uid and gid into its new user namespace (files it makes keep them)."""
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    ):
        try:
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        except OSError:
            return False
    return True


def mount_clones(clones: tuple[tuple[str, str, int], ...]) -> bool:
    """In this mount namespace: an empty tmpfs over each cover, each clone at its old path."""
    ctypes, libc = _libc()
    ok = True
    for cover in dict.fromkeys(c for c, _, _ in clones):
        ok &= (
            libc.mount(
                b"tmpfs",
                cover.encode(),
                b"tmpfs",
                ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                b"size=1m,mode=0755",
            )
            == 0
        )
    for _, path, fd in clones:
        os.makedirs(path, exist_ok=True)
        ok &= (
            libc.syscall(
                MOVE_MOUNT, fd, b"", AT_FDCWD, path.encode(), ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH)
            )
            == 0
        )
    return ok


def _probe(uid: int) -> bool:
    """Rehearse the whole path in a forked child (its own clones): uid, namespaces, mounts."""
    pid = os.fork()
    if pid == 0:
        try:
            ctypes, libc = _libc()
            clones = _clone_trees()
            _switch(uid)
            ok = (
                clones is not None
                and libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0
                and map_ids(uid, uid)
                and libc.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) == 0
                and mount_clones(tuple(clones))
                and all(os.listdir(p) is not None for p in interpreter_paths())
            )
            os._exit(0 if ok else 1)
        except BaseException:  # noqa: BLE001 - the probe must never return into the caller
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def give_up_root() -> FreshUid | None:
    """Switch this root process to a fresh uid and gid for good; None (nothing done) where the
    rehearsal in a forked child failed (no user or mount namespace for it, no way to keep the
    interpreter readable).
    """
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return None
    uid = FRESH_UID_BASE + int.from_bytes(os.urandom(3), "little") % FRESH_UID_SPAN
    if not _probe(uid):
        return None
    clones = _clone_trees()
    if clones is None:
        return None
    _switch(uid)
    return FreshUid(uid, clones)


def release(fresh: FreshUid) -> None:
    """Close the clones' descriptors (after they were mounted, or when unused)."""
    for _, _, fd in fresh.clones:
        os.close(fd)
    fresh.clones.clear()
