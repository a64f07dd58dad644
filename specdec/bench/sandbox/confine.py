"""The sandbox's OS layers (Linux): namespaces, a private read-only mount view, no capabilities.

Used by the ``supervisor`` and the ``program``'s process (in the sandbox's interpreter), in
this order: ``enter_namespaces`` and ``private_mounts`` in the supervisor, then in the program's
process ``drop_capabilities`` and ``landlock``. Each returns the layers it obtained and
degrades to none where the OS refuses; nothing here raises for a refusal.

* ``userns``/``mntns``/``netns``/``pidns``: a user namespace holding new mount, network (only a
  down loopback) and PID namespaces; the combinations are tried in turn.
* ``tmpfs-disk``: the working folder is a fresh tmpfs of ``disk_bytes``: the total the program
  can write, all files together (``RLIMIT_FSIZE`` caps only one file); gone with the namespace.
* ``empty-tmp``: empty tmpfs over ``/tmp``, ``/run``, ``/var/tmp`` and ``/dev/shm``, so no
  Unix socket or file that other programs left there is visible.
* ``ro-root``: every mount read-only (and ``nosuid``) but the working folder: ``chmod``,
  ``chown``, ``setxattr``, ``utime`` of any file outside fail with ``EROFS``, whatever uid the
  process has (Landlock has no right for metadata).
* ``nocaps``: no capability held (effective, permitted, ambient; the bounding set emptied
  where allowed), so the program cannot undo the mounts, even as uid 0 without a user
  namespace.
* ``landlock-fs``/``-tcp``/``-signal``: writes only in the working folder, no TCP bind or
  connect, no signals out of the sandbox and no abstract Unix sockets (by Landlock ABI).
"""

from __future__ import annotations

import os
import sys

from . import uid as ids

CLONE_FLAGS = {"user": 0x10000000, "mnt": 0x00020000, "net": 0x40000000, "pid": 0x20000000}
# tried in order: unprivileged (user namespace) first, then root without a user namespace
NAMESPACE_SETS = (
    ("user", "mnt", "net", "pid"),
    ("user", "mnt", "net"),
    ("user", "net", "pid"),
    ("user", "net"),
    ("mnt", "net", "pid"),
    ("net", "pid"),
    ("net",),
)
NOBODY = 65534
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
HIDDEN_DIRS = ("/tmp", "/run", "/var/tmp", "/dev/shm")
MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE = 442, -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CAPSET_V3 = 0x20080522
PR_SET_NO_NEW_PRIVS = 38
LANDLOCK_SYSCALLS = (444, 445, 446)  # create_ruleset, add_rule, restrict_self (all arches)
FS_WRITE_V1 = sum(1 << b for b in (1, *range(4, 13)))  # write, remove, make_* (ABI 1)
FS_REFER, FS_TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
NET_TCP = (1 << 0) | (1 << 1)  # bind, connect (ABI 4)
SCOPE_SIGNAL_AND_UNIX = (1 << 0) | (1 << 1)  # abstract unix sockets, signals (ABI 6)


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def enter_namespaces(*, fresh_uid: bool = False) -> tuple[str, ...]:
    """Unshare the first namespace set the OS allows; returns its names (empty: none).

    ``fresh_uid``: this process already left uid 0 (``uid``) and only sets with a user
    and a mount namespace will do (its probe saw them work).
    """
    if not sys.platform.startswith("linux"):
        return ()
    _, libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        # root is exempt from RLIMIT_NPROC by real uid: take nobody's real uid (no capability
        # survives in the program's process: see drop_capabilities)
        os.setresuid(NOBODY, 0, 0)
    for names in NAMESPACE_SETS:
        if fresh_uid and not {"user", "mnt"} <= set(names):
            continue
        if libc.unshare(sum(CLONE_FLAGS[n] for n in names)) == 0:
            if "user" in names:
                ids.map_ids(uid, gid)
            return names
    return ()


