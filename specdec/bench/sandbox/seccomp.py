"""The sandbox's syscall filter: a small seccomp BPF program built here, installed last.

Refused with an error (the program sees ``PermissionError`` or ``OSError``; nothing is killed):

* ``socket`` of every family but ``AF_INET``/``AF_INET6``: no Unix-domain socket, path-based
  or abstract, can be made, so no local service is reached; with ``allow_inet=False`` (no
  network namespace was obtained) those two as well. ``socketpair`` stays allowed for
  ``AF_UNIX`` only: a pair is connected to itself, never to a listener (asyncio needs one);
* extended attributes (``setxattr``/``removexattr`` and their ``l``/``f``/``at`` forms), owner
  changes (``chown`` family), and ``chmod`` with a setuid, setgid or sticky bit;
* reaching other processes or the kernel's bypasses of this filter: ``ptrace``,
  ``process_vm_readv``/``writev``, ``io_uring_*`` (its operations skip seccomp), ``bpf``,
  ``userfaultfd``, ``perf_event_open``, ``keyctl``;
* changing mounts or namespaces: ``mount``, ``umount2``, ``pivot_root``, the new mount API,
  ``unshare``, ``setns``, ``clone`` with a namespace flag, and ``clone3`` (``ENOSYS``, so libc
  falls back to ``clone``, whose flags the filter can read).

A syscall of another architecture (x32, i386 through ``int 0x80``) kills the process. Only
x86_64 and aarch64 are known; elsewhere ``install`` returns False and the layer is not claimed.
"""

from __future__ import annotations

import errno
import platform
import struct

# syscall numbers: (x86_64, aarch64); None where the call does not exist
NR = {
    "socket": (41, 198),
    "socketpair": (53, 199),
    "setxattr": (188, 5),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "removexattr": (197, 14),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
    "setxattrat": (463, 463),
    "removexattrat": (466, 466),
    "chown": (92, None),
    "fchown": (93, 55),
    "lchown": (94, None),
    "fchownat": (260, 54),
    "chmod": (90, None),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "perf_event_open": (298, 241),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "unshare": (272, 97),
    "setns": (308, 268),
    "clone": (56, 220),
    "clone3": (435, 435),
}
DENIED = (
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "userfaultfd",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
)
CHMOD_MODE_ARG = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2}
SPECIAL_MODE_BITS = 0o7000  # setuid, setgid, sticky
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
AUDIT_ARCH = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}  # (arch, column in NR)
X32_BIT = 0x40000000

# classic BPF
LD_W_ABS, JEQ_K, JSET_K, JGE_K, RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
RET_ALLOW, RET_KILL_PROCESS = 0x7FFF0000, 0x80000000
OFF_NR, OFF_ARCH = 0, 4


def _ret_errno(code: int) -> int:
    return 0x00050000 | code


def _arg_low(i: int) -> int:
    """Offset of the low 32 bits of syscall argument ``i`` in ``seccomp_data`` (little-endian)."""
    return 16 + 8 * i


def build_filter(machine: str, *, allow_inet: bool) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for ``machine`` (``platform.machine()``).

    Raises:
        KeyError: an architecture whose syscall numbers are not known here.
    """
    arch, col = AUDIT_ARCH[machine]
    prog = [
        (LD_W_ABS, 0, 0, OFF_ARCH),
        (JEQ_K, 1, 0, arch),
        (RET_K, 0, 0, RET_KILL_PROCESS),
        (LD_W_ABS, 0, 0, OFF_NR),
    ]
    if machine == "x86_64":
        prog += [(JGE_K, 0, 1, X32_BIT), (RET_K, 0, 0, RET_KILL_PROCESS)]

    def rule(name: str, block: list[tuple[int, int, int, int]]) -> None:
        nr = NR[name][col]
        if nr is not None:  # skip the block unless this is the call; each block ends in a return
            prog.extend([(JEQ_K, 0, len(block), nr), *block])

    for name in DENIED:
        rule(name, [(RET_K, 0, 0, _ret_errno(errno.EPERM))])
    for name, arg in CHMOD_MODE_ARG.items():
        rule(
            name,
            [
                (LD_W_ABS, 0, 0, _arg_low(arg)),
                (JSET_K, 0, 1, SPECIAL_MODE_BITS),
                (RET_K, 0, 0, _ret_errno(errno.EPERM)),
                (RET_K, 0, 0, RET_ALLOW),
            ],
        )
    refuse_family = (RET_K, 0, 0, _ret_errno(errno.EAFNOSUPPORT))
    if allow_inet:
        rule(
            "socket",
            [
                (LD_W_ABS, 0, 0, _arg_low(0)),
                (JEQ_K, 2, 0, AF_INET),
                (JEQ_K, 1, 0, AF_INET6),
                refuse_family,
                (RET_K, 0, 0, RET_ALLOW),
            ],
        )
    else:
        rule("socket", [refuse_family])
    # an AF_UNIX pair is connected to itself and to nothing else (asyncio's self-pipe needs it)
    rule(
        "socketpair",
        [
            (LD_W_ABS, 0, 0, _arg_low(0)),
            (JEQ_K, 1, 0, AF_UNIX),
            refuse_family,
            (RET_K, 0, 0, RET_ALLOW),
        ],
    )
    rule(
        "clone",
        [
            (LD_W_ABS, 0, 0, _arg_low(0)),
            (JSET_K, 0, 1, NAMESPACE_FLAGS),
            (RET_K, 0, 0, _ret_errno(errno.EPERM)),
            (RET_K, 0, 0, RET_ALLOW),
        ],
    )
    rule("clone3", [(RET_K, 0, 0, _ret_errno(errno.ENOSYS))])
    prog.append((RET_K, 0, 0, RET_ALLOW))
    return prog


def install(*, allow_inet: bool) -> bool:
    """Install the filter on this thread and its future children; False where it cannot be.

    ``PR_SET_NO_NEW_PRIVS`` must already be set (Landlock sets it) or the caller privileged.
    """
    import ctypes

    try:
        prog = build_filter(platform.machine(), allow_inet=allow_inet)
    except KeyError:
        return False
    raw = b"".join(struct.pack("<HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    ul = ctypes.c_ulong
    libc.prctl(pr_set_no_new_privs, ul(1), ul(0), ul(0), ul(0))
    return (
        libc.prctl(pr_set_seccomp, ul(seccomp_mode_filter), ctypes.byref(fprog), ul(0), ul(0)) == 0
    )