def private_mounts(
    workdir: str,
    disk_bytes: int,
    *,
    keep: tuple[str, ...] = (),
    clones: tuple[tuple[str, str, int], ...] = (),
) -> tuple[str, ...]:
    """In a new mount namespace: empty temp dirs, a tmpfs working folder, all else read-only.

    ``workdir`` is made anew (empty) on its tmpfs and becomes the current directory. A temp
    dir holding one of ``keep`` (the interpreter's folders) stays visible, and ``empty-tmp`` is
    then not claimed. Each of ``clones`` (cover, path, detached tree fd; see ``uid``)
    is mounted at ``path`` on an empty tmpfs laid over ``cover``.
    """
    ctypes, libc = _libc()

    def mount(src: str, target: str, fstype: str | None, flags: int, data: str = "") -> bool:
        return (
            libc.mount(
                src.encode(),
                target.encode(),
                fstype.encode() if fstype else None,
                ctypes.c_ulong(flags),
                data.encode() if data else None,
            )
            == 0
        )

    if not mount("none", "/", None, MS_REC | MS_PRIVATE):  # nothing leaks back to the host
        return ()
    layers = []
    present = [d for d in HIDDEN_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    hidden = [d for d in present if not any(p == d or p.startswith(d + os.sep) for p in keep)]
    if (
        all([mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") for d in hidden])
        and hidden == present
    ):
        layers.append("empty-tmp")
    ids.mount_clones(clones)  # rehearsed by give_up_root's probe
    os.makedirs(workdir, exist_ok=True)  # anew where its parent was just hidden
    if mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk_bytes},mode=0700"):
        layers.append("tmpfs-disk")
    os.chdir(workdir)  # the folder on top, not the one below the new mount

    class MountAttr(ctypes.Structure):
        _fields_ = [
            ("attr_set", ctypes.c_uint64),
            ("attr_clr", ctypes.c_uint64),
            ("propagation", ctypes.c_uint64),
            ("userns_fd", ctypes.c_uint64),
        ]

    def setattr_(path: str, flags: int, attr: MountAttr) -> bool:
        return (
            libc.syscall(
                MOUNT_SETATTR,
                AT_FDCWD,
                path.encode(),
                ctypes.c_uint(flags),
                ctypes.byref(attr),
                ctypes.c_size_t(ctypes.sizeof(attr)),
            )
            == 0
        )

    if "tmpfs-disk" in layers and setattr_(
        "/", AT_RECURSIVE, MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID)
    ):
        if setattr_(workdir, 0, MountAttr(0, MOUNT_ATTR_RDONLY)):
            layers.append("ro-root")
        else:  # the folder must stay writable: undo rather than leave a program nowhere to write
            setattr_("/", AT_RECURSIVE, MountAttr(0, MOUNT_ATTR_RDONLY))
    return tuple(layers)


def drop_capabilities() -> bool:
    """Give up every capability for good: no_new_privs (no setuid or file-capability binary
    can hand any back), the bounding set and ambient ones, then capset to nothing."""
    ctypes, libc = _libc()
    ul = ctypes.c_ulong
    if libc.prctl(PR_SET_NO_NEW_PRIVS, ul(1), ul(0), ul(0), ul(0)) != 0:
        return False
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, ul(cap), ul(0), ul(0), ul(0))
    libc.prctl(PR_CAP_AMBIENT, ul(PR_CAP_AMBIENT_CLEAR_ALL), ul(0), ul(0), ul(0))
    header = (ctypes.c_uint32 * 2)(CAPSET_V3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words: all zero
    if libc.capset(header, data) != 0:
        return False
    # the bounding set needs CAP_SETPCAP to shrink; with no_new_privs (set before the program
    # runs) no execve can use it, so what counts is that nothing is held now
    with open("/proc/self/status", encoding="ascii") as f:
        caps = [line.split()[1] for line in f if line.startswith(("CapEff", "CapPrm", "CapAmb"))]
    return all(int(c, 16) == 0 for c in caps)


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

    ruleset = libc.syscall(
        create, ctypes.byref(attr), ctypes.c_size_t(8 * used), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        return ()
    dir_fd = os.open(root, os.O_PATH | os.O_CLOEXEC)
    rule = PathBeneath(fs, dir_fd)
    ul = ctypes.c_ulong
    ok = (
        libc.syscall(add_rule, ruleset, 1, ctypes.byref(rule), ctypes.c_uint32(0)) == 0
        and libc.prctl(PR_SET_NO_NEW_PRIVS, ul(1), ul(0), ul(0), ul(0)) == 0
        and libc.syscall(restrict, ruleset, ctypes.c_uint32(0)) == 0
    )
    os.close(dir_fd)
    os.close(ruleset)
    if not ok:
        return ()
    return (
        "landlock-fs",
        *(("landlock-tcp",) if abi >= 4 else ()),
        *(("landlock-signal",) if abi >= 6 else ()),
    )
